package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestFreezeFinishesFromEveryStep: a freeze stopped after any of its steps
// (as a kill leaves the disk) is finished by Freeze run again from the
// journal, to the same shape: the layer holds the run's files and no .git,
// the run's new upper layer its .git alone, and its stack names the layer
// over the ones it had.
func TestFreezeFinishesFromEveryStep(t *testing.T) {
	steps := []func(o *Overlay, j *ForkJournal){
		func(o *Overlay, j *ForkJournal) {}, // journal only
		func(o *Overlay, j *ForkJournal) { // renamed
			os.Rename(filepath.Join(j.Root, "upper"), o.LayerDir(j.Layer))
		},
		func(o *Overlay, j *ForkJournal) { // renamed, a new upper layer
			os.Rename(filepath.Join(j.Root, "upper"), o.LayerDir(j.Layer))
			os.Mkdir(filepath.Join(j.Root, "upper"), 0o755)
		},
		func(o *Overlay, j *ForkJournal) { // and the .git moved back
			os.Rename(filepath.Join(j.Root, "upper"), o.LayerDir(j.Layer))
			os.Mkdir(filepath.Join(j.Root, "upper"), 0o755)
			os.Rename(filepath.Join(o.LayerDir(j.Layer), ".git"), filepath.Join(j.Root, "upper", ".git"))
		},
	}
	for i, step := range steps {
		state := t.TempDir()
		o := &Overlay{Dir: filepath.Join(state, "workspaces"), Snapshots: filepath.Join(state, "snapshots")}
		root := filepath.Join(o.Dir, "r-run")
		for _, d := range []string{filepath.Join(root, "upper", ".git"), filepath.Join(root, "upper", "src"), filepath.Join(root, "work")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(root, "upper", ".git", "HEAD"), []byte("ref: refs/heads/paddock/r-run\n"), 0o644)
		os.WriteFile(filepath.Join(root, "upper", "src", "a.go"), []byte("package a\n"), 0o644)
		if err := writeStack(root, []string{"l-below"}); err != nil {
			t.Fatal(err)
		}
		j := &ForkJournal{Layer: "l-new", Run: "r-run", Root: root, Children: []string{"r-kid"}}
		if err := o.BeginFork(j); err != nil {
			t.Fatal(err)
		}
		step(o, j)
		js, err := o.Forks()
		if err != nil || len(js) != 1 || js[0].Layer != j.Layer || js[0].Root != root {
			t.Fatalf("step %d: journals %+v %v", i, js, err)
		}
		if err := o.Freeze(js[0]); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if err := o.Freeze(js[0]); err != nil { // done: nothing more
			t.Fatalf("step %d, again: %v", i, err)
		}
		if b, err := os.ReadFile(filepath.Join(o.LayerDir(j.Layer), "src", "a.go")); err != nil || string(b) != "package a\n" {
			t.Fatalf("step %d: the layer's file: %q %v", i, b, err)
		}
		if _, err := os.Lstat(filepath.Join(o.LayerDir(j.Layer), ".git")); !os.IsNotExist(err) {
			t.Fatalf("step %d: the layer holds a .git: %v", i, err)
		}
		ents, _ := os.ReadDir(filepath.Join(root, "upper"))
		if len(ents) != 1 || ents[0].Name() != ".git" {
			t.Fatalf("step %d: the new upper layer holds %v", i, ents)
		}
		stack, err := o.Stack(&paddock.Workspace{RunID: "r-run", Root: root})
		if err != nil || !slices.Equal(stack, []string{"l-new", "l-below"}) {
			t.Fatalf("step %d: stack %v %v", i, stack, err)
		}
		used, err := o.InUse()
		if err != nil || !used["l-new"] || !used["l-below"] {
			t.Fatalf("step %d: in use %v %v", i, used, err)
		}
		o.EndFork(j.Layer)
		if js, _ := o.Forks(); len(js) != 0 {
			t.Fatalf("step %d: journals left %+v", i, js)
		}
	}
}

// TestStackRefusesWhatIsNoLayer: a stack file naming anything but a
// layer's id (a path, an overlay option) is refused, not followed.
func TestStackRefusesWhatIsNoLayer(t *testing.T) {
	root := t.TempDir()
	w := &paddock.Workspace{RunID: "r-x", Root: root}
	o := &Overlay{Dir: filepath.Dir(root), Snapshots: filepath.Join(filepath.Dir(root), "snapshots")}
	for _, bad := range []string{"../../etc", "l-a:/etc", "l-a,upperdir=/x", "l-", "L-ABC", "/abs"} {
		os.WriteFile(filepath.Join(root, StackFile), []byte(bad+"\n"), 0o644)
		if ids, err := o.Stack(w); err == nil {
			t.Errorf("stack %q read as %v", bad, ids)
		}
	}
	os.WriteFile(filepath.Join(root, StackFile), []byte("l-abc\nl-2\n"), 0o644)
	if ids, err := o.Stack(w); err != nil || !slices.Equal(ids, []string{"l-abc", "l-2"}) {
		t.Fatalf("stack %v %v", ids, err)
	}
}

// TestLayerNames: ReadLayers says what each directory of the layers
// holds, the upper's and a frozen layer's together, every entry (the
// run's .git too, whose own entries are not read), and nothing for a
// directory no layer has.
func TestLayerNames(t *testing.T) {
	upper, frozen := t.TempDir(), t.TempDir()
	for root, files := range map[string][]string{
		upper:  {".git/HEAD", "a/x", "a/b/y", "top"},
		frozen: {"a/z", "c/w"},
	} {
		for _, f := range files {
			p := filepath.Join(root, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Mkdir(filepath.Join(upper, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	u, err := ReadLayers(Layers{Upper: upper, Frozen: []string{frozen}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"": {".git", "a", "c", "empty", "top"}, "a": {"b", "x", "z"}, "a/b": {"y"}, "c": {"w"}, "empty": {}}
	for dir, names := range want {
		got := slices.Clone(u.Names[dir])
		slices.Sort(got)
		got = slices.Compact(got)
		if got == nil || !slices.Equal(got, names) {
			t.Errorf("names of %q: %v, want %v", dir, u.Names[dir], names)
		}
	}
	for _, dir := range []string{".git", "missing"} {
		if ns, ok := u.Names[dir]; ok {
			t.Errorf("names of %q, which the walk does not read: %v", dir, ns)
		}
	}
}
