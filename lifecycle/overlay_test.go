package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/postgres/pgtest"
	"github.com/paddock-dev/paddock/sandbox"
	"github.com/paddock-dev/paddock/workspace"
)

// withSandbox gives the env's manager resident sandboxes and, when the
// tests run as root, an unprivileged uid for commands; it skips where the
// sandbox cannot run (failing under CI).
func withSandbox(t testing.TB, e *env) {
	t.Helper()
	e.m.Harnesses = &sandbox.Pool{Dir: filepath.Join(e.state, "harness")}
	t.Cleanup(e.m.Harnesses.Close)
	if os.Getuid() == 0 {
		e.m.SandboxUID = 65534
	}
	r, err := e.m.Runs.Create(context.Background(), paddock.CreateRunRequest{Project: "my-app", Kind: "overlay"})
	if err == nil {
		_, err = e.m.Broker.Exec(context.Background(), r.ID, paddock.ExecRequest{Argv: []string{"true"}})
	}
	if err != nil && paddock.IsCode(err, paddock.CodeUnsupported) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("overlay workspaces do not work on this CI machine: %v", err)
		}
		t.Skipf("overlay workspaces do not work here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	e.m.Runs.Reject(context.Background(), r.ID)
}

// writeAndSubmit has run id's agent write a file at path through the
// write tool and submit the change set: a run with a submission, as a
// review needs one.
func writeAndSubmit(t *testing.T, m *lifecycle.Manager, id, path string) {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"path": path, "content": "x\n"})
	if _, err := m.Broker.CallTool(context.Background(), id, "write", args); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Changes.Submit(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}

func sh(t *testing.T, m *lifecycle.Manager, id, script string) string {
	t.Helper()
	res, err := m.Broker.Exec(context.Background(), id, paddock.ExecRequest{Argv: []string{"bash", "-c", script}})
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s: exit %d\n%s%s", script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

// TestOverlayRun: an overlay run's tools and commands see the same bytes,
// its change set comes from the upper layer, its snapshot is shared and
// collected, and reject leaves nothing behind.
func TestOverlayRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	r := e.create(t, paddock.KindOverlay, "on_reject")
	snap := workspace.SnapshotDir(filepath.Join(e.state, "snapshots"), "my-app", r.Workspace.BaseRevision)
	if _, err := os.Stat(filepath.Join(snap, "README.md")); err != nil {
		t.Fatalf("no snapshot: %v", err)
	}
	// A tool writes, a command reads it; a command writes, a tool reads it.
	if _, err := e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(`{"path":"new.txt","content":"from a tool\n"}`)); err != nil {
		t.Fatal(err)
	}
	if out := sh(t, e.m, r.ID, "cat new.txt; echo changed > README.md; rm run.sh; mkdir -p a/b; echo deep > a/b/c"); out != "from a tool\n" {
		t.Fatalf("the command saw %q", out)
	}
	res, err := e.m.Broker.CallTool(ctx, r.ID, "read", json.RawMessage(`{"path":"README.md"}`))
	if err != nil || !strings.Contains(fmt.Sprint(res), "changed") {
		t.Fatalf("the tool saw %v %v", res, err)
	}
	// Nothing of it on the host but the upper layer; the snapshot is intact.
	if b, _ := os.ReadFile(filepath.Join(snap, "README.md")); string(b) != "hello\n" {
		t.Fatal("the snapshot changed")
	}
	if _, err := os.Stat(filepath.Join(r.Workspace.Root, "README.md")); err == nil {
		t.Fatal("the merged view is mounted on the host")
	}
	cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]paddock.ChangeOp{}
	for _, en := range cs.Entries {
		got[en.Path] = en.Op
	}
	want := map[string]paddock.ChangeOp{"new.txt": paddock.OpCreate, "README.md": paddock.OpModify, "run.sh": paddock.OpDelete, "a/b/c": paddock.OpCreate}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("change set %v, want %v", got, want)
	}
	// A checkpoint and a resume read the merged view.
	if _, err := e.m.Runs.Checkpoint(ctx, r.ID, "test"); err != nil {
		t.Fatal(err)
	}
	rr, err := e.m.Runs.Resume(ctx, r.ID)
	if err != nil || rr.Drift {
		t.Fatalf("resume: %+v %v", rr, err)
	}
	// A second run at the base shares the snapshot; its creation does not
	// touch it.
	fi1, _ := os.Stat(snap)
	start := time.Now()
	r2 := e.create(t, paddock.KindOverlay, "on_reject")
	took := time.Since(start)
	fi2, _ := os.Stat(snap)
	if !os.SameFile(fi1, fi2) || !fi1.ModTime().Equal(fi2.ModTime()) {
		t.Fatal("the snapshot was rebuilt")
	}
	t.Logf("an overlay run at a snapshotted base: %v", took)
	if out := sh(t, e.m, r2.ID, "cat README.md; ls new.txt 2>&1 || true"); !strings.HasPrefix(out, "hello\n") || strings.Contains(out, "new.txt\n") {
		t.Fatalf("the second run sees the first's changes: %q", out)
	}
	// Submit, approve, apply to a branch.
	frozen, err := e.m.Changes.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Changes.Approve(ctx, r.ID, frozen.Hash, "tester"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{Name: "T", Email: "t@example.com"}); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("git", "-C", e.repo, "show", "paddock/"+r.ID+":README.md").Output()
	if string(out) != "changed\n" {
		t.Fatalf("applied README.md: %q", out)
	}
	// Reject gives the harness back and removes the layers, leaving the
	// project byte-identical; gc collects the snapshot once no run uses it.
	before, _ := gittest.TreeDigest(t, e.repo)
	pid := harnessPID(t, e.m, r2.ID)
	if _, err := e.m.Runs.Reject(ctx, r2.ID); err != nil {
		t.Fatal(err)
	}
	waitExit(t, pid)
	if _, err := os.Stat(r2.Workspace.Root); err == nil {
		t.Fatal("reject left the layers")
	}
	if _, err := e.m.GC(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(snap); err != nil {
		t.Fatal("gc removed a snapshot a run still uses")
	}
	if _, err := e.m.Runs.Reject(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	f, err := e.m.GC(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := gittest.TreeDigest(t, e.repo); after != before {
		t.Fatal("the project changed with the overlay runs' reject and gc")
	}
	if _, err := os.Stat(snap); err == nil {
		t.Fatalf("gc kept an unused snapshot: %+v", f)
	}
}

func harnessPID(t *testing.T, m *lifecycle.Manager, id string) int {
	t.Helper()
	res, err := m.Broker.Exec(context.Background(), id, paddock.ExecRequest{Argv: []string{"true"}})
	if err != nil || res.Enforcement.Mode != "resident" || res.Enforcement.HarnessPID == 0 {
		t.Fatalf("no harness: %+v %v", res, err)
	}
	return res.Enforcement.HarnessPID
}

func waitExit(t *testing.T, pid int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(b), ") Z ") || syscall.Kill(pid, 0) != nil {
			return
		}
	}
	t.Fatalf("harness %d still runs", pid)
}

// TestOverlayMatchesClone is the property test of copy-on-write change
// sets: random edit scripts (create, modify, delete, chmod, symlink,
// rename, binary, nested and empty directories, a directory deleted and
// made anew, type changes, the agent's own git committing, stashing,
// branching and resetting, names and contents of any bytes) run in an
// overlay run and in a clone run must give identical change sets, and the
// diff applied to the base must give the clone's tree.
func TestOverlayMatchesClone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	for round := 0; round < rounds; round++ {
		script := editScript(rng)
		ov := e.create(t, paddock.KindOverlay, "on_reject")
		cl := e.create(t, paddock.KindClone, "on_reject")
		sh(t, e.m, ov.ID, script)
		sh(t, e.m, cl.ID, script)
		a, err := e.m.Changes.ChangeSet(ctx, ov.ID)
		if err != nil {
			t.Fatal(err)
		}
		b, err := e.m.Changes.ChangeSet(ctx, cl.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a.Hash != b.Hash || a.Diff != b.Diff || fmt.Sprint(a.Entries) != fmt.Sprint(b.Entries) {
			t.Fatalf("round %d (seed %d): the change sets differ\nscript:\n%s\noverlay: %v\nclone:   %v", round, seed, script, a.Entries, b.Entries)
		}
		// Only what holds a NUL is a binary patch, whatever the attributes say.
		binaries := 0
		for _, en := range a.Entries {
			if en.Binary {
				binaries++
			}
		}
		if n := strings.Count(a.Diff, "GIT binary patch"); n != binaries {
			t.Fatalf("round %d (seed %d): %d binary patches for %d binary files\nscript:\n%s", round, seed, n, binaries, script)
		}
		// git apply of the diff onto the base reproduces the workspace.
		check := filepath.Join(t.TempDir(), "check")
		if out, err := exec.Command("git", "clone", "-q", "--no-checkout", e.repo, check).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		if out, err := exec.Command("git", "-C", check, "checkout", "-q", cl.Workspace.BaseRevision).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		if a.Diff != "" {
			apply := exec.Command("git", "-C", check, "apply", "--binary", "-")
			apply.Stdin = strings.NewReader(a.Diff)
			if out, err := apply.CombinedOutput(); err != nil {
				t.Fatalf("round %d: git apply: %v %s\nscript:\n%s", round, err, out, script)
			}
		}
		want, _ := digestNoGit(t, cl.Workspace.Root)
		got, _ := digestNoGit(t, check)
		if want != got {
			t.Fatalf("round %d (seed %d): the applied diff does not reproduce the workspace\nscript:\n%s\nwant:\n%s\ngot:\n%s", round, seed, script, want, got)
		}
		e.m.Runs.Reject(ctx, ov.ID)
		e.m.Runs.Reject(ctx, cl.ID)
	}
}

// editScript writes a random shell script of edits against the test
// repository (README.md, cmd/main.go, docs/ü.txt, link, run.sh).
func editScript(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	files := []string{"README.md", "cmd/main.go", "docs/ü.txt", "run.sh"}
	n := 3 + rng.Intn(8)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("f%d-%d", i, rng.Intn(1000))
		switch rng.Intn(19) {
		case 0: // create, nested
			fmt.Fprintf(&b, "mkdir -p d%d/e && echo %q > d%d/e/%s.txt\n", i, name, i, name)
		case 1: // modify
			fmt.Fprintf(&b, "echo %q >> %s || true\n", name, files[rng.Intn(len(files))])
		case 2: // delete
			fmt.Fprintf(&b, "rm -rf %s\n", files[rng.Intn(len(files))])
		case 3: // chmod
			fmt.Fprintf(&b, "chmod %s %s 2>/dev/null || true\n", []string{"+x", "-x"}[rng.Intn(2)], files[rng.Intn(len(files))])
		case 4: // symlink
			fmt.Fprintf(&b, "ln -sf %s %s.lnk\n", files[rng.Intn(len(files))], name)
		case 5: // rename
			fmt.Fprintf(&b, "mv %s %s.moved 2>/dev/null || true\n", files[rng.Intn(len(files))], name)
		case 6: // binary
			fmt.Fprintf(&b, "for i in $(seq %d); do printf '\\x00\\xff%%d' $i; done > %s.bin\n", 1+rng.Intn(500), name)
		case 7: // empty directory
			fmt.Fprintf(&b, "mkdir -p empty%d/inner\n", i)
		case 8: // a directory deleted and made anew (opaque in the upper layer)
			fmt.Fprintf(&b, "rm -rf cmd && mkdir cmd && echo %q > cmd/new.go\n", name)
		case 9: // the link changed
			fmt.Fprintf(&b, "rm -rf link && ln -s %s link\n", files[rng.Intn(len(files))])
		case 10: // modify then restore (a copy-up that changes nothing)
			fmt.Fprintf(&b, "if [ -f README.md ]; then cp README.md /tmp/r && echo x >> README.md && cp /tmp/r README.md; fi\n")
		case 11: // a file or a link becomes a directory
			p := append(files, "link")[rng.Intn(len(files)+1)]
			fmt.Fprintf(&b, "{ rm -rf %s && mkdir -p %s/in && echo %q > %s/in/%s.txt; } 2>/dev/null || true\n", p, p, name, p, name)
		case 12: // a directory becomes a file or a link
			d := []string{"docs", "cmd"}[rng.Intn(2)]
			fmt.Fprintf(&b, "{ rm -rf %s && %s; } 2>/dev/null || true\n", d, []string{"echo " + name + " > " + d, "ln -s README.md " + d}[rng.Intn(2)])
		case 13: // the agent's git commits what there is: the change set must still show it
			fmt.Fprintf(&b, "git add -A && git commit -qm %q || true\n", name)
		case 14: // stash and pop, untracked files included
			fmt.Fprintf(&b, "git stash -q -u && git stash pop -q || true\n")
		case 15: // a branch of its own
			fmt.Fprintf(&b, "git checkout -q -b b%d || true\n", i)
		case 16: // undo the last commit, keeping the tree
			fmt.Fprintf(&b, "git reset -q --soft HEAD~1 2>/dev/null || true\n")
		case 17: // any bytes: a name and a content that are not UTF-8, with CR, NUL, no final newline
			fmt.Fprintf(&b, "printf '%s' > \"$(printf '%s')\"\n", octal(randomBytes(rng, 1+rng.Intn(40), false)), octal(randomBytes(rng, 1+rng.Intn(8), true)))
		case 18: // attributes that would make text binary: the diff shows it as text
			fmt.Fprintf(&b, "{ mkdir -p cmd docs && printf '* -diff\\n*.md binary\\n' > %s.gitattributes; } 2>/dev/null || true\n", []string{"", "cmd/", "docs/"}[rng.Intn(3)])
		}
	}
	return b.String()
}

// randomBytes returns n random bytes; for a name, none that a name cannot
// hold (NUL, '/') nor a leading '.' or '-'.
func randomBytes(rng *rand.Rand, n int, name bool) []byte {
	out := make([]byte, 0, n)
	for len(out) < n {
		c := byte(rng.Intn(256))
		if name && (c == 0 || c == '/' || len(out) == 0 && (c == '.' || c == '-')) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// octal writes b as printf escapes, so that any byte reaches the file.
func octal(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		fmt.Fprintf(&s, "\\%03o", c)
	}
	return s.String()
}

// The test binary is the sandbox's helper and harness too: they re-execute
// /proc/self/exe.
func TestMain(m *testing.M) {
	sandbox.Main()
	code := m.Run()
	pgtest.StopShared() // the cluster the node tests share, if one started
	sandbox.SweepCgroups()
	os.Exit(code)
}

// TestOverlayChangeSetLimits: an overlay run's limits are applied from the
// upper layer, before anything of it is read or rendered.
func TestOverlayChangeSetLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	e.m.ChangeSetLimits = lifecycle.ChangeSetLimits{MaxFile: 1000, MaxTotal: 1500, MaxEntries: 3}
	r := e.create(t, paddock.KindOverlay, "on_reject")
	sh(t, e.m, r.ID, "head -c 2000 /dev/zero > big")
	_, err := e.m.Changes.ChangeSet(context.Background(), r.ID)
	if !paddock.IsCode(err, paddock.CodeTooLarge) || !strings.Contains(err.Error(), "big") {
		t.Fatalf("a file over the limit: %v", err)
	}
	sh(t, e.m, r.ID, "rm big; head -c 800 /dev/zero > a; head -c 800 /dev/zero > b")
	if _, err := e.m.Changes.ChangeSet(context.Background(), r.ID); !paddock.IsCode(err, paddock.CodeTooLarge) {
		t.Fatalf("content over the total: %v", err)
	}
	sh(t, e.m, r.ID, "rm a b; touch 1 2 3 4")
	if _, err := e.m.Changes.ChangeSet(context.Background(), r.ID); !paddock.IsCode(err, paddock.CodeTooLarge) {
		t.Fatalf("entries over the limit: %v", err)
	}
	sh(t, e.m, r.ID, "rm 1 2 3 4")
	if cs, err := e.m.Changes.ChangeSet(context.Background(), r.ID); err != nil || len(cs.Entries) != 0 {
		t.Fatalf("back within the limits: %+v %v", cs, err)
	}
}

// TestOverlayRefusedWhereItCannotWork: without resident sandboxes an overlay
// is refused by name with the reason, and auto makes a clone and says why.
func TestOverlayRefusedWhereItCannotWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	_, err := e.m.Runs.Create(context.Background(), paddock.CreateRunRequest{Project: "my-app", Kind: "overlay"})
	if !paddock.IsCode(err, paddock.CodeUnsupported) || !strings.Contains(err.Error(), "resident") {
		t.Fatalf("overlay without resident sandboxes: %v", err)
	}
	r := e.create(t, paddock.KindAuto, "")
	if r.Workspace.Kind != paddock.KindClone {
		t.Fatalf("auto made %s", r.Workspace.Kind)
	}
	evs, _ := e.m.Runs.Events(context.Background(), r.ID, 0, 0)
	if len(evs) == 0 || !strings.Contains(string(evs[0].Data), "auto: clone") {
		t.Fatalf("the run does not say why it is a clone: %s", evs[0].Data)
	}
}

// TestProtectedAhead: with the default policy, agent configuration a
// command tries to create is read-only in its view in clone, worktree and
// overlay runs alike, though none of it exists in the base; the empty
// directories that stand for it are in no change set; a pattern that
// cannot be enforced ahead is reported in the enforcement.
func TestProtectedAhead(t *testing.T) {
	t.Parallel()
	for _, kind := range []paddock.WorkspaceKind{paddock.KindClone, paddock.KindWorktree, paddock.KindOverlay} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			if _, err := e.m.Projects.AddProject(ctx, paddock.AddProjectRequest{Path: e.repo, Protect: []string{"**/*.key"}}); err != nil {
				t.Fatal(err)
			}
			withSandbox(t, e)
			r := e.create(t, kind, "")
			for _, script := range []string{
				"echo '{}' > .mcp.json", "mkdir -p .claude/hooks && echo evil > .claude/hooks/h", "echo x > .claude/settings.local.json",
				"echo 'eval evil' > .envrc", "mv .vscode .v && mkdir .vscode && echo '{}' > .vscode/tasks.json",
			} {
				res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"bash", "-c", script}})
				if err != nil {
					t.Fatal(err)
				}
				if res.ExitCode == 0 {
					t.Errorf("%s: exit 0", script)
				}
			}
			res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"bash", "-c", "echo ok > fine.txt && echo k > a.key"}})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("ordinary work: %v %+v", err, res)
			}
			enf := res.Enforcement
			for _, p := range []string{".mcp.json", ".claude", ".envrc", ".vscode/tasks.json", ".codex", ".paddock"} {
				if !slices.Contains(enf.ReadOnlyIn, p) {
					t.Errorf("read_only_paths %v misses %s", enf.ReadOnlyIn, p)
				}
			}
			// An overlay's or a clone's .git is the run's own git, the
			// agent's to write; a worktree's .git file, which points at
			// it, stays read-only.
			if got := slices.Contains(enf.ReadOnlyIn, ".git"); got != (kind == paddock.KindWorktree) {
				t.Errorf("read_only_paths %v: .git read-only %v in a %s run", enf.ReadOnlyIn, got, kind)
			}
			if len(enf.Unprotected) != 1 || !strings.HasPrefix(enf.Unprotected[0], "**/*.key") {
				t.Errorf("unprotected: %v", enf.Unprotected)
			}
			cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, en := range cs.Entries {
				paths = append(paths, en.Path)
			}
			if strings.Join(paths, " ") != "a.key fine.txt" {
				t.Fatalf("change set: %v", paths)
			}
		})
	}
}

// TestOverlayTypeChanges: an overlay run whose shell changes a path's type
// (a link or a file becoming a directory, a directory becoming a file or
// a link, a link becoming a file and back) gets the change set a clone run
// with the same commands gets, and it applies into the working tree and is
// undone exactly.
func TestOverlayTypeChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	for _, script := range []string{
		"rm link && mkdir link && echo a > link/a.txt",
		"rm run.sh && mkdir -p run.sh/deep && echo i > run.sh/deep/in.txt",
		"rm -r docs && echo f > docs",
		"rm -r docs && ln -s cmd docs",
		"rm link && echo f > link",
		"rm README.md && ln -s run.sh README.md",
		"rm -r cmd && ln -s README.md cmd && rm link && mkdir -p link/x && echo y > link/x/y",
	} {
		ov := e.create(t, paddock.KindOverlay, "on_reject")
		cl := e.create(t, paddock.KindClone, "on_reject")
		sh(t, e.m, ov.ID, script)
		sh(t, e.m, cl.ID, script)
		a, err := e.m.Changes.Submit(ctx, ov.ID)
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		b, err := e.m.Changes.ChangeSet(ctx, cl.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a.Hash != b.Hash || fmt.Sprint(a.Entries) != fmt.Sprint(b.Entries) {
			t.Fatalf("%s: the change sets differ\noverlay: %v\nclone:   %v", script, a.Entries, b.Entries)
		}
		before, lines := gittest.TreeDigest(t, e.repo)
		if _, err := e.m.Changes.Approve(ctx, ov.ID, a.Hash, "a"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Changes.ApplyToWorktree(ctx, ov.ID, false); err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		if got, want := filesOf(t, e.repo), filesOf(t, cl.Workspace.Root); got != want {
			t.Fatalf("%s: the working tree holds\n%s\nthe clone\n%s", script, got, want)
		}
		if _, err := e.m.Changes.Undo(ctx, ov.ID); err != nil {
			t.Fatal(err)
		}
		gittest.RequireIdentical(t, e.repo, before, lines)
		e.m.Runs.Reject(ctx, ov.ID)
		e.m.Runs.Reject(ctx, cl.ID)
	}
}

// TestChangeSetNamesAcrossLayers: what a directory of an overlay's view
// holds is its layers' names together, the base's and the run's: a
// repository's layout made of a file the base has and files the agent
// adds is found and blocked, and a .gitignore the base has keeps its rule
// over a file the agent writes beside it; a directory whose layers could
// hold neither is not listed (DiffOptions.Holds), and its files are
// entries as in a clone.
func TestChangeSetNamesAcrossLayers(t *testing.T) {
	t.Parallel()
	for _, kind := range []paddock.WorkspaceKind{paddock.KindClone, paddock.KindOverlay} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEnv(t)
			gittest.Commit(t, e.repo, "layouts", map[string]string{"half/HEAD": "ref: refs/heads/main\n", "sub/.gitignore": "*.log\n", "plain/a.txt": "a\n"})
			e.project(t)
			withSandbox(t, e)
			r := e.create(t, kind, "")
			sh(t, e.m, r.ID, "mkdir -p half/objects && echo x > half/objects/x && echo n > half/note.txt && "+
				"echo noise > sub/debug.log && echo kept > sub/keep.txt && echo b > plain/b.txt && echo a2 >> plain/a.txt")
			cs, err := e.m.Changes.ChangeSet(context.Background(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			entries := map[string]paddock.ChangeEntry{}
			for _, en := range cs.Entries {
				entries[en.Path] = en
			}
			for _, p := range []string{"half/objects/x", "half/note.txt"} {
				if en, ok := entries[p]; !ok || en.Blocked == "" || !contains(en.Risks, "git_repository") {
					t.Errorf("%s, in a repository's layout made of the base's HEAD and the agent's objects: %+v (in the change set: %v)", p, en, ok)
				}
			}
			if _, ok := entries["sub/debug.log"]; ok {
				t.Error("sub/debug.log is in the change set: the base's sub/.gitignore ignores it")
			}
			for _, p := range []string{"sub/keep.txt", "plain/b.txt", "plain/a.txt"} {
				if en, ok := entries[p]; !ok || en.Blocked != "" {
					t.Errorf("%s: %+v (in the change set: %v)", p, en, ok)
				}
			}
		})
	}
}

// TestChangeSetNamesAcrossForkLayers: a repository's layout made of a
// file the run wrote before it was forked (in the fork's frozen layer)
// and files the fork writes after is found and blocked in the fork's
// change set: the frozen layer's names are among what its directories
// can hold.
func TestChangeSetNamesAcrossForkLayers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	r := e.create(t, paddock.KindOverlay, "")
	sh(t, e.m, r.ID, "mkdir -p half && echo 'ref: refs/heads/main' > half/HEAD")
	k := fork(t, e.m, r.ID, 1).Runs[0]
	sh(t, e.m, k.ID, "echo '[core]' > half/config && echo n > half/note.txt")
	cs, err := e.m.Changes.ChangeSet(context.Background(), k.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, en := range cs.Entries {
		if strings.HasPrefix(en.Path, "half/") {
			found++
			if en.Blocked == "" || !contains(en.Risks, "git_repository") {
				t.Errorf("%s, in a layout made across the fork's layers: %+v", en.Path, en)
			}
		}
	}
	if found != 3 {
		t.Errorf("%d entries under half/, want HEAD, config and note.txt", found)
	}
}
