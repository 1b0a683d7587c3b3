package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/internal/durable"
)

// Frozen layers: an overlay run forked (issue #22).
//
// A fork freezes the run's upper layer where it lies: the directory is
// renamed into the layers directory (one rename, whatever it holds), the
// run's own .git is renamed back into a new, empty upper layer, and the run
// goes on over the frozen layer, as each of its forks does over an empty
// upper layer of its own. A workspace names the frozen layers it stacks on
// in its stack file (w.Root/stack, topmost first, written whole and
// renamed into place); the snapshot of the base lies below them all. A
// frozen layer is never written again, and is removed only when no
// workspace's stack names it (CollectLayers).
//
// A fork is journalled: the journal (LAYER.fork in the layers directory)
// is written before the upper layer moves and removed once the fork is
// recorded, so that a crash in between is finished by FinishFreeze (the
// run's own layers are put in their final shape, which holds the same
// files) and the forks that were not recorded are rolled back by the
// lifecycle's recovery.

// StackFile is the name, in an overlay workspace's directory, of the file
// listing the frozen layers it stacks on.
const StackFile = "stack"

// maxStack bounds a workspace's stack (the sandbox takes as many).
const maxStack = 64

// LayersDir is where the frozen layers are: beside the snapshots.
func (o *Overlay) LayersDir() string {
	return filepath.Join(filepath.Dir(o.Snapshots), "layers")
}

// LayerDir is the directory of the frozen layer id.
func (o *Overlay) LayerDir(id string) string { return filepath.Join(o.LayersDir(), id) }

// validLayerID says whether id names a frozen layer: "l-" and letters
// and digits only, so that it is one path element and no overlay option.
func validLayerID(id string) bool {
	rest, ok := strings.CutPrefix(id, "l-")
	if !ok || rest == "" || len(rest) > 32 {
		return false
	}
	for _, c := range rest {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Stack returns the ids of the frozen layers w stacks on, topmost first
// (none for a workspace never forked).
func (o *Overlay) Stack(w *paddock.Workspace) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(w.Root, StackFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workspace: stack: %w", err)
	}
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		if !validLayerID(l) {
			return nil, fmt.Errorf("workspace: stack of %s names %q, no layer", w.RunID, l)
		}
		ids = append(ids, l)
	}
	return ids, nil
}

// writeStack records ids as root's stack, atomically.
func writeStack(root string, ids []string) error {
	if len(ids) > maxStack {
		return paddock.Errorf(paddock.CodeConflict, "a workspace stacks on at most %d frozen layers", maxStack)
	}
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(id + "\n")
	}
	if err := durable.WriteFile(filepath.Join(root, StackFile), []byte(b.String())); err != nil {
		return fmt.Errorf("workspace: stack: %w", err)
	}
	return nil
}

// ForkJournal is a fork in progress: the run whose upper layer is being
// frozen into Layer, and the runs being made on it.
type ForkJournal struct {
	Layer    string   `json:"layer"`
	Run      string   `json:"run"`  // the forked run
	Root     string   `json:"root"` // its workspace's directory
	Children []string `json:"children"`
}

func (o *Overlay) journalPath(layer string) string {
	return filepath.Join(o.LayersDir(), layer+".fork")
}

// BeginFork writes j's journal, durably, before anything of the fork is
// done on disk.
func (o *Overlay) BeginFork(j *ForkJournal) error {
	if !validLayerID(j.Layer) {
		return fmt.Errorf("workspace: bad layer id %q", j.Layer)
	}
	if err := mustBeBelow(o.Dir, j.Root); err != nil {
		return err
	}
	if err := os.MkdirAll(o.LayersDir(), 0o755); err != nil {
		return fmt.Errorf("workspace: fork: %w", err)
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(o.journalPath(j.Layer), b); err != nil {
		return fmt.Errorf("workspace: fork: %w", err)
	}
	return nil
}

// EndFork removes the fork's journal: it is recorded, or rolled back.
func (o *Overlay) EndFork(layer string) error {
	if err := os.Remove(o.journalPath(layer)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("workspace: fork: %w", err)
	}
	return nil
}

// Forks returns the journals of the forks a crash interrupted.
func (o *Overlay) Forks() ([]*ForkJournal, error) {
	ents, err := os.ReadDir(o.LayersDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workspace: forks: %w", err)
	}
	var out []*ForkJournal
	for _, e := range ents {
		layer, ok := strings.CutSuffix(e.Name(), ".fork")
		if !ok || !validLayerID(layer) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(o.LayersDir(), e.Name()))
		if err != nil {
			return nil, fmt.Errorf("workspace: forks: %w", err)
		}
		j := &ForkJournal{}
		if err := json.Unmarshal(b, j); err != nil || j.Layer != layer || mustBeBelow(o.Dir, j.Root) != nil {
			return nil, fmt.Errorf("workspace: fork journal %s is damaged", e.Name())
		}
		out = append(out, j)
	}
	return out, nil
}

// Freeze makes j's run's upper layer the frozen layer j.Layer and gives the
// run a new, empty upper layer over it (with its own .git, moved back),
// its stack naming the layer. The upper layer must be mounted nowhere (the
// run's harness given back). Each step is one rename or an atomic write,
// and Freeze carries on from whichever a crash left done: run again on
// the same journal, it finishes the freeze.
func (o *Overlay) Freeze(j *ForkJournal) error {
	if err := mustBeBelow(o.Dir, j.Root); err != nil || !validLayerID(j.Layer) {
		return fmt.Errorf("workspace: freeze: bad journal")
	}
	upper, layer := filepath.Join(j.Root, "upper"), o.LayerDir(j.Layer)
	w := &paddock.Workspace{RunID: j.Run, Root: j.Root}
	below, err := o.Stack(w)
	if err != nil {
		return err
	}
	if slices.Contains(below, j.Layer) {
		return nil // done
	}
	if len(below)+1 > maxStack {
		return paddock.Errorf(paddock.CodeConflict, "run %s stacks on %d frozen layers already; at most %d", j.Run, len(below), maxStack)
	}
	// 1. The freeze itself: one rename of the whole upper layer.
	if _, err := os.Lstat(layer); errors.Is(err, fs.ErrNotExist) {
		fi, err := os.Lstat(upper)
		if err != nil {
			return fmt.Errorf("workspace: freeze: %w", err)
		}
		if err := os.Rename(upper, layer); err != nil {
			if errors.Is(err, syscall.EXDEV) {
				return paddock.Errorf(paddock.CodeUnsupported, "the layers directory %s is on another file system than the workspaces", o.LayersDir())
			}
			return fmt.Errorf("workspace: freeze: %w", err)
		}
		// 2. A new, empty upper layer, as the old one was made.
		if err := os.Mkdir(upper, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("workspace: freeze: %w", err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			os.Lchown(upper, int(st.Uid), int(st.Gid))
		}
	} else if err != nil {
		return fmt.Errorf("workspace: freeze: %w", err)
	}
	if _, err := os.Lstat(upper); errors.Is(err, fs.ErrNotExist) {
		// A crash between the rename and the mkdir.
		if err := os.Mkdir(upper, 0o755); err != nil {
			return fmt.Errorf("workspace: freeze: %w", err)
		}
		if o.Owner != 0 {
			os.Lchown(upper, o.Owner, o.Owner)
		}
	}
	// 3. The run's own git goes back to it: a fork gets a git of its own,
	// and the frozen layer holds only the files.
	if _, err := os.Lstat(filepath.Join(layer, ".git")); err == nil {
		if err := os.Rename(filepath.Join(layer, ".git"), filepath.Join(upper, ".git")); err != nil {
			return fmt.Errorf("workspace: freeze: %w", err)
		}
	}
	// The renames are durable before the stack names the layer: each
	// directory they changed is synced (not the whole file system, whose
	// dirty files are the run's, and no business of a fork's).
	for _, d := range []string{o.LayersDir(), j.Root, layer, upper} {
		if err := syncDir(d); err != nil {
			return fmt.Errorf("workspace: freeze: %w", err)
		}
	}
	// 4. The run stacks on the layer: the freeze is done.
	return writeStack(j.Root, append([]string{j.Layer}, below...))
}

// PrepareOn makes w an overlay workspace stacked on the frozen layers
// stack (topmost first) over the base's snapshot: as Prepare, with the
// stack recorded before the workspace is used. commonDir is the project's
// git directory.
func (o *Overlay) PrepareOn(ctx context.Context, p *paddock.Project, w *paddock.Workspace, stack []string, commonDir string) error {
	for _, id := range stack {
		if !validLayerID(id) {
			return fmt.Errorf("workspace: bad layer id %q", id)
		}
		if _, err := os.Stat(o.LayerDir(id)); err != nil {
			return paddock.Errorf(paddock.CodeConflict, "frozen layer %s is missing (%v)", id, err)
		}
	}
	if err := o.prepare(ctx, p, w, commonDir); err != nil {
		return err
	}
	if err := writeStack(w.Root, stack); err != nil {
		return errors.Join(err, RemoveTree(o.Dir, w.Root))
	}
	return nil
}

// LayerIDs lists the frozen layers on disk.
func (o *Overlay) LayerIDs() ([]string, error) {
	ents, err := os.ReadDir(o.LayersDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workspace: layers: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && validLayerID(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// RemoveLayer deletes a frozen layer no workspace stacks on.
func (o *Overlay) RemoveLayer(id string) error {
	if !validLayerID(id) {
		return fmt.Errorf("workspace: bad layer id %q", id)
	}
	return RemoveTree(o.LayersDir(), o.LayerDir(id))
}

// InUse returns the frozen layers that the stacks of the workspace
// directories under o.Dir name, and the journals of forks under way.
func (o *Overlay) InUse() (map[string]bool, error) {
	used := map[string]bool{}
	ents, err := os.ReadDir(o.Dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("workspace: layers: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		ids, err := o.Stack(&paddock.Workspace{RunID: e.Name(), Root: filepath.Join(o.Dir, e.Name())})
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			used[id] = true
		}
	}
	js, err := o.Forks()
	if err != nil {
		return nil, err
	}
	for _, j := range js {
		used[j.Layer] = true
	}
	return used, nil
}

// LayersWithStack is LayersOf with the frozen layers w stacks on.
func (o *Overlay) LayersWithStack(project string, w *paddock.Workspace) (Layers, error) {
	l := o.LayersOf(project, w)
	ids, err := o.Stack(w)
	if err != nil {
		return l, err
	}
	for _, id := range ids {
		l.Frozen = append(l.Frozen, o.LayerDir(id))
	}
	return l, nil
}

// ReadLayers reads what an overlay workspace's layers say changed against
// the base: its upper layer's paths and its frozen layers', merged (a path
// a higher layer deletes or replaces is listed, and the view tells what
// it is now). Its cost is what changed, in every layer.
func ReadLayers(l Layers) (*Upper, error) {
	u, err := ReadUpper(l.Upper)
	if err != nil || len(l.Frozen) == 0 {
		return u, err
	}
	seen := map[string]bool{}
	for _, p := range u.Paths {
		seen[p] = true
	}
	for _, dir := range l.Frozen {
		f, err := ReadUpper(dir)
		if err != nil {
			return nil, err
		}
		for _, p := range f.Paths {
			if !seen[p] {
				seen[p] = true
				u.Paths = append(u.Paths, p)
			}
		}
		for dir, ns := range f.Names {
			if u.Names[dir] == nil {
				u.Names[dir] = []string{}
			}
			u.Names[dir] = append(u.Names[dir], ns...)
		}
		u.Files += f.Files
		u.Bytes += f.Bytes
		if f.LargestSize > u.LargestSize {
			u.Largest, u.LargestSize = f.Largest, f.LargestSize
		}
	}
	slices.Sort(u.Paths)
	return u, nil
}

// syncDir makes the entries of directory dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Opaque reports whether the directory at path is marked opaque in its
// layer (made anew where a lower layer had one: nothing below shows).
func Opaque(path string) bool { return opaque(path) }
