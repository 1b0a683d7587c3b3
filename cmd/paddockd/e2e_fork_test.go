package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestForkVerb: paddock fork as an operator types it: an overlay run with
// a change and a deletion forks into 3; each fork runs a command over
// its own edit, none sees another's, their change sets hold the run's
// changes and their own, compare tells where they differ, and a clone
// run is refused as unsupported.
func TestForkVerb(t *testing.T) {
	t.Parallel() // its own daemon and state
	base := t.TempDir()
	home := filepath.Join(base, "home")
	src := filepath.Join(base, "src", "calc")
	gittest.NewRepo(t, src, map[string]string{
		"go.mod":       "module example.com/calc\n\ngo 1.21\n",
		"calc.go":      "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n",
		"main/main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/calc\"\n)\n\nfunc main() { fmt.Println(calc.Add(1, 2)) }\n",
		"OLD.md":       "old\n",
	})
	startDaemon(t, home)
	cli(t, home, "project", "add", src).must(t)
	r := cli(t, home, "create", "-p", "calc", "--kind", "overlay")
	if r.code != 0 {
		if strings.Contains(r.err, "unsupported") && os.Getenv("CI") != "true" {
			t.Skipf("overlay workspaces do not work here: %s", r.err)
		}
		t.Fatalf("create: %d %s", r.code, r.err)
	}
	run := strings.TrimSpace(r.out)
	cli(t, home, "exec", run, "--", "sh", "-c", "rm OLD.md; echo shared > NOTES.md").must(t)

	res := decode[paddock.ForkResult](t, cli(t, home, "fork", run, "-n", "3", "--json"))
	if len(res.Runs) != 3 || res.Run.ID != run {
		t.Fatalf("fork: %+v", res)
	}
	// Each fork changes Add its own way; a command in each sees the run's
	// files and its own edit. (A real go build in a run is
	// TestRealToolchainInRuns's: each fork's cold build cache would cost
	// this test seconds per fork.)
	var ids []string
	for i, k := range res.Runs {
		ids = append(ids, k.ID)
		op := []string{"*", "-", "*"}[i]
		cli(t, home, "tool", k.ID, "edit", "--arg", "path=calc.go", "--arg", "old_string=return a + b", "--arg", "new_string=return a "+op+" b").must(t)
		out := cli(t, home, "exec", k.ID, "--", "sh", "-c", "cat NOTES.md; test ! -e OLD.md && echo old-gone; grep -c . calc.go; sed -n 4p calc.go").must(t).out
		if want := "shared\nold-gone\n3\nfunc Add(a, b int) int { return a " + op + " b }\n"; out != want {
			t.Fatalf("fork %d: %q, want %q", i, out, want)
		}
	}
	// The run goes on; no fork sees what it writes now.
	cli(t, home, "exec", run, "--", "sh", "-c", "echo after > AFTER.md").must(t)
	for _, k := range ids {
		if r := cli(t, home, "exec", k, "--", "test", "-e", "AFTER.md"); r.code == 0 {
			t.Fatalf("fork %s sees the run's later write", k)
		}
	}
	// Fork at a checkpoint: a second fork freezes AFTER.md; a fork at the
	// first fork's layer is the run as it was then, without it.
	second := decode[paddock.ForkResult](t, cli(t, home, "fork", run, "--json"))
	if second.Layer == res.Layer {
		t.Fatalf("the second fork froze no layer of its own: %+v", second)
	}
	earlier := decode[paddock.ForkResult](t, cli(t, home, "fork", run, "--at", res.Layer, "--json"))
	if out := cli(t, home, "exec", earlier.Runs[0].ID, "--", "sh", "-c", "cat NOTES.md; test -e AFTER.md && echo after-seen; true").must(t).out; out != "shared\n" {
		t.Fatalf("a fork at the first freeze sees %q", out)
	}
	if out := cli(t, home, "exec", second.Runs[0].ID, "--", "cat", "AFTER.md").must(t).out; out != "after\n" {
		t.Fatalf("a fork at the second freeze sees %q", out)
	}
	cli(t, home, "fork", run, "--at", "l-nosuchlayer").wantCode(t, exitNotFound, "stacks on no layer")
	// Change sets: the run's frozen changes and each fork's own.
	cs := decode[paddock.ChangeSet](t, cli(t, home, "diff", ids[1], "--json"))
	ops := map[string]paddock.ChangeOp{}
	for _, e := range cs.Entries {
		ops[e.Path] = e.Op
	}
	if len(ops) != 3 || ops["OLD.md"] != paddock.OpDelete || ops["NOTES.md"] != paddock.OpCreate || ops["calc.go"] != paddock.OpModify {
		t.Fatalf("a fork's change set: %v", ops)
	}
	// compare: NOTES.md and OLD.md the same in all, calc.go differs.
	out := cli(t, home, append([]string{"compare"}, ids...)...).must(t).out
	for _, line := range []string{"same     NOTES.md", "same     OLD.md", "DIFFERS  calc.go", "3 path(s), 1 differ"} {
		if !strings.Contains(out, line) {
			t.Fatalf("compare does not say %q:\n%s", line, out)
		}
	}
	cmp := decode[paddock.Comparison](t, cli(t, home, "compare", ids[0], ids[2], "--json"))
	for _, p := range cmp.Paths {
		if !p.Same {
			t.Fatalf("forks 0 and 2 made the same edit, compare says %s differs", p.Path)
		}
	}
	// Events: run.forked on the run, forked_from on each fork.
	if ev := cli(t, home, "events", run).must(t).out; !strings.Contains(ev, "run.forked") || !strings.Contains(ev, ids[2]) {
		t.Fatalf("the run's events:\n%s", ev)
	}
	if ev := cli(t, home, "events", ids[0]).must(t).out; !strings.Contains(ev, `"forked_from":"`+run+`"`) {
		t.Fatalf("a fork's events:\n%s", ev)
	}
	// pick: fork 1's calc.go, a binary file it made, and the run's NOTES.md
	// (through fork 0), put together in a new run, byte for byte.
	cli(t, home, "exec", ids[1], "--", "sh", "-c", `printf '\000\001bin\377' > extra.bin`).must(t)
	blobs := map[string]string{}
	for _, e := range decode[paddock.ChangeSet](t, cli(t, home, "diff", ids[1], "--json")).Entries {
		blobs[e.Path] = e.NewBlob
	}
	var took struct {
		Run    string
		Picked []struct{ Path, From string }
	}
	if err := json.Unmarshal([]byte(cli(t, home, "pick", ids[1]+":calc.go", ids[0]+":NOTES.md", ids[1]+":extra.bin", "--json").must(t).out), &took); err != nil || len(took.Picked) != 3 {
		t.Fatalf("pick: %+v %v", took, err)
	}
	got := map[string]string{}
	for _, e := range decode[paddock.ChangeSet](t, cli(t, home, "diff", took.Run, "--json")).Entries {
		got[e.Path] = e.NewBlob
	}
	if len(got) != 3 || got["calc.go"] != blobs["calc.go"] || got["extra.bin"] != blobs["extra.bin"] || got["NOTES.md"] != blobs["NOTES.md"] {
		t.Fatalf("the picked run holds %v; fork 1 has %v", got, blobs)
	}
	cli(t, home, "pick", ids[1]+":nothing.txt").wantCode(t, exitNotFound, "changed nothing")
	// Only an overlay run forks.
	clone := strings.TrimSpace(cli(t, home, "create", "-p", "calc", "--kind", "clone").must(t).out)
	if r := cli(t, home, "fork", clone); r.code != exitUnsupported || !strings.Contains(r.err, "overlay") {
		t.Fatalf("fork of a clone run: %d %s", r.code, r.err)
	}
	if r := cli(t, home, "compare", run); r.code != exitUsage {
		t.Fatalf("compare of one run: %d %s", r.code, r.err)
	}
}

// TestPickPrintsTheRunIDAlone: RUN=$(paddock pick …) gets the new run's
// id and nothing else; what was taken, and from where, goes to stderr;
// --json keeps its document on stdout.
func TestPickPrintsTheRunIDAlone(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	home := filepath.Join(base, "home")
	src := filepath.Join(base, "src", "calc")
	gittest.NewRepo(t, src, map[string]string{"README.md": "hi\n"})
	startDaemon(t, home)
	cli(t, home, "project", "add", src).must(t)
	a := strings.TrimSpace(cli(t, home, "create", "-p", "calc", "--kind", "clone").must(t).out)
	cli(t, home, "exec", a, "--", "sh", "-c", "echo a > a.txt").must(t)

	r := cli(t, home, "pick", a+":a.txt").must(t)
	id := strings.TrimSuffix(r.out, "\n")
	if !strings.HasPrefix(id, "r-") || strings.ContainsAny(id, " \n") {
		t.Fatalf("pick's stdout is %q, want the new run's id and a newline", r.out)
	}
	if !strings.Contains(r.err, "a.txt") || !strings.Contains(r.err, a) {
		t.Errorf("pick's stderr does not say what it took from %s: %q", a, r.err)
	}
	if got := runState(t, home, id); got.Project != "calc" {
		t.Errorf("pick's stdout %q is not a run of calc: %+v", id, got)
	}
	var doc struct {
		Run    string `json:"run"`
		Picked []struct{ Path, From string }
	}
	if err := json.Unmarshal([]byte(cli(t, home, "pick", a+":a.txt", "--json").must(t).out), &doc); err != nil || doc.Run == "" || len(doc.Picked) != 1 {
		t.Fatalf("pick --json: %+v %v", doc, err)
	}
}
