package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/lifecycle"
)

// changes is run id's change set as path → op and, for what it writes,
// the new blob.
func changes(t *testing.T, m *lifecycle.Manager, id string) map[string]string {
	t.Helper()
	cs, err := m.Changes.ChangeSet(context.Background(), id)
	if err != nil {
		t.Fatalf("change set of %s: %v", id, err)
	}
	out := map[string]string{}
	for _, e := range cs.Entries {
		out[e.Path] = string(e.Op)
	}
	return out
}

func fork(t *testing.T, m *lifecycle.Manager, id string, n int) *paddock.ForkResult {
	t.Helper()
	res, err := m.Forks.Fork(context.Background(), id, paddock.ForkRequest{Count: n})
	if err != nil {
		t.Fatalf("fork %s: %v", id, err)
	}
	if len(res.Runs) != n || res.Layer == "" {
		t.Fatalf("fork made %d runs on %q", len(res.Runs), res.Layer)
	}
	return res
}

func eventsOf(t *testing.T, m *lifecycle.Manager, id, typ string) []map[string]any {
	t.Helper()
	evs, err := m.Runs.Events(context.Background(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range evs {
		if e.Type == typ {
			var d map[string]any
			json.Unmarshal(e.Data, &d)
			out = append(out, d)
		}
	}
	return out
}

// TestFork: a fork's runs see the run's files as they were (a deletion and
// a directory replaced included), none sees what the others write after,
// their change sets are against the base with the frozen layer's changes,
// rejecting one leaves the others whole, and gc collects the frozen layer
// once no run stacks on it.
func TestFork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	r := e.create(t, paddock.KindOverlay, "on_reject")
	// A file changed, one made, one deleted, a directory of the base
	// replaced (opaque in the upper layer).
	sh(t, e.m, r.ID, "echo parent > README.md; echo made > made.txt; rm run.sh; rm -r docs; mkdir docs; echo only > docs/only.txt")
	before := changes(t, e.m, r.ID)

	res := fork(t, e.m, r.ID, 2)
	a, b := res.Runs[0], res.Runs[1]
	for _, k := range res.Runs {
		if k.State() != paddock.StateReady || k.Workspace.BaseRevision != r.Workspace.BaseRevision || k.Access != r.Access || k.AgentHash != r.AgentHash {
			t.Fatalf("fork %s: %+v", k.ID, k.Workspace)
		}
		if got := sh(t, e.m, k.ID, "cat README.md made.txt; ls docs; test ! -e run.sh && echo gone"); got != "parent\nmade\nonly.txt\ngone\n" {
			t.Fatalf("fork %s sees %q", k.ID, got)
		}
		if got := changes(t, e.m, k.ID); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Fatalf("fork %s's change set %v, the run's was %v", k.ID, got, before)
		}
		cr := eventsOf(t, e.m, k.ID, paddock.EventRunCreated)
		if len(cr) != 1 || cr[0]["forked_from"] != r.ID || cr[0]["layer"] != res.Layer {
			t.Fatalf("run.created of %s: %v", k.ID, cr)
		}
		// Its own git, on its own branch.
		if got := sh(t, e.m, k.ID, "git rev-parse --abbrev-ref HEAD"); got != "paddock/"+k.ID+"\n" {
			t.Fatalf("fork's git is on %q", got)
		}
	}
	fe := eventsOf(t, e.m, r.ID, paddock.EventRunForked)
	if len(fe) != 1 || fe[0]["layer"] != res.Layer || fmt.Sprint(fe[0]["runs"]) != fmt.Sprint([]string{a.ID, b.ID}) {
		t.Fatalf("run.forked: %v", fe)
	}
	// The run goes on: what it writes now no fork sees, and the reverse.
	if got := sh(t, e.m, r.ID, "cat README.md; git rev-parse --abbrev-ref HEAD"); got != "parent\npaddock/"+r.ID+"\n" {
		t.Fatalf("the run sees %q after the fork", got)
	}
	sh(t, e.m, r.ID, "echo later > later.txt; rm made.txt")
	sh(t, e.m, a.ID, "echo a > a.txt; rm README.md")
	sh(t, e.m, b.ID, "echo b > made.txt")
	for id, want := range map[string]string{
		r.ID: "README.md:modify docs/only.txt:create docs/ü.txt:delete later.txt:create run.sh:delete",
		a.ID: "README.md:delete a.txt:create docs/only.txt:create docs/ü.txt:delete made.txt:create run.sh:delete",
		b.ID: "README.md:modify docs/only.txt:create docs/ü.txt:delete made.txt:create run.sh:delete",
	} {
		got := changes(t, e.m, id)
		var s []string
		for p, op := range got {
			s = append(s, p+":"+op)
		}
		slices.Sort(s)
		if strings.Join(s, " ") != want {
			t.Errorf("%s: change set %s, want %s", id, strings.Join(s, " "), want)
		}
	}
	if got := sh(t, e.m, a.ID, "cat made.txt; test ! -e later.txt && echo no-later"); got != "made\nno-later\n" {
		t.Fatalf("fork a sees %q", got)
	}
	if got := sh(t, e.m, b.ID, "cat made.txt; test ! -e a.txt && echo no-a"); got != "b\nno-a\n" {
		t.Fatalf("fork b sees %q", got)
	}
	// The siblings compare.
	var sets []*paddock.ChangeSet
	for _, id := range []string{a.ID, b.ID} {
		cs, err := e.m.Changes.ChangeSet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, cs)
	}
	cmp, err := paddock.Compare(sets)
	if err != nil {
		t.Fatal(err)
	}
	same := map[string]bool{}
	for _, p := range cmp.Paths {
		same[p.Path] = p.Same
	}
	if !same["run.sh"] || same["made.txt"] || same["README.md"] || same["a.txt"] {
		t.Fatalf("compare: %+v", cmp.Paths)
	}

	// Rejecting a fork leaves the run and the other fork whole.
	if _, err := e.m.Runs.Reject(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, e.m, b.ID, "cat README.md made.txt"); got != "parent\nb\n" {
		t.Fatalf("fork b after a's rejection sees %q", got)
	}
	if got := sh(t, e.m, r.ID, "cat README.md later.txt"); got != "parent\nlater\n" {
		t.Fatalf("the run after a's rejection sees %q", got)
	}
	// The frozen layer stays while a run stacks on it, and goes after.
	layer := filepath.Join(e.state, "layers", res.Layer)
	if f, err := e.m.GC(ctx, false); err != nil || hasPath(f, layer) {
		t.Fatalf("gc with runs on the layer: %+v %v", f, err)
	}
	if _, err := os.Stat(layer); err != nil {
		t.Fatal(err)
	}
	e.m.Runs.Reject(ctx, b.ID)
	if f, _ := e.m.GC(ctx, false); hasPath(f, layer) {
		t.Fatalf("gc removed the layer the run still stacks on: %+v", f)
	}
	e.m.Runs.Reject(ctx, r.ID)
	f, err := e.m.GC(ctx, false)
	if err != nil || !hasPath(f, layer) {
		t.Fatalf("gc after every run on the layer went: %+v %v", f, err)
	}
	if _, err := os.Stat(layer); !os.IsNotExist(err) {
		t.Fatalf("the layer is left: %v", err)
	}
}

func hasPath(fs []paddock.Finding, path string) bool {
	for _, f := range fs {
		if f.Path == path {
			return true
		}
	}
	return false
}

// TestForkOfAFork: a fork forks in turn; the stack holds both layers.
func TestForkOfAFork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	r := e.create(t, paddock.KindOverlay, "")
	sh(t, e.m, r.ID, "echo 1 > one.txt")
	k := fork(t, e.m, r.ID, 1).Runs[0]
	sh(t, e.m, k.ID, "echo 2 > two.txt; rm one.txt; echo 3 > three.txt")
	kk := fork(t, e.m, k.ID, 1).Runs[0]
	sh(t, e.m, k.ID, "rm three.txt")
	if got := sh(t, e.m, kk.ID, "cat two.txt three.txt; test ! -e one.txt && echo gone"); got != "2\n3\ngone\n" {
		t.Fatalf("the fork of a fork sees %q", got)
	}
	got := changes(t, e.m, kk.ID)
	if fmt.Sprint(got) != "map[three.txt:create two.txt:create]" {
		t.Fatalf("change set %v", got)
	}
}

// TestForkRefusals: only an overlay run forks; a count is bounded.
func TestForkRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	r := e.create(t, paddock.KindClone, "")
	_, err := e.m.Forks.Fork(ctx, r.ID, paddock.ForkRequest{Count: 2})
	if !paddock.IsCode(err, paddock.CodeUnsupported) || !strings.Contains(err.Error(), "overlay") {
		t.Fatalf("fork of a clone run: %v", err)
	}
	if _, err := e.m.Forks.Fork(ctx, r.ID, paddock.ForkRequest{Count: paddock.MaxFork + 1}); !paddock.IsCode(err, paddock.CodeBadRequest) {
		t.Fatalf("fork into too many: %v", err)
	}
	if _, err := e.m.Forks.Fork(ctx, "r-nosuch", paddock.ForkRequest{}); !paddock.IsCode(err, paddock.CodeNotFound) {
		t.Fatalf("fork of no run: %v", err)
	}
}

type crash struct{ point string }

// TestKillDuringFork stops a fork at each of its steps, as a kill would
// (nothing after the step runs: no rollback, no defer of the fork's but
// the process's own), restarts the daemon and recovers: there is no fork
// or a whole one, the run sees its files and works on, and gc leaves
// nothing stray.
func TestKillDuringFork(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"fork:records", "fork:journal", "fork:frozen", "fork:prepared", "fork:recorded"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.project(t)
			withSandbox(t, e)
			ctx := context.Background()
			r := e.create(t, paddock.KindOverlay, "")
			sh(t, e.m, r.ID, "echo parent > README.md; rm run.sh")
			before := changes(t, e.m, r.ID)
			lifecycle.SetTestHook(e.m, func(p string) {
				if p == point {
					panic(crash{p})
				}
			})
			func() {
				defer func() {
					if c, ok := recover().(crash); !ok || c.point != point {
						t.Fatalf("the fork did not stop at %s", point)
					}
				}()
				e.m.Forks.Fork(ctx, r.ID, paddock.ForkRequest{Count: 3})
			}()
			e.m.Harnesses.Close()
			e.reopen(t)
			withSandbox(t, e)
			runs, err := e.m.Runs.Runs(ctx, paddock.RunFilter{})
			if err != nil {
				t.Fatal(err)
			}
			var ready, other int
			for _, k := range runs {
				if k.ID == r.ID || k.Workspace == nil {
					continue
				}
				if len(eventsOf(t, e.m, k.ID, paddock.EventRunCreated)) == 0 || eventsOf(t, e.m, k.ID, paddock.EventRunCreated)[0]["forked_from"] != r.ID {
					continue // withSandbox's probe
				}
				switch k.State() {
				case paddock.StateReady:
					ready++
					if got := sh(t, e.m, k.ID, "cat README.md; test ! -e run.sh && echo gone"); got != "parent\ngone\n" {
						t.Fatalf("a recovered fork sees %q", got)
					}
				case paddock.StateCleaned:
					other++
					if _, err := os.Stat(k.Workspace.Root); !os.IsNotExist(err) {
						t.Fatalf("a rolled back fork's directory is left: %v", err)
					}
				default:
					t.Fatalf("fork %s is %s after recovery", k.ID, k.State())
				}
			}
			whole := point == "fork:recorded"
			if whole && (ready != 3 || other != 0) || !whole && ready != 0 {
				t.Fatalf("after a kill at %s: %d forks ready, %d rolled back", point, ready, other)
			}
			forked := eventsOf(t, e.m, r.ID, paddock.EventRunForked)
			if whole != (len(forked) == 1) {
				t.Fatalf("run.forked: %v", forked)
			}
			// The run sees its files and works on.
			if got := sh(t, e.m, r.ID, "cat README.md; echo more > more.txt; cat more.txt"); got != "parent\nmore\n" {
				t.Fatalf("the run sees %q after recovery", got)
			}
			if got := changes(t, e.m, r.ID); len(got) != len(before)+1 || got["README.md"] != "modify" || got["run.sh"] != "delete" || got["more.txt"] != "create" {
				t.Fatalf("the run's change set after recovery %v", got)
			}
			if js, _ := filepath.Glob(filepath.Join(e.state, "layers", "*.fork")); len(js) != 0 {
				t.Fatalf("journals left: %v", js)
			}
			// Nothing stray for gc, and a fork works again.
			f, err := e.m.GC(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range f {
				if x.Action == paddock.ActionCleaned && strings.Contains(x.Path, "layers") {
					t.Fatalf("gc found a layer in use stray: %+v", x)
				}
			}
			k := fork(t, e.m, r.ID, 1).Runs[0]
			if got := sh(t, e.m, k.ID, "cat README.md more.txt"); got != "parent\nmore\n" {
				t.Fatalf("a fork after recovery sees %q", got)
			}
		})
	}
}

// TestForkWhileACommandRuns: a fork waits for no command: it is refused as
// busy while one runs in the run, and forks once it has ended, with what
// the command wrote.
func TestForkWhileACommandRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	r := e.create(t, paddock.KindOverlay, "")
	done := make(chan error, 1)
	go func() {
		_, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "echo x > started; sleep 2; echo y > ended"}})
		done <- err
	}()
	for i := 0; ; i++ {
		if _, err := e.m.Broker.CallTool(ctx, r.ID, "read", json.RawMessage(`{"path":"started"}`)); err == nil {
			break
		}
		if i > 200 {
			t.Fatal("the command did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := e.m.Forks.Fork(ctx, r.ID, paddock.ForkRequest{}); !paddock.IsCode(err, paddock.CodeBusy) {
		t.Fatalf("fork while a command runs: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	k := fork(t, e.m, r.ID, 1).Runs[0]
	if got := sh(t, e.m, k.ID, "cat started ended"); got != "x\ny\n" {
		t.Fatalf("the fork sees %q", got)
	}
}

// TestForkMatchesClone: random edits in a run, a fork, random edits in the
// fork (and more in the run, after): the fork's change set is the one a
// clone run given the run's edits and then the fork's gets, byte for byte,
// whatever the edits (deletions, replaced directories, links, modes; not
// git's commands, which act on a git that differs: the fork's starts at
// the base).
func TestForkMatchesClone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	rounds := 3 // a new seed each run: the rounds add up over runs
	if testing.Short() {
		rounds = 2
	}
	run := func(id, script string) int {
		res, err := e.m.Broker.Exec(ctx, id, paddock.ExecRequest{Argv: []string{"bash", "-c", script}})
		if err != nil {
			t.Fatal(err)
		}
		return res.ExitCode
	}
	for round := 0; round < rounds; round++ {
		// Without git's own commands: a fork's git starts at the base
		// (RUN's commits are not in it), so a stash or a commit acts
		// otherwise there than in a clone that made them.
		noGit := func(script string) string {
			var keep []string
			for _, l := range strings.Split(script, "\n") {
				if !strings.Contains(l, "git ") {
					keep = append(keep, l)
				}
			}
			return strings.Join(keep, "\n")
		}
		// Nor a directory its owner cannot read: in the fork a directory
		// of the run's is in a lower layer, which overlayfs renames only
		// by copy (EXDEV: no redirect_dir under userxattr), and a copy
		// cannot read it (docs/GUIDE.md, Workspaces).
		readable := func(script string) string {
			var keep []string
			for _, l := range strings.Split(script, "\n") {
				if f := strings.Fields(l); len(f) > 2 && f[0] == "chmod" {
					l = "[ -d " + f[2] + " ] || " + l
				}
				keep = append(keep, l)
			}
			return strings.Join(keep, "\n")
		}
		edits := func() string { return readable(noGit(editScript(rng))) }
		before, after, later := edits(), edits(), edits()
		r := e.create(t, paddock.KindOverlay, "on_reject")
		cl := e.create(t, paddock.KindClone, "on_reject")
		if a, b := run(r.ID, before), run(cl.ID, before); a != b {
			t.Fatalf("round %d (seed %d): exit %d in the run, %d in the clone\n%s", round, seed, a, b, before)
		}
		k := fork(t, e.m, r.ID, 1).Runs[0]
		if a, b := run(k.ID, after), run(cl.ID, after); a != b {
			t.Fatalf("round %d (seed %d): exit %d in the fork, %d in the clone\n%s", round, seed, a, b, after)
		}
		run(r.ID, later) // the run goes on; the fork sees none of it
		a, err := e.m.Changes.ChangeSet(ctx, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		b, err := e.m.Changes.ChangeSet(ctx, cl.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a.Hash != b.Hash || a.Diff != b.Diff || fmt.Sprint(a.Entries) != fmt.Sprint(b.Entries) {
			t.Fatalf("round %d (seed %d): the change sets differ\nbefore the fork:\n%s\nin the fork:\n%s\nfork:  %v\nclone: %v", round, seed, before, after, a.Entries, b.Entries)
		}
		for _, id := range []string{k.ID, r.ID, cl.ID} {
			e.m.Runs.Reject(ctx, id)
		}
	}
}

// TestForkMovesADirectoryOfItsRun: a directory the run made is in a lower
// layer of its fork, which overlayfs renames only by copy (rename(2) says
// EXDEV and mv copies): the fork's change set shows the directory at its
// new place, and none at the old.
func TestForkMovesADirectoryOfItsRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	r := e.create(t, paddock.KindOverlay, "on_reject")
	sh(t, e.m, r.ID, "rm -f run.sh && mkdir -p run.sh/in && echo x > run.sh/in/f.txt")
	k := fork(t, e.m, r.ID, 1).Runs[0]
	sh(t, e.m, k.ID, "mv run.sh moved")
	cs, err := e.m.Changes.ChangeSet(context.Background(), k.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range cs.Entries {
		got = append(got, en.Path+" "+string(en.Op))
	}
	if want := "[moved/in/f.txt create run.sh delete]"; fmt.Sprint(got) != want {
		t.Fatalf("the fork's change set: %v, want %s", got, want)
	}
}

// TestForkBlame: diff --blame after a fork: the run's hunks still name the
// calls that wrote them (its frozen layer is still its own), and a fork's
// name its run.created (what it was forked with) and its own calls.
func TestForkBlame(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	r := e.create(t, paddock.KindOverlay, "")
	if _, err := e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(`{"path":"a.txt","content":"one\n"}`)); err != nil {
		t.Fatal(err)
	}
	sh(t, e.m, r.ID, "echo two >> a.txt")
	k := fork(t, e.m, r.ID, 1).Runs[0]
	sh(t, e.m, r.ID, "echo after > b.txt")
	sh(t, e.m, k.ID, "echo three >> a.txt")
	seqsOf := func(id, path string) (*paddock.Blame, []int64) {
		b, err := e.m.Provenance.Blame(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range b.Hunks {
			if h.Path == path {
				return b, h.Seqs
			}
		}
		t.Fatalf("%s: no hunk of %s in %+v", id, path, b.Hunks)
		return nil, nil
	}
	b, seqs := seqsOf(r.ID, "a.txt")
	if len(seqs) != 2 || slices.Contains(seqs, 0) {
		t.Fatalf("the run's a.txt after the fork is blamed on %v (%+v)", seqs, b.Sources)
	}
	for _, q := range seqs {
		if src := b.Sources[q]; src.Type == paddock.EventRunCreated || src.Type == paddock.EventRunForked {
			t.Fatalf("the run's own lines blamed on %+v", src)
		}
	}
	b, seqs = seqsOf(k.ID, "a.txt")
	if len(seqs) != 2 || b.Sources[seqs[0]].Type != paddock.EventRunCreated || b.Sources[seqs[1]].Type == paddock.EventRunCreated {
		t.Fatalf("the fork's a.txt is blamed on %v: %+v", seqs, b.Sources)
	}
}
