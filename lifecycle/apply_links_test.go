package lifecycle_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/lifecycle"
)

// approvedRun makes a clone run, lets work change its workspace, submits
// and approves the change set.
func (e *env) approvedRun(t *testing.T, work func(ws string)) (*paddock.Run, *paddock.ChangeSet) {
	t.Helper()
	ctx := context.Background()
	r := e.create(t, paddock.KindClone, "")
	work(r.Workspace.Root)
	cs, err := e.m.Changes.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Changes.Approve(ctx, r.ID, cs.Hash, "a"); err != nil {
		t.Fatal(err)
	}
	return r, cs
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p, s string, mode os.FileMode) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(s), mode))
	must(t, os.Chmod(p, mode))
}

// TestApplyNeverWritesThroughALink is the red team's reproduction: run 1
// adds ci-hooks -> .git/hooks, run 2 adds ci-hooks/post-checkout; both
// applied into the working tree must not put a hook into .git/hooks. The
// link is never applied; and a link that stands in the working tree anyway
// (put there by hand, or by an earlier version) is never written through:
// the apply refuses, nothing written.
func TestApplyNeverWritesThroughALink(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	e.m.Identity = gitx.Identity{Name: "A", Email: "a@example.com"}
	hook := filepath.Join(e.repo, ".git", "hooks", "post-checkout")
	r1, cs1 := e.approvedRun(t, func(ws string) {
		must(t, os.Symlink(".git/hooks", filepath.Join(ws, "ci-hooks")))
	})
	if len(cs1.Entries) != 1 || !strings.Contains(cs1.Entries[0].Blocked, ".git") || !contains(cs1.Entries[0].Risks, "symlink") {
		t.Fatalf("the link into .git is not labelled never applied: %+v", cs1.Entries)
	}
	_, err := e.m.Changes.ApplyToWorktree(ctx, r1.ID, false)
	mustCode(t, err, paddock.CodeForbidden)
	_, err = e.m.Changes.Apply(ctx, r1.ID, "", gitx.Identity{})
	mustCode(t, err, paddock.CodeForbidden)

	r2, _ := e.approvedRun(t, func(ws string) {
		writeFile(t, filepath.Join(ws, "ci-hooks", "post-checkout"), "#!/bin/sh\necho pwned\n", 0o755)
	})
	// The link in the working tree, as the first apply used to leave it.
	must(t, os.Symlink(".git/hooks", filepath.Join(e.repo, "ci-hooks")))
	before, lines := gittest.TreeDigest(t, e.repo)
	_, err = e.m.Changes.ApplyToWorktree(ctx, r2.ID, false)
	if !paddock.IsCode(err, paddock.CodeConflict) || !strings.Contains(err.Error(), "ci-hooks is a symbolic link") {
		t.Fatalf("apply through the link: %v", err)
	}
	if _, err := os.Lstat(hook); err == nil {
		t.Fatal(".git/hooks/post-checkout exists: the apply wrote through a link in the working tree")
	}
	gittest.RequireIdentical(t, e.repo, before, lines)

	// A link to an ordinary directory is no different: never written through.
	must(t, os.Remove(filepath.Join(e.repo, "ci-hooks")))
	must(t, os.Symlink("docs", filepath.Join(e.repo, "ci-hooks")))
	before, lines = gittest.TreeDigest(t, e.repo)
	_, err = e.m.Changes.ApplyToWorktree(ctx, r2.ID, false)
	mustCode(t, err, paddock.CodeConflict)
	gittest.RequireIdentical(t, e.repo, before, lines)
	// Without the link, it applies.
	must(t, os.Remove(filepath.Join(e.repo, "ci-hooks")))
	if _, err := e.m.Changes.ApplyToWorktree(ctx, r2.ID, false); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(e.repo, "ci-hooks", "post-checkout")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("ci-hooks/post-checkout: %v %v", fi, err)
	}
}

// TestLinksIntoGitOrProtectedNeverApplied: a link whose target resolves,
// from its own directory, into .git (by any folding) or to a protected
// path, or out of the project, is labelled and refused by both applies —
// even when its label was lost (a change set frozen by an earlier version).
func TestLinksIntoGitOrProtectedNeverApplied(t *testing.T) {
	t.Parallel()
	cases := []struct{ link, target string }{
		{"a/b/x", "../../.git/hooks"},
		{"x", ".GIT"},
		{"x", "./.git/"},
		{"x", ".git./config"},
		{"sub/x", "../.Claude"},
		{"x", ".claude/settings.json"},
		{"x", ".vscode/tasks.json"},
		{"deep/er/x", "../../.claude/hooks"},
		{"x", "sub/.git/hooks"},
		{"x", "../outside"},
		{"x", "/etc"},
	}
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	e.m.Identity = gitx.Identity{Name: "A", Email: "a@example.com"}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.link+" -> "+c.target, "/", "_"), func(t *testing.T) {
			r, cs := e.approvedRun(t, func(ws string) {
				must(t, os.MkdirAll(filepath.Dir(filepath.Join(ws, c.link)), 0o755))
				must(t, os.Symlink(c.target, filepath.Join(ws, c.link)))
			})
			if len(cs.Entries) != 1 || !strings.Contains(cs.Entries[0].Blocked, "never applied") {
				t.Fatalf("not labelled never applied: %+v", cs.Entries)
			}
			before, lines := gittest.TreeDigest(t, e.repo)
			_, err := e.m.Changes.ApplyToWorktree(ctx, r.ID, false)
			mustCode(t, err, paddock.CodeForbidden)
			_, err = e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{})
			mustCode(t, err, paddock.CodeForbidden)

			// The label lost: apply judges the frozen target again.
			frozen := filepath.Join(e.state, "artifacts", r.ID, "changeset-"+strings.TrimPrefix(cs.Hash, "sha256:")+".json")
			b, err := os.ReadFile(frozen)
			must(t, err)
			var f paddock.ChangeSet
			must(t, json.Unmarshal(b, &f))
			f.Entries[0].Blocked = ""
			b, _ = json.Marshal(&f)
			must(t, os.WriteFile(frozen, b, 0o600))
			_, err = e.m.Changes.ApplyToWorktree(ctx, r.ID, false)
			mustCode(t, err, paddock.CodeForbidden)
			_, err = e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{})
			mustCode(t, err, paddock.CodeForbidden)
			gittest.RequireIdentical(t, e.repo, before, lines)
		})
	}
	// An ordinary link is applied.
	r, cs := e.approvedRun(t, func(ws string) { must(t, os.Symlink("../docs", filepath.Join(ws, "cmd", "docs"))) })
	if cs.Entries[0].Blocked != "" {
		t.Fatalf("an ordinary link is blocked: %+v", cs.Entries)
	}
	if _, err := e.m.Changes.ApplyToWorktree(ctx, r.ID, false); err != nil {
		t.Fatal(err)
	}
}

// typeChanges are the changes of a path's type a change set can carry, each
// as the base has it (committed), as the user's tree has it on top, and as
// the agent leaves it. refuse, when set, is what the apply into the working
// tree must say when it refuses, having written nothing.
var typeChanges = []struct {
	name   string
	base   func(t *testing.T, repo string)
	user   func(t *testing.T, repo string)
	work   func(t *testing.T, ws string)
	refuse string
}{
	{name: "link to a directory becomes a directory",
		base: func(t *testing.T, repo string) { must(t, os.Symlink("docs", filepath.Join(repo, "lnk"))) },
		work: func(t *testing.T, ws string) {
			must(t, os.Remove(filepath.Join(ws, "lnk")))
			writeFile(t, filepath.Join(ws, "lnk", "post-checkout"), "#!/bin/sh\n", 0o755)
		}},
	{name: "link to a file becomes a directory tree",
		work: func(t *testing.T, ws string) {
			must(t, os.Remove(filepath.Join(ws, "link")))
			writeFile(t, filepath.Join(ws, "link", "deep", "a.txt"), "a\n", 0o644)
		}},
	{name: "file becomes a directory",
		user: func(t *testing.T, repo string) { must(t, os.Chmod(filepath.Join(repo, "run.sh"), 0o700)) },
		work: func(t *testing.T, ws string) {
			must(t, os.Remove(filepath.Join(ws, "run.sh")))
			writeFile(t, filepath.Join(ws, "run.sh", "inner.txt"), "inner\n", 0o644)
		}},
	{name: "directory becomes a file",
		base: func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, "d", "x.txt"), "x\n", 0o644)
			writeFile(t, filepath.Join(repo, "d", "sub", "y.txt"), "y\n", 0o600)
		},
		user: func(t *testing.T, repo string) {
			must(t, os.Chmod(filepath.Join(repo, "d"), 0o700))
			must(t, os.Chmod(filepath.Join(repo, "d", "sub"), 0o750))
			must(t, os.Mkdir(filepath.Join(repo, "d", "sub", "empty"), 0o705))
		},
		work: func(t *testing.T, ws string) {
			must(t, os.RemoveAll(filepath.Join(ws, "d")))
			writeFile(t, filepath.Join(ws, "d"), "now a file\n", 0o644)
		}},
	{name: "directory becomes a link",
		work: func(t *testing.T, ws string) {
			must(t, os.RemoveAll(filepath.Join(ws, "docs")))
			must(t, os.Symlink("cmd", filepath.Join(ws, "docs")))
		}},
	{name: "link becomes a file",
		work: func(t *testing.T, ws string) {
			must(t, os.Remove(filepath.Join(ws, "link")))
			writeFile(t, filepath.Join(ws, "link"), "a file now\n", 0o755)
		}},
	{name: "file becomes a link",
		user: func(t *testing.T, repo string) { must(t, os.Chmod(filepath.Join(repo, "README.md"), 0o600)) },
		work: func(t *testing.T, ws string) {
			must(t, os.Remove(filepath.Join(ws, "README.md")))
			must(t, os.Symlink("run.sh", filepath.Join(ws, "README.md")))
		}},
	{name: "link retargeted, file made executable",
		work: func(t *testing.T, ws string) {
			must(t, os.Remove(filepath.Join(ws, "link")))
			must(t, os.Symlink("run.sh", filepath.Join(ws, "link")))
			must(t, os.Chmod(filepath.Join(ws, "cmd", "main.go"), 0o755))
		}},
	{name: "directory with an untracked file becomes a file",
		base: func(t *testing.T, repo string) { writeFile(t, filepath.Join(repo, "d", "x.txt"), "x\n", 0o644) },
		user: func(t *testing.T, repo string) { writeFile(t, filepath.Join(repo, "d", "mine.txt"), "mine\n", 0o644) },
		work: func(t *testing.T, ws string) {
			must(t, os.RemoveAll(filepath.Join(ws, "d")))
			writeFile(t, filepath.Join(ws, "d"), "file\n", 0o644)
		},
		refuse: "d/mine.txt, which the change set does not remove"},
	{name: "a link in the user's tree where a directory is written",
		user:   func(t *testing.T, repo string) { must(t, os.Symlink("docs", filepath.Join(repo, "out"))) },
		work:   func(t *testing.T, ws string) { writeFile(t, filepath.Join(ws, "out", "new.txt"), "new\n", 0o644) },
		refuse: "out is a symbolic link in the working tree"},
	{name: "a file in the user's tree where a directory is written",
		user:   func(t *testing.T, repo string) { writeFile(t, filepath.Join(repo, "out"), "mine\n", 0o644) },
		work:   func(t *testing.T, ws string) { writeFile(t, filepath.Join(ws, "out", "new.txt"), "new\n", 0o644) },
		refuse: "out is a file in the working tree"},
	{name: "a link in the user's tree where a directory goes",
		base: func(t *testing.T, repo string) { writeFile(t, filepath.Join(repo, "d", "x.txt"), "x\n", 0o644) },
		user: func(t *testing.T, repo string) {
			must(t, os.Rename(filepath.Join(repo, "d"), filepath.Join(repo, "real")))
			must(t, os.Symlink("real", filepath.Join(repo, "d")))
		},
		work:   func(t *testing.T, ws string) { must(t, os.RemoveAll(filepath.Join(ws, "d"))) },
		refuse: "d is a symbolic link in the working tree"},
}

// TestTypeChanges applies every type change to a branch and into the
// working tree, and undoes it: the branch holds the workspace's tree, the
// working tree holds the workspace's files, the undo gives back the tree
// as it was (directories and their permissions, a 0600 file) byte for
// byte, and a change the working tree cannot take is refused before
// anything is written.
func TestTypeChanges(t *testing.T) {
	t.Parallel()
	for _, c := range typeChanges {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			if c.base != nil {
				c.base(t, e.repo)
				gittest.Commit(t, e.repo, "base", nil)
			}
			e.project(t)
			e.m.Identity = gitx.Identity{Name: "A", Email: "a@example.com"}
			if c.user != nil {
				c.user(t, e.repo)
			}
			var ws string
			toBranch, cs := e.approvedRun(t, func(w string) { ws = w; c.work(t, w) })
			t.Logf("entries: %+v", cs.Entries)
			want := filesOf(t, ws)
			r, _ := e.approvedRun(t, func(w string) { c.work(t, w) })

			// To a branch: the tree of the workspace, the working tree untouched.
			files, status := filesOf(t, e.repo), gittest.Git(t, e.repo, "status", "--porcelain", "--ignored")
			if _, err := e.m.Changes.Apply(ctx, toBranch.ID, "tc", gitx.Identity{}); err != nil {
				t.Fatal(err)
			}
			if filesOf(t, e.repo) != files || gittest.Git(t, e.repo, "status", "--porcelain", "--ignored") != status {
				t.Fatal("the apply to a branch touched the working tree")
			}
			before, lines := gittest.TreeDigest(t, e.repo)
			check := filepath.Join(t.TempDir(), "check")
			gittest.Git(t, "", "clone", "-q", "-b", "tc", e.repo, check)
			if got := filesOf(t, check); got != want {
				t.Fatalf("the branch holds:\n%s\nthe workspace:\n%s", got, want)
			}

			// Into the working tree, then undone.
			_, err := e.m.Changes.ApplyToWorktree(ctx, r.ID, false)
			noLeftovers(t, e.repo)
			if c.refuse != "" {
				if !paddock.IsCode(err, paddock.CodeConflict) || !strings.Contains(err.Error(), c.refuse) {
					t.Fatalf("apply: %v, want a conflict saying %q", err, c.refuse)
				}
				gittest.RequireIdentical(t, e.repo, before, lines)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := filesOf(t, e.repo); got != want {
				t.Fatalf("the working tree holds:\n%s\nthe workspace:\n%s", got, want)
			}
			if _, err := e.m.Changes.Undo(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
			noLeftovers(t, e.repo)
			gittest.RequireIdentical(t, e.repo, before, lines)
			// And again, after the undo.
			if _, err := e.m.Changes.ApplyToWorktree(ctx, r.ID, false); err != nil {
				t.Fatal(err)
			}
			if got := filesOf(t, e.repo); got != want {
				t.Fatalf("applied again, the working tree holds:\n%s\nthe workspace:\n%s", got, want)
			}
		})
	}
}

// TestApplyVerifiesWhatItLeaves: a concurrent writer changes the tree
// between the renames and the verification (or swaps a directory for a
// link before the commit); the apply notices, rolls back to the tree as it
// was, records why and reports it.
func TestApplyVerifiesWhatItLeaves(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"verify", "commit"} {
		t.Run(point, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			e.project(t)
			r, _ := e.approvedRun(t, func(ws string) {
				writeFile(t, filepath.Join(ws, "README.md"), "approved\n", 0o644)
				writeFile(t, filepath.Join(ws, "cmd", "new.go"), "package main\n", 0o644)
				must(t, os.Remove(filepath.Join(ws, "docs", "ü.txt")))
				writeFile(t, filepath.Join(ws, "new", "f.txt"), "f\n", 0o644)
			})
			before, lines := gittest.TreeDigest(t, e.repo)
			lifecycle.SetTestHook(e.m, func(p string) {
				if p != point {
					return
				}
				switch p {
				case "verify":
					os.WriteFile(filepath.Join(e.repo, "cmd", "new.go"), []byte("package evil\n"), 0o644)
				case "commit":
					// A link where the apply makes a directory: the new
					// file would land elsewhere if the apply followed it.
					os.Mkdir(filepath.Join(e.repo, "elsewhere"), 0o755)
					os.Symlink("elsewhere", filepath.Join(e.repo, "new"))
				}
			})
			_, err := e.m.Changes.ApplyToWorktree(ctx, r.ID, false)
			lifecycle.SetTestHook(e.m, nil)
			want := map[string]string{"verify": "cmd/new.go holds blob", "commit": "new is a symbolic link"}[point]
			if !paddock.IsCode(err, paddock.CodeConflict) || !strings.Contains(err.Error(), "rolled back") || !strings.Contains(err.Error(), want) {
				t.Fatalf("apply: %v", err)
			}
			if point == "commit" {
				if ents, _ := os.ReadDir(filepath.Join(e.repo, "elsewhere")); len(ents) > 0 {
					t.Fatalf("the apply wrote through the link swapped in: %v", ents)
				}
				os.Remove(filepath.Join(e.repo, "new"))
				os.Remove(filepath.Join(e.repo, "elsewhere"))
			}
			noLeftovers(t, e.repo)
			gittest.RequireIdentical(t, e.repo, before, lines)
			evs, _ := e.m.Runs.Events(ctx, r.ID, 0, 1000)
			if last := evs[len(evs)-1]; last.Type != paddock.EventApplyFailed || !strings.Contains(string(last.Data), want) {
				t.Fatalf("last event: %+v", last)
			}
			_, err = e.m.Changes.Undo(ctx, r.ID)
			mustCode(t, err, paddock.CodeConflict) // nothing was applied
			// Nothing in the way any more: it applies.
			if _, err := e.m.Changes.ApplyToWorktree(ctx, r.ID, false); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// filesOf lists the files and links under root with their modes and
// contents, without .git and .paddock (directories are not content).
func filesOf(t *testing.T, root string) string {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", root, tmp).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	os.RemoveAll(filepath.Join(tmp, ".git"))
	os.RemoveAll(filepath.Join(tmp, ".paddock"))
	_, lines := gittest.TreeDigest(t, tmp)
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, " d") && !strings.HasPrefix(l, ". ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// noLeftovers fails if an apply or an undo left a staged file.
func noLeftovers(t *testing.T, root string) {
	t.Helper()
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(fi.Name(), ".paddock-") {
			t.Errorf("left %s", p)
		}
		return nil
	})
}
