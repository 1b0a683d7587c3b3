package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestGitInsideRuns: in every kind of run the agent's git behaves as in a
// fresh checkout at the base, on a branch named after the run; what it
// writes (commits, stash, branches, tags, config, hooks, gc) stays in the
// run, the project's .git is byte-identical afterwards, and the change set
// is still the workspace against the base: a commit neither hides nor
// duplicates a change, and .git is never part of it.
func TestGitInsideRuns(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 3)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	before, _ := gittest.TreeDigest(t, filepath.Join(repo, ".git"))
	head := strings.TrimSpace(gitOut(t, repo, "rev-parse", "HEAD"))
	for _, kind := range []string{"overlay", "clone", "worktree"} {
		id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", kind).must(t).out)
		script := `set -e
git status --short --branch
test "$(git rev-parse HEAD)" = "` + head + `"
test "$(git rev-parse --abbrev-ref HEAD)" = "paddock/` + id + `"
git log --oneline | wc -l
echo changed >> README.md
echo new > new.txt
git stash -q && test ! -e new.txt -o -e new.txt && git stash pop -q
git add new.txt && git commit -qm "agent commit"
git checkout -q -b experiment && git checkout -q -
git restore README.md 2>/dev/null || true
echo changed-again >> README.md
git tag agent-tag
git config user.email someone@else
mkdir -p .git/hooks && printf '#!/bin/sh\ntouch /tmp/hook-ran\n' > .git/hooks/post-commit && chmod +x .git/hooks/post-commit
git gc -q
git status --short
`
		r := cli(t, home, "exec", id, "--", "sh", "-c", script)
		if r.code != 0 {
			t.Fatalf("%s: git inside the run: exit %d\n%s\n%s", kind, r.code, r.out, r.err)
		}
		if !strings.Contains(r.out, "## paddock/"+id) {
			t.Fatalf("%s: status: %s", kind, r.out)
		}
		stat := cli(t, home, "diff", id, "--stat").must(t).out
		if !strings.Contains(stat, "new.txt") || !strings.Contains(stat, "README.md") || strings.Contains(stat, ".git") || !strings.Contains(stat, "2 entries") {
			t.Fatalf("%s: the change set after commits inside the run:\n%s", kind, stat)
		}
		cli(t, home, "reject", id).must(t)
	}
	if after, _ := gittest.TreeDigest(t, filepath.Join(repo, ".git")); after != before {
		t.Fatal("the project's .git changed")
	}
	if out := gitOut(t, repo, "tag"); out != "" {
		t.Fatalf("a tag reached the project: %q", out)
	}
}

// TestRunHomeAndEnv: a run's HOME is its own, outside the workspace, so
// caches never enter the change set; --env replaces a variable instead of
// adding a second one.
func TestRunHomeAndEnv(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 1)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	r := cli(t, home, "exec", id, "--", "sh", "-c", "mkdir -p $HOME/.cache/tool && echo cached > $HOME/.cache/tool/x && echo $HOME")
	if r.code != 0 || r.out != "/home/paddock\n" {
		t.Fatalf("home: %d %q %q", r.code, r.out, r.err)
	}
	if r = cli(t, home, "exec", id, "--", "cat", "/home/paddock/.cache/tool/x"); r.out != "cached\n" {
		t.Fatalf("the home does not last the run: %q", r.out)
	}
	if stat := cli(t, home, "diff", id, "--stat").must(t).out; !strings.Contains(stat, "0 entries") {
		t.Fatalf("the home entered the change set:\n%s", stat)
	}
	r = cli(t, home, "exec", id, "--env", "HOME=/tmp/h", "--", "sh", "-c", "echo $HOME; env | grep -c '^HOME='")
	if r.out != "/tmp/h\n1\n" {
		t.Fatalf("--env HOME: %q", r.out)
	}
}

// TestRealToolchainInRuns: a real Go module builds and tests, with no
// network, inside a write run (its change set then holds only the source
// the test edited) and inside a read run (whose writes evaporate, and
// whose change set stays empty).
func TestRealToolchainInRuns(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no Go toolchain here")
	}
	if !strings.HasPrefix(goBin, "/usr/") {
		t.Skipf("the Go toolchain (%s) is outside the sandbox's system directories", goBin)
	}
	base := t.TempDir()
	home := filepath.Join(base, "home")
	src := filepath.Join(base, "src", "calc")
	files := map[string]string{
		"go.mod":           "module example.com/calc\n\ngo 1.21\n",
		"calc.go":          "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n",
		"calc_test.go":     "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(Add(2, 3))\n\t}\n}\n",
		"cmd/calc/main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/calc\"\n)\n\nfunc main() { fmt.Println(calc.Add(1, 2)) }\n",
	}
	gittest.NewRepo(t, src, files)
	startDaemon(t, home)
	cli(t, home, "project", "add", src).must(t)
	build := "go build ./... && go test ./... && go vet ./..."
	env := []string{"--env", "GOFLAGS=-mod=mod", "--env", "GOPROXY=off", "--env", "GOTOOLCHAIN=local"}
	w := strings.TrimSpace(cli(t, home, "create", "-p", "calc").must(t).out)
	cli(t, home, "tool", w, "edit", "--arg", "path=calc.go", "--arg", "old_string=// Add adds.", "--arg", "new_string=// Add returns a+b.").must(t)
	if r := cli(t, home, append(append([]string{"exec", w}, env...), "--", "sh", "-c", build)...); r.code != 0 {
		t.Fatalf("go build and test in a write run: %d\n%s\n%s", r.code, r.out, r.err)
	}
	stat := cli(t, home, "diff", w, "--stat").must(t).out
	if !strings.Contains(stat, "calc.go") || !strings.Contains(stat, "1 entries") {
		t.Fatalf("the write run's change set holds more than the edited source:\n%s", stat)
	}
	rd := strings.TrimSpace(cli(t, home, "create", "-p", "calc", "--access", "read").must(t).out)
	if r := cli(t, home, append(append([]string{"exec", rd}, env...), "--", "sh", "-c", build+" && go build -o calcbin ./cmd/calc && ./calcbin")...); r.code != 0 || !strings.HasSuffix(r.out, "3\n") {
		t.Fatalf("go build and test in a read run: %d\n%s\n%s", r.code, r.out, r.err)
	}
	if stat := cli(t, home, "diff", rd, "--stat").must(t).out; !strings.Contains(stat, "0 entries") {
		t.Fatalf("a read run's change set is not empty:\n%s", stat)
	}
	if r := cli(t, home, "exec", rd, "--", "ls", "calcbin"); r.code == 0 {
		t.Fatal("a read run's build output outlived its command")
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

var _ = os.Getenv

// TestSharedCaches: a project's runs see its caches where their tools look
// for them: a read-only one (the operator's directory) can be read and not
// written; a read-write one is shared between runs; a copy-on-write one
// (the default) is written by each run in a layer of its own, never in the
// shared directory; none enters a change set. project set --cache adds to
// the list (or changes a cache of the same name), --no-cache NAME removes
// one, --no-cache all every one, and a live run's next command follows.
func TestSharedCaches(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 1)
	mod := filepath.Join(base, "modcache")
	os.MkdirAll(filepath.Join(mod, "example.com"), 0o755)
	os.WriteFile(filepath.Join(mod, "example.com", "dep.txt"), []byte("from the operator\n"), 0o644)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo, "--cache", "go-mod:ro="+mod, "--cache", "go-build:rw").must(t)
	cli(t, home, "project", "add", repo, "--name", "other", "--cache", "nope").wantCode(t, exitUsage, "the caches are")
	a := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	r := cli(t, home, "exec", a, "--", "sh", "-c", "cat ~/go/pkg/mod/example.com/dep.txt; (echo x > ~/go/pkg/mod/planted && echo PLANTED); echo built > ~/.cache/go-build/entry")
	if r.out != "from the operator\n" {
		t.Fatalf("the caches in a run: %d %q %q", r.code, r.out, r.err)
	}
	if _, err := os.Stat(filepath.Join(mod, "planted")); err == nil {
		t.Fatal("a run wrote the read-only cache")
	}
	b := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	if r := cli(t, home, "exec", b, "--", "cat", "/home/paddock/.cache/go-build/entry"); r.out != "built\n" {
		t.Fatalf("a read-write cache is not shared between runs: %q %q", r.out, r.err)
	}
	if stat := cli(t, home, "diff", a, "--stat").must(t).out; !strings.Contains(stat, "0 entries") {
		t.Fatalf("a cache entered the change set:\n%s", stat)
	}

	// --cache adds (npm) and changes (go-build, now copy-on-write);
	// --no-cache NAME removes one.
	out := cli(t, home, "project", "set", "app", "--cache", "npm").must(t).out
	if !strings.Contains(out, "caches: go-mod:ro, go-build:rw, npm:cow") {
		t.Fatalf("project set --cache npm: %s", out)
	}
	out = cli(t, home, "project", "set", "app", "--cache", "go-build", "--no-cache", "go-mod").must(t).out
	if !strings.Contains(out, "caches: go-build:cow, npm:cow") {
		t.Fatalf("project set --cache go-build --no-cache go-mod: %s", out)
	}
	cli(t, home, "project", "set", "app", "--no-cache", "nope").wantCode(t, exitUsage, "the caches are")
	// Run a, live and untouched since, follows at its next command: it
	// writes its own layer; the shared cache keeps what it held.
	shared := filepath.Join(home, "caches", "app", "go-build")
	r = cli(t, home, "exec", a, "--", "sh", "-c", "cat ~/.cache/go-build/entry && echo mine > ~/.cache/go-build/entry && echo new > ~/.cache/go-build/new && cat ~/.cache/go-build/entry ~/.cache/go-build/new; ls ~/go/pkg/mod")
	if r.code != 0 || r.out != "built\nmine\nnew\n" {
		t.Fatalf("a copy-on-write cache in a live run: %d %q %q", r.code, r.out, r.err)
	}
	if got, _ := os.ReadFile(filepath.Join(shared, "entry")); string(got) != "built\n" {
		t.Fatalf("a run wrote the shared copy-on-write cache: %q", got)
	}
	if _, err := os.Stat(filepath.Join(shared, "new")); err == nil {
		t.Fatal("a run added to the shared copy-on-write cache")
	}
	if r := cli(t, home, "exec", b, "--", "cat", "/home/paddock/.cache/go-build/entry"); r.out != "built\n" {
		t.Fatalf("another run saw a run's copy-on-write layer: %q %q", r.out, r.err)
	}
	out = cli(t, home, "project", "set", "app", "--no-cache", "all").must(t).out
	if !strings.Contains(out, "caches: none") {
		t.Fatalf("project set --no-cache all: %s", out)
	}
}
