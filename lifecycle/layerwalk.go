package lifecycle

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/paddock-dev/paddock/workspace"
	"golang.org/x/sys/unix"
)

// layerDirs keeps what a run's looks listed of its layers' directories
// (an overlay's upper layer, a fork's frozen ones): a directory still
// since its last listing is not listed again. A look after each command
// walks the whole upper layer, and most of its directories hold what
// the run made long before (the guard's read-only placeholders, the
// packages a build wrote): an lstat of each then, where a listing was an
// open, two reads of its names, a close and two looks at its opaque
// attribute.
//
// A directory's ctime moves with every name made, removed or renamed in
// it, and with its attributes (the opaque one); no process can set it
// back (utimes sets the mtime and atime, not the ctime). A listing is
// kept only if the directory had been still for layerStill before it was
// read (its stat taken first), so that a change made later in the same
// tick of the file system's clock, which would leave the ctime as it
// was, cannot have been missed; and it serves while the directory's
// inode and ctime are as they were.
//
// A walk keeps only the listings of the directories it visited: a
// directory removed since is forgotten with the walk after.
type layerDirs map[string]map[string]*layerDir // layer → directory → listing

type layerDir struct {
	ino    uint64
	ctime  int64
	names  []fs.DirEntry // sorted by name
	opaque bool
}

// layerStill is how long a directory must have been still for its
// listing to be kept.
const layerStill = 2 * time.Second

// layerAhead is how far ahead of the clock a directory's stillness is
// judged (tests move it, to have listings kept at once).
var layerAhead atomic.Int64

// layerWalk is one walk of a layer: the listings it was given, and those
// it keeps.
type layerWalk struct{ old, kept map[string]*layerDir }

// list returns the names in directory full, sorted, and whether it is
// opaque (an overlay's whiteout of the layers under it).
func (w *layerWalk) list(full string) ([]fs.DirEntry, bool, error) {
	var st unix.Stat_t
	if err := unix.Lstat(full, &st); err != nil {
		return nil, false, &fs.PathError{Op: "lstat", Path: full, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, false, &fs.PathError{Op: "list", Path: full, Err: fs.ErrNotExist} // made another thing meanwhile
	}
	ctime := st.Ctim.Nano()
	if d := w.old[full]; d != nil && d.ino == st.Ino && d.ctime == ctime {
		w.kept[full] = d
		return d.names, d.opaque, nil
	}
	names, err := os.ReadDir(full)
	if err != nil {
		return nil, false, err
	}
	opaque := workspace.Opaque(full)
	if time.Now().Add(time.Duration(layerAhead.Load())).Sub(time.Unix(0, ctime)) > layerStill {
		w.kept[full] = &layerDir{ino: st.Ino, ctime: ctime, names: names, opaque: opaque}
	}
	return names, opaque, nil
}

// layerVisit is what a walk of a layer does with its names.
type layerVisit struct {
	// skip says a name is not looked at, nor what is below it.
	skip func(rel string) bool
	// dir is called for each directory entered, with whether it is opaque.
	dir func(rel string, opaque bool)
	// file is called for each name that is not a directory.
	file func(rel string, d fs.DirEntry) error
}

// walk visits layer's names below it, depth first, each directory's in
// order, as filepath.WalkDir does. A directory gone meanwhile is skipped.
func (ds layerDirs) walk(layer string, v layerVisit) error {
	w := &layerWalk{old: ds[layer], kept: map[string]*layerDir{}}
	defer func() { ds[layer] = w.kept }()
	names, _, err := w.list(layer)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the layer went meanwhile
	}
	if err != nil {
		return err
	}
	return w.walkNames(layer, "", names, v)
}

func (w *layerWalk) walkNames(layer, dir string, names []fs.DirEntry, v layerVisit) error {
	for _, d := range names {
		rel := d.Name()
		if dir != "" {
			rel = dir + "/" + rel
		}
		if v.skip(rel) {
			continue
		}
		if !d.IsDir() {
			if err := v.file(rel, d); err != nil {
				return err
			}
			continue
		}
		sub, opaque, err := w.list(filepath.Join(layer, filepath.FromSlash(rel)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone meanwhile: the next look sees what is there
		}
		if err != nil {
			return err
		}
		v.dir(rel, opaque)
		if err := w.walkNames(layer, rel, sub, v); err != nil {
			return err
		}
	}
	return nil
}
