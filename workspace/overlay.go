package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"golang.org/x/sys/unix"
)

// Overlay makes copy-on-write workspaces. The lower layer is a snapshot of
// the base revision, exported once per (project, base) under Snapshots and
// shared by every run at that base; each run gets only its own upper and
// work directories, w.Root/upper and w.Root/work, so making a run at a
// snapshotted base costs the same whatever the repository's size. The
// merged view is mounted by the run's sandbox at w.Root, inside the
// sandbox's mount namespace only: nothing is mounted on the host.
type Overlay struct {
	Git       *gitx.Git
	Dir       string // workspaces (the upper layers) are made below this directory
	Snapshots string // the lower layers, one per project and base revision
	// Owner, if not 0, is given the snapshot and the upper layer: the
	// sandbox's uid, which must be able to read the lower layer and write
	// the upper one. Set it before the provider is used.
	Owner int

	// snapMu is held while a snapshot is built, and by whoever removes
	// snapshots (LockSnapshots): one being built is never taken away.
	snapMu sync.Mutex
}

// LockSnapshots holds off every snapshot build until the returned
// function is called (gc removes snapshots under it).
func (o *Overlay) LockSnapshots() (unlock func()) {
	o.snapMu.Lock()
	return o.snapMu.Unlock
}

type progressKey struct{}

// WithProgress returns ctx carrying fn, which a long preparation (a
// base's snapshot) tells how far it has come.
func WithProgress(ctx context.Context, fn func(msg string)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

func progress(ctx context.Context, format string, args ...any) {
	if fn, ok := ctx.Value(progressKey{}).(func(string)); ok && fn != nil {
		fn(fmt.Sprintf(format, args...))
	}
}

// Kind returns paddock.KindOverlay.
func (o *Overlay) Kind() paddock.WorkspaceKind { return paddock.KindOverlay }

// Layers are the host directories of an overlay workspace.
type Layers struct {
	Lower, Upper, Work string
	// Frozen are the frozen layers between Upper and Lower, topmost
	// first (a forked run's; see layers.go), as LayersWithStack reads them.
	Frozen []string
}

// LayersOf returns where w's layers are.
func (o *Overlay) LayersOf(project string, w *paddock.Workspace) Layers {
	return Layers{
		Lower: SnapshotDir(o.Snapshots, project, w.BaseRevision),
		Upper: filepath.Join(w.Root, "upper"),
		Work:  filepath.Join(w.Root, "work"),
	}
}

// SnapshotDir is where the snapshot of project at sha lives.
func SnapshotDir(snapshots, project, sha string) string {
	return filepath.Join(snapshots, project, sha)
}

// SnapshotIndex is the git index made with a snapshot (beside it): each
// run at that base starts its git from a copy.
func SnapshotIndex(snapshotDir string) string { return snapshotDir + ".index" }

// Prepare makes sure the base's snapshot exists (building it if not) and
// makes the run's empty upper and work directories.
func (o *Overlay) Prepare(ctx context.Context, p *paddock.Project, w *paddock.Workspace) error {
	return o.prepare(ctx, p, w, "")
}

// prepare is Prepare; commonDir, if known, is the project's git directory
// (else git is asked).
func (o *Overlay) prepare(ctx context.Context, p *paddock.Project, w *paddock.Workspace, commonDir string) error {
	if err := mustBeBelow(o.Dir, w.Root); err != nil {
		return err
	}
	if err := gitx.CheckRef(w.BaseRevision); err != nil || strings.ContainsAny(p.Name, "/\x00") || p.Name == "" || p.Name[0] == '.' {
		return fmt.Errorf("workspace: overlay: bad project or revision")
	}
	if _, err := o.Snapshot(ctx, p, w.BaseRevision); err != nil {
		return err
	}
	l := o.LayersOf(p.Name, w)
	for _, d := range []string{w.Root, l.Upper, l.Work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return errors.Join(fmt.Errorf("workspace: overlay: %w", err), RemoveTree(o.Dir, w.Root))
		}
	}
	// The run's own git, in its upper layer: .git in the view.
	var err error
	if commonDir == "" {
		var repo *gitx.Repo
		if repo, err = o.Git.Inspect(ctx, p.Root); err == nil {
			commonDir = repo.CommonDir
		}
	}
	if err == nil {
		index := SnapshotIndex(l.Lower)
		if _, serr := os.Stat(index); serr != nil {
			index = "" // a snapshot made before indexes were kept: git reads the files once
		}
		err = WriteGitDir(filepath.Join(l.Upper, ".git"), w.RunID, w.BaseRevision, index, commonDir, o.Owner)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("workspace: overlay: %w", err), RemoveTree(o.Dir, w.Root))
	}
	return nil
}

// Snapshot returns the snapshot of p at sha, exporting it first if there
// is none. It is built in a temporary directory and renamed into place, so
// a crash never leaves half a snapshot where a run would use it.
func (o *Overlay) Snapshot(ctx context.Context, p *paddock.Project, sha string) (string, error) {
	o.snapMu.Lock()
	defer o.snapMu.Unlock()
	dir := SnapshotDir(o.Snapshots, p.Name, sha)
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir, nil
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("workspace: snapshot: %w", err)
	}
	os.Chmod(o.Snapshots, 0o755) // the sandbox's uid walks it to the lower layer
	tmp, err := os.MkdirTemp(parent, ".building-")
	if err != nil {
		return "", fmt.Errorf("workspace: snapshot: %w", err)
	}
	defer os.RemoveAll(tmp)
	os.Chmod(tmp, 0o755)
	repo, err := o.Git.Inspect(ctx, p.Root)
	if err != nil {
		return "", err
	}
	progress(ctx, "building the snapshot of %s at %.12s", p.Name, sha)
	// The index git makes as it writes the files goes beside the snapshot
	// (renamed into place before it, so a snapshot always has one).
	index := tmp + ".index"
	defer os.Remove(index)
	if err := o.Git.ExportTreeIndexed(ctx, repo.CommonDir, sha, tmp, index); err != nil {
		return "", err
	}
	n := 0
	if err := filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n%10000 == 0 {
			progress(ctx, "snapshot of %s: %d entries", p.Name, n)
		}
		if o.Owner != 0 {
			return os.Lchown(path, o.Owner, o.Owner)
		}
		return nil
	}); err != nil {
		return "", fmt.Errorf("workspace: snapshot: %w", err)
	}
	if err := os.Rename(index, SnapshotIndex(tmp)); err == nil {
		os.Lchown(SnapshotIndex(tmp), o.Owner, o.Owner)
		if err := os.Rename(SnapshotIndex(tmp), SnapshotIndex(dir)); err != nil {
			return "", fmt.Errorf("workspace: snapshot: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
			return dir, nil // built meanwhile by someone else
		}
		return "", fmt.Errorf("workspace: snapshot: %w", err)
	}
	progress(ctx, "snapshot of %s at %.12s: %d entries", p.Name, sha, n)
	return dir, nil
}

// Remove deletes the run's layers; the snapshot stays for gc.
func (o *Overlay) Remove(ctx context.Context, p *paddock.Project, w *paddock.Workspace) error {
	return RemoveTree(o.Dir, w.Root)
}

// Present reports whether the run's layers exist.
func (o *Overlay) Present(ctx context.Context, w *paddock.Workspace) (bool, error) {
	return present(filepath.Join(w.Root, "upper"))
}

// Upper is what an upper layer holds: the paths it says changed, and the
// size of what it holds, for a change set's limits.
type Upper struct {
	// Paths, relative to the workspace: every file, link and whiteout (a
	// deletion), and every opaque directory (one deleted and made anew,
	// hiding the lower's, or made where a file was) as a whole. A directory
	// copied up only to hold a change below it is not listed itself, nor is
	// an empty one that is not opaque (new, or copied up for its metadata):
	// git keeps no directories, so it changes nothing a change set holds
	// (the sandbox makes such directories for protected paths).
	Paths []string
	// Files counts the non-directories, Bytes their regular files' sizes;
	// Largest is the biggest regular file, LargestSize its size.
	Files       int
	Bytes       int64
	Largest     string
	LargestSize int64
	// Names are the names each directory of the layers holds, by its
	// path ("" the top): every entry, whiteouts and the run's .git
	// included. A directory of the merged view that the layers hold
	// holds no name but these and its lower layer's.
	Names map[string][]string
}

// ReadUpper reads an upper layer, once: its cost is what changed.
func ReadUpper(upper string) (*Upper, error) {
	u := &Upper{Names: map[string][]string{"": {}}}
	opaqueDir := "" // inside it, files count but are not listed
	err := filepath.WalkDir(upper, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == upper {
			return nil
		}
		rel, _ := filepath.Rel(upper, path)
		parent := filepath.Dir(rel)
		if parent == "." {
			parent = ""
		}
		u.Names[parent] = append(u.Names[parent], d.Name())
		if rel == ".git" {
			// The run's own git (WriteGitDir): never part of a change set,
			// whatever the agent made of it.
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			u.Names[rel] = []string{} // its entries follow (a directory not read has none here)
		}
		inside := opaqueDir != "" && strings.HasPrefix(rel, opaqueDir+string(filepath.Separator))
		if !inside {
			opaqueDir = ""
		}
		if d.IsDir() {
			switch {
			case inside:
			case opaque(path):
				u.Paths = append(u.Paths, rel)
				opaqueDir = rel
			}
			return nil
		}
		if !inside {
			u.Paths = append(u.Paths, rel)
		}
		u.Files++
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			u.Bytes += fi.Size()
			if fi.Size() > u.LargestSize {
				u.Largest, u.LargestSize = rel, fi.Size()
			}
		}
		return nil
	})
	return u, err
}

// opaque reports an overlay's opaque-directory mark, set as a trusted
// (root) or user (user namespace, userxattr) extended attribute.
func opaque(path string) bool {
	buf := make([]byte, 4)
	for _, name := range []string{"user.overlay.opaque", "trusted.overlay.opaque"} {
		if n, err := unix.Lgetxattr(path, name, buf); err == nil && n > 0 && buf[0] == 'y' {
			return true
		}
	}
	return false
}
