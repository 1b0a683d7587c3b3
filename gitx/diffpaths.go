package gitx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// MaxDiffPaths bounds the paths DiffPaths takes on its command lines; a
// caller with more diffs the whole tree.
const MaxDiffPaths = 2000

// DiffPaths is DiffWorkTree for a caller that knows which paths can have
// changed (an overlay's upper layer): only those paths are read from base
// and from the work tree, so it costs what changed, not what the tree
// holds. Paths are literal, relative to the work tree; a directory stands
// for everything below it. Its answer equals DiffWorkTree's whenever the
// rest of the tree is unchanged.
//
// The work tree is read as DiffWorkTree reads it, by paddock, through
// descriptors (a view reached through /proc/PID/root, another mount
// namespace, is never resolved to a path of the daemon's own).
//
// o.Cache keeps the blobs made between calls, so a file that has not
// changed since is hashed again but not written again.
func (g *Git) DiffPaths(ctx context.Context, gitDir, workTree, base string, paths []string, o DiffOptions) (*Snapshot, error) {
	if err := CheckRef(base); err != nil {
		return nil, err
	}
	if len(paths) > MaxDiffPaths {
		return nil, fmt.Errorf("gitx: diff: %d paths; at most %d", len(paths), MaxDiffPaths)
	}
	if len(paths) == 0 {
		return &Snapshot{}, nil
	}
	spec := make([]string, len(paths))
	for i, p := range paths {
		spec[i] = filepath.ToSlash(filepath.Clean(p))
	}
	d, err := g.newDiff(ctx, gitDir, base, o.Content, o)
	if err != nil {
		return nil, err
	}
	defer d.close()
	bt, known, err := d.listBasePaths(base, paths, spec, o.BaseFiles)
	if err != nil {
		return nil, err
	}
	root, err := openTree(workTree)
	if err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	defer unix.Close(root)
	t, err := d.readPaths(root, bt, spec)
	if err != nil {
		return nil, err
	}
	// A withheld file base has stays in the index as base has it, which
	// needs its id.
	if known && withholdsBase(t.files, bt) {
		entries, err := d.lsTree(base, spec)
		if err != nil {
			return nil, err
		}
		bt = newBaseTree(entries)
	}
	if err := d.hashAll(root, t.files, bt, nil); err != nil {
		return nil, err
	}
	s := stagePaths(t.files, bt)
	if err := d.index(s.info.Bytes()); err != nil {
		return nil, err
	}
	snap, err := d.render(base, append([]string{"--"}, spec...), o, s.withheld, func(raw []byte) error {
		return verifyRaw(raw, s.present, s.fresh)
	})
	if err != nil {
		return nil, err
	}
	snap.Ignored = sorted(t.ignored)
	return snap, nil
}

// listBasePaths lists which of paths (spec, as git names them) base has:
// from its checkout in baseFiles where that can tell (known, but with no
// blob ids), else from git.
func (d *diffRun) listBasePaths(base string, paths, spec []string, baseFiles string) (bt *baseTree, known bool, err error) {
	inBase, known := baseHas(baseFiles, paths)
	if known {
		entries := map[string]baseEntry{}
		for p := range inBase {
			entries[p] = baseEntry{mode: "100644"}
		}
		return newBaseTree(entries), true, nil
	}
	entries, err := d.lsTree(base, spec)
	if err != nil {
		return nil, false, err
	}
	return newBaseTree(entries), false, nil
}

// readPaths reads the work tree at root under each of spec, once each
// (paths may overlap), leaving out what the ignore rules do.
func (d *diffRun) readPaths(root int, bt *baseTree, spec []string) (*treeReader, error) {
	t := &treeReader{root: root, base: bt, ignore: d.ignore, keptLinks: map[string]bool{}}
	defer t.dirs.close()
	for _, p := range sorted(slices.Clone(spec)) {
		if err := t.walk(p); err != nil {
			return nil, fmt.Errorf("gitx: diff: %w", err)
		}
	}
	t.sortFiles()
	t.files = uniqueFiles(t.files)
	if err := t.dropIgnored(); err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	return t, nil
}

// withholdsBase reports whether a file withheld from the diff is one
// that base has.
func withholdsBase(files []*wfile, bt *baseTree) bool {
	for _, f := range files {
		if _, ok := bt.entries[f.path]; ok && f.why != "" {
			return true
		}
	}
	return false
}

// stagePaths is what the index is given for DiffPaths: every file now
// under its paths (an unchanged one to the same blob), base's submodules
// there as they are, and what is withheld as base has it; the diff,
// limited to those paths, then shows what changed.
func stagePaths(files []*wfile, bt *baseTree) *staged {
	s := &staged{present: map[string]bool{}}
	for _, f := range files {
		b, isBase := bt.entries[f.path]
		if f.why == "" {
			s.add(f, isBase)
			continue
		}
		if isBase {
			indexLine(&s.info, b.mode, b.oid, f.path)
			if b.mode == f.mode && b.oid == f.oid {
				continue
			}
		}
		s.withheld = append(s.withheld, withheldOf(f, b, isBase))
	}
	for p, b := range bt.entries {
		if b.mode == "160000" {
			indexLine(&s.info, b.mode, b.oid, p)
		}
	}
	return s
}

// uniqueFiles drops the second of two files with the same path (paths
// that overlap).
func uniqueFiles(files []*wfile) []*wfile {
	seen := map[string]bool{}
	out := files[:0]
	for _, f := range files {
		if !seen[f.path] {
			seen[f.path] = true
			out = append(out, f)
		}
	}
	return out
}

// baseHas tells which of paths base has, from dir, its files as checked
// out (DiffOptions.BaseFiles): known is false when dir cannot tell (a path
// is a directory there, or lies under an empty one: a submodule's checkout
// holds nothing), and git must be asked.
func baseHas(dir string, paths []string) (in map[string]bool, known bool) {
	in = map[string]bool{}
	if dir == "" {
		return in, false
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return in, false
	}
	defer root.Close()
	empty := map[string]bool{}
	for _, p := range paths {
		fi, err := root.Lstat(p)
		switch {
		case err == nil && fi.IsDir():
			return map[string]bool{}, false
		case err == nil:
			in[filepath.ToSlash(p)] = false
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return map[string]bool{}, false
		}
		for d := filepath.Dir(p); d != "." && d != "/"; d = filepath.Dir(d) {
			e, seen := empty[d]
			if !seen {
				e = isEmptyDir(root, d)
				empty[d] = e
			}
			if e {
				return map[string]bool{}, false
			}
		}
	}
	return in, true
}

// isEmptyDir reports whether d in root is a directory holding nothing.
func isEmptyDir(root *os.Root, d string) bool {
	f, err := root.Open(d)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		return false
	}
	_, err = f.Readdirnames(1)
	return errors.Is(err, io.EOF)
}

// readRaw reads the raw records at the head of `git diff -z --raw --patch`
// output (":modes ids status" NUL path NUL, each), and the NUL that ends
