package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// plainGit runs the git a user would, in dir, with the user's defaults
// (no hardening): the control that shows what a planted file would do.
func plainGit(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	return cmd.CombinedOutput()
}

// plantScript is a shell script that plants, in its working directory,
// every way an agent could hand the host's git a repository: a .git file
// whose gitdir: names another project's repository, one whose gitdir:
// leads to a FIFO, case variants of .git (which git refuses to index), a
// .git directory below the top, and a bare repository whose config runs a
// command that writes marker.
func plantScript(otherGitDir, marker string) string {
	return `set -e
mkdir -p leak trap trapdir/objects trapdir/refs x/.GIT y/git~1 deep/a/.git/refs/heads deep/a/.git/objects/info bare/objects/info bare/refs/heads
echo "gitdir: ` + otherGitDir + `" > leak/.git
echo 'next to a gitdir file' > leak/file.txt
echo 'gitdir: ../trapdir' > trap/.git
mkfifo trapdir/HEAD
printf '[core]\n\tfsmonitor = touch ` + marker + `\n' > x/.GIT/config
printf '[core]\n' > y/git~1/config
echo 'ref: refs/heads/main' > deep/a/.git/HEAD
printf '[core]\n\tfsmonitor = touch ` + marker + `\n' > deep/a/.git/config
: > deep/a/.git/refs/heads/.keep
: > deep/a/.git/objects/info/.keep
echo 'ref: refs/heads/main' > bare/HEAD
printf '[core]\n\tbare = false\n\tworktree = ..\n\tfsmonitor = touch ` + marker + `\n' > bare/config
: > bare/objects/info/.keep
: > bare/refs/heads/.keep
echo 'an ordinary change' > ordinary.txt
`
}

// TestChangeSetNeverReadsPlantedRepositories: embedded repositories, .git
// files and directories at any depth and in any case are entries that are
// labelled and never applied; the daemon's git never follows a planted
// gitdir: (no other project's HEAD in the change set, no hang on a FIFO)
// and never runs a planted config's command; git run by the user in what
// was planted would (the control).
func TestChangeSetNeverReadsPlantedRepositories(t *testing.T) {
	t.Parallel()
	for _, kind := range []paddock.WorkspaceKind{paddock.KindClone, paddock.KindOverlay} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEnv(t)
			e.project(t)
			e.m.Identity = gitx.Identity{Name: "A", Email: "a@example.com"}
			withSandbox(t, e)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			other := gittest.NewRepo(t, t.TempDir(), map[string]string{"secret.txt": "another project\n"})
			r := e.create(t, kind, "")
			marker := filepath.Join(t.TempDir(), "fsmonitor-ran")
			otherHead := gittest.Git(t, other, "rev-parse", "HEAD")
			script := plantScript(filepath.Join(other, ".git"), marker)
			// The agent plants it through its shell; a copy planted on
			// the host is the control's.
			sh(t, e.m, r.ID, script)
			ctl := t.TempDir()
			if out, err := exec.Command("bash", "-c", "cd "+ctl+" && "+script).CombinedOutput(); err != nil {
				t.Fatalf("%v %s", err, out)
			}
			before, lines := gittest.TreeDigest(t, e.repo)

			done := make(chan struct{})
			var cs *paddock.ChangeSet
			var err error
			go func() {
				defer close(done)
				cs, err = e.m.Changes.ChangeSet(ctx, r.ID)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the change set hangs (git opened the planted FIFO)")
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("computing the change set ran the planted fsmonitor")
			}
			b, _ := json.Marshal(cs)
			if strings.Contains(string(b), otherHead) {
				t.Fatalf("another project's HEAD leaked into the change set:\n%s", b)
			}
			entries := map[string]paddock.ChangeEntry{}
			for _, en := range cs.Entries {
				entries[en.Path] = en
				if en.NewMode == "160000" {
					t.Errorf("%s became a gitlink: %+v", en.Path, en)
				}
			}
			for _, p := range []string{"leak/.git", "trap/.git", "x/.GIT/config", "y/git~1/config", "deep/a/.git/HEAD",
				"deep/a/.git/config", "bare/HEAD", "bare/config", "trapdir/objects", "bare/refs/heads/.keep"} {
				en, ok := entries[p]
				if p == "trapdir/objects" { // an empty directory is no entry; its HEAD is a FIFO
					if ok {
						t.Errorf("%s: %+v", p, en)
					}
					continue
				}
				if !ok {
					t.Errorf("%s is not in the change set", p)
					continue
				}
				if en.Blocked == "" || !contains(en.Risks, "git_repository") {
					t.Errorf("%s is not labelled and blocked: %+v", p, en)
				}
			}
			for _, p := range []string{"ordinary.txt", "leak/file.txt"} {
				if en := entries[p]; en.Op != paddock.OpCreate || en.Blocked != "" {
					t.Errorf("%s: %+v", p, en)
				}
			}
			if strings.Contains(cs.Diff, "fsmonitor") || !strings.Contains(cs.Diff, "an ordinary change") {
				t.Errorf("the diff shows what is never applied, or not what is:\n%s", cs.Diff)
			}
			gittest.RequireIdentical(t, e.repo, before, lines)

			// Submitted and approved, it is still never applied.
			s, err := e.m.Changes.Submit(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.Changes.Approve(ctx, r.ID, s.Hash, "a"); err != nil {
				t.Fatal(err)
			}
			_, err = e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{})
			mustCode(t, err, paddock.CodeForbidden)
			_, err = e.m.Changes.ApplyToWorktree(ctx, r.ID, false)
			mustCode(t, err, paddock.CodeForbidden)
			gittest.RequireIdentical(t, e.repo, before, lines)
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("submit or apply ran the planted fsmonitor")
			}

			// The controls: the user's own git in the planted .git
			// directory runs its fsmonitor, and takes the planted bare
			// layout for a repository, so the checks above can fail.
			if out, err := plainGit(filepath.Join(ctl, "deep/a"), "status"); err != nil {
				t.Logf("control git status: %v %s", err, out)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Fatal("control: plain git did not run the planted fsmonitor, so this test proves nothing")
			}
			if out, err := plainGit(filepath.Join(ctl, "bare"), "-c", "safe.bareRepository=all", "rev-parse", "--git-dir"); err != nil || strings.TrimSpace(string(out)) != "." {
				t.Fatalf("control: plain git does not take the planted bare layout for a repository: %v %s", err, out)
			}
		})
	}
}

// TestChangeSetRunsNoDrivers: the project's config defines a filter, a
// textconv, an external diff and a binary diff driver; the agent's
// .gitattributes names them all and marks code binary. Computing,
// submitting and applying the change set runs none of them, its entries
// are the files' own bytes, its diff shows text as text, and git apply of
// it onto base gives the workspace's bytes back. Plain git, given the
// same config and attributes, runs the driver (the control).
func TestChangeSetRunsNoDrivers(t *testing.T) {
	t.Parallel()
	for _, kind := range []paddock.WorkspaceKind{paddock.KindClone, paddock.KindOverlay} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEnv(t)
			marker := filepath.Join(t.TempDir(), "driver-ran")
			touch := "touch " + marker
			for k, v := range map[string]string{
				"filter.x.clean": touch + "; cat", "filter.x.smudge": touch + "; cat", "filter.x.process": touch,
				"diff.y.textconv": touch + "; cat", "diff.z.command": touch, "diff.foo.binary": "true",
			} {
				gittest.Git(t, e.repo, "config", k, v)
			}
			e.project(t)
			e.m.Identity = gitx.Identity{Name: "A", Email: "a@example.com"}
			withSandbox(t, e)
			ctx := context.Background()
			r := e.create(t, kind, "")
			files := map[string]string{
				".gitattributes": "* filter=x diff=y\n*.md diff=z\n*.go -diff\ncmd/*.go binary\n*.h diff=foo\n*.txt text eol=crlf\n",
				"README.md":      "hello, changed\n",
				"cmd/main.go":    "package main\n\nfunc main() {}\n",
				"x.h":            "int f(void);\n",
				"crlf.txt":       "one\r\ntwo\r\n",
			}
			script := "set -e\n"
			for p, c := range files {
				script += fmt.Sprintf("printf '%%s' %s > %s\n", shellQuote(c), p)
			}
			sh(t, e.m, r.ID, script)

			cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("computing the change set ran a driver the agent's attributes named")
			}
			for _, en := range cs.Entries {
				want, ok := files[en.Path]
				if !ok {
					t.Errorf("unexpected entry %+v", en)
					continue
				}
				if id := blobID(t, want); en.NewBlob != id || en.Binary {
					t.Errorf("%s: blob %s binary %t; its bytes are %s", en.Path, en.NewBlob, en.Binary, id)
				}
			}
			if len(cs.Entries) != len(files) || strings.Contains(cs.Diff, "Binary files") || strings.Contains(cs.Diff, "GIT binary patch") ||
				!strings.Contains(cs.Diff, "+func main() {}") || !strings.Contains(cs.Diff, "+int f(void);") || !strings.Contains(cs.Diff, "+one\r\n") {
				t.Fatalf("the diff does not show the text as text:\n%s", cs.Diff)
			}

			// git apply of the diff onto base gives the bytes back.
			check := filepath.Join(t.TempDir(), "check")
			gittest.Git(t, "", "clone", "-q", "--no-checkout", e.repo, check)
			os.WriteFile(filepath.Join(check, ".git/info/attributes"), []byte("* !text !eol !crlf !ident !filter !working-tree-encoding\n"), 0o644)
			gittest.Git(t, check, "checkout", "-q", r.Workspace.BaseRevision)
			apply := exec.Command("git", "apply", "--binary", "-")
			apply.Dir, apply.Stdin = check, strings.NewReader(cs.Diff)
			if out, err := apply.CombinedOutput(); err != nil {
				t.Fatalf("git apply: %v\n%s", err, out)
			}
			for p, want := range files {
				if got, _ := os.ReadFile(filepath.Join(check, p)); string(got) != want {
					t.Errorf("%s: applied %q, want %q", p, got, want)
				}
			}

			// Frozen, approved and committed as those bytes, and still no driver ran.
			s, err := e.m.Changes.Submit(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			e.m.Changes.Approve(ctx, r.ID, s.Hash, "a")
			if _, err := e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{}); err != nil {
				t.Fatal(err)
			}
			for p, want := range files {
				if got, _ := exec.Command("git", "-C", e.repo, "cat-file", "blob", "paddock/"+r.ID+":"+p).Output(); string(got) != want {
					t.Errorf("%s: committed %q, want %q", p, got, want)
				}
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("submit or apply ran a driver")
			}

			// The control: git's own diff, with the project's drivers and
			// the agent's attributes, runs one.
			ctl := filepath.Join(t.TempDir(), "ctl")
			gittest.Git(t, "", "clone", "-q", e.repo, ctl)
			gittest.Git(t, ctl, "config", "diff.z.command", touch)
			for p, c := range files {
				os.WriteFile(filepath.Join(ctl, p), []byte(c), 0o644)
			}
			plainGit(ctl, "diff", "HEAD")
			if _, err := os.Stat(marker); err != nil {
				t.Fatal("control: plain git ran no diff driver, so this test proves nothing")
			}
		})
	}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// blobID is the id git gives content, without any filter.
func blobID(t *testing.T, content string) string {
	t.Helper()
	cmd := exec.Command("git", "hash-object", "--no-filters", "--stdin")
	cmd.Stdin = strings.NewReader(content)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestHooksPathIsProtected: a project whose hooks live in a tracked
// directory named by core.hooksPath. Agents can write there neither with
// the file tools nor with the shell (a file there runs on the user's next
// commit); what the change set holds there is labelled as hooks and never
// applied. Plain git does run what is there (the control).
func TestHooksPathIsProtected(t *testing.T) {
	t.Parallel()
	for _, kind := range []paddock.WorkspaceKind{paddock.KindClone, paddock.KindOverlay} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			os.MkdirAll(filepath.Join(e.repo, "scripts/git"), 0o755)
			os.WriteFile(filepath.Join(e.repo, "scripts/git/pre-commit"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
			gittest.Commit(t, e.repo, "hooks", nil)
			gittest.Git(t, e.repo, "config", "core.hooksPath", "scripts/git")
			e.project(t)
			e.m.Identity = gitx.Identity{Name: "A", Email: "a@example.com"}
			withSandbox(t, e)
			r := e.create(t, kind, "")

			for _, args := range []string{
				`{"path":"scripts/git/post-checkout","content":"#!/bin/sh\nevil\n"}`,
				`{"path":"Scripts/Git/post-checkout","content":"#!/bin/sh\nevil\n"}`,
				`{"path":"scripts/git/pre-commit","content":"#!/bin/sh\nevil\n"}`,
			} {
				_, err := e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(args))
				mustCode(t, err, paddock.CodeForbidden)
			}
			for _, args := range []string{`{"from":"scripts","to":"s2"}`, `{"from":"README.md","to":"scripts/git/pre-push"}`} {
				_, err := e.m.Broker.CallTool(ctx, r.ID, "move", json.RawMessage(args))
				mustCode(t, err, paddock.CodeForbidden)
			}
			_, err := e.m.Broker.CallTool(ctx, r.ID, "delete", json.RawMessage(`{"path":"scripts/git/pre-commit"}`))
			mustCode(t, err, paddock.CodeForbidden)
			for _, script := range []string{"echo evil > scripts/git/post-checkout", "echo evil >> scripts/git/pre-commit",
				"rm scripts/git/pre-commit", "mv scripts s2", "mv scripts/git scripts/g2", "rm -rf scripts"} {
				res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"bash", "-c", script}})
				if err != nil {
					t.Fatal(err)
				}
				if res.ExitCode == 0 {
					t.Errorf("%s: exit 0", script)
				}
			}
			if !slices.Contains(sandboxEnforced(t, e, r.ID), "scripts/git") {
				t.Errorf("scripts/git is not read-only in the view")
			}
			cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs.Entries) != 0 {
				t.Fatalf("the agent changed the hooks: %+v", cs.Entries)
			}
			if kind != paddock.KindClone {
				return
			}
			// A hook written before the project named the directory (the
			// test writes it on the host) is labelled and never applied.
			os.WriteFile(filepath.Join(r.Workspace.Root, "scripts/git/post-checkout"), []byte("#!/bin/sh\nevil\n"), 0o755)
			os.WriteFile(filepath.Join(r.Workspace.Root, "ok.txt"), []byte("ok\n"), 0o644)
			cs, err = e.m.Changes.ChangeSet(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, en := range cs.Entries {
				hook := en.Path == "scripts/git/post-checkout"
				if hook != (en.Blocked != "" && contains(en.Risks, "hook_directory")) {
					t.Errorf("%+v", en)
				}
			}
			s, err := e.m.Changes.Submit(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			e.m.Changes.Approve(ctx, r.ID, s.Hash, "a")
			_, err = e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{})
			mustCode(t, err, paddock.CodeForbidden)

			// The control: git runs what the hooks directory holds.
			marker := filepath.Join(t.TempDir(), "hook-ran")
			ctl := filepath.Join(t.TempDir(), "ctl")
			gittest.Git(t, "", "clone", "-q", e.repo, ctl)
			gittest.Git(t, ctl, "config", "core.hooksPath", "scripts/git")
			os.WriteFile(filepath.Join(ctl, "scripts/git/pre-commit"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755)
			plainGit(ctl, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "x")
			if _, err := os.Stat(marker); err != nil {
				t.Fatal("control: git ran no hook from core.hooksPath, so this test proves nothing")
			}
		})
	}
}

// sandboxEnforced is the read-only paths the last command of run id got.
func sandboxEnforced(t *testing.T, e *env, id string) []string {
	t.Helper()
	res, err := e.m.Broker.Exec(context.Background(), id, paddock.ExecRequest{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Enforcement.ReadOnlyIn
}
