package gitx

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/fsat"
	"golang.org/x/sys/unix"
)

// MaxDiffPaths bounds the paths DiffPaths takes; a caller with more
// diffs the whole tree. From fullIndexPaths on no path is on a command
// line: the bound is where walking the paths one by one stops paying.
const MaxDiffPaths = 20000

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
// o.Cache keeps the blobs and each file's blob id by its stat data
// between calls, as DiffWorkTree's does: a file whose stat data has not
// changed since the last call is not read again.
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
	many := o.wholeIndex || !onCommandLine(spec)
	bt, known, err := d.listBasePaths(base, paths, spec, o.BaseFiles, o.Cache, many)
	if err != nil {
		return nil, err
	}
	root, err := fsat.OpenDir(workTree)
	if err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	defer unix.Close(root)
	var cache *statCache
	if o.Cache != "" {
		cache = loadStatCache(filepath.Join(o.Cache, "stat"), d.format.name)
	}
	since := time.Now()
	t, err := d.readPaths(root, bt, spec, o.Holds)
	if err != nil {
		return nil, err
	}
	// A withheld file base has stays in the index as base has it, which
	// needs its id.
	if known && withholdsBase(t.files, bt) {
		entries, err := d.baseUnder(base, spec, o.Cache, many)
		if err != nil {
			return nil, err
		}
		bt = newBaseTree(entries)
	}
	if err := d.hashAll(root, t.files, bt, cache); err != nil {
		return nil, err
	}
	cache.save(t.files, since)
	s, limit, err := d.stageForPaths(t, bt, spec, many)
	if err != nil {
		return nil, err
	}
	verify := func(raw []byte) error { return s.verify(raw, many) }
	var snap *Snapshot
	if many {
		snap, err = d.renderWhole(base, o.Cache, s, o, t.files, verify)
	} else {
		snap, err = d.render(base, limit, o, t.files, s.withheld, verify)
	}
	if err != nil {
		return nil, err
	}
	snap.Ignored = sorted(t.ignored)
	return snap, nil
}

// fullIndexPaths is how many paths DiffPaths takes before it diffs a
// whole index of base with the paths' changes rather than an index of
// the paths alone limited to them: git matches every entry of base
// against every path of a pathspec, which costs more than reading and
// writing base's index from about this many paths on.
const fullIndexPaths = 600

// onCommandLine reports whether paths are few and short enough to be
// git's arguments: fewer than fullIndexPaths, and within what one
// argument (128 KiB) and a command line (2 MiB with the environment) can
// hold, with room to spare. A path is as long as a work tree's
// directories are deep, which an agent decides.
func onCommandLine(paths []string) bool {
	if len(paths) >= fullIndexPaths {
		return false
	}
	total := 0
	for _, p := range paths {
		if len(p) > 64<<10 {
			return false
		}
		total += len(p) + 1
	}
	return total <= 512<<10
}

// stageForPaths stages the files under spec, and returns the pathspec
// the diff is limited to: with few paths, an index of them alone
// (stagePaths), given to the scratch index now, and spec; with many
// (whole), their changes (stageWorkTree: what the paths of base under
// spec no longer hold is removed), which renderWhole stages in base's
// whole index, and no pathspec.
func (d *diffRun) stageForPaths(t *treeReader, bt *baseTree, spec []string, whole bool) (*staged, []string, error) {
	if !whole {
		s := stagePaths(t.files, bt)
		return s, append([]string{"--"}, spec...), d.index(s.info.Bytes())
	}
	return d.stageWorkTree(t, bt), nil, nil
}

// listBasePaths lists which of paths (spec, as git names them) base has:
// from its checkout in baseFiles where that can tell (known, but with no
// blob ids), else from git (see baseUnder).
func (d *diffRun) listBasePaths(base string, paths, spec []string, baseFiles, cache string, many bool) (bt *baseTree, known bool, err error) {
	inBase, known := baseHas(baseFiles, paths)
	if known {
		entries := map[string]baseEntry{}
		for p := range inBase {
			entries[p] = baseEntry{mode: "100644"}
		}
		return newBaseTree(entries), true, nil
	}
	entries, err := d.baseUnder(base, spec, cache, many)
	if err != nil {
		return nil, false, err
	}
	return newBaseTree(entries), false, nil
}

// baseUnder lists base's entries under spec (a path, or what lies below
// it): from git, spec on its command line, for a few paths; for many,
// from base's whole listing (kept per base in cache), so that no command
// line holds them.
func (d *diffRun) baseUnder(base string, spec []string, cache string, many bool) (map[string]baseEntry, error) {
	if !many {
		return d.lsTree(base, spec)
	}
	bt, err := d.baseTree(base, cache)
	if err != nil {
		return nil, err
	}
	all := bt.entries
	want := make(map[string]bool, len(spec))
	for _, p := range spec {
		if p == "." {
			return all, nil
		}
		want[p] = true
	}
	out := map[string]baseEntry{}
	for p, e := range all {
		for q := p; ; q = parentOf(q) {
			if want[q] {
				out[p] = e
				break
			}
			if !strings.Contains(q, "/") {
				break
			}
		}
	}
	return out, nil
}

// readPaths reads the work tree at root under each of spec, once each
// (paths may overlap), leaving out what the ignore rules do; holds is
// DiffOptions.Holds.
func (d *diffRun) readPaths(root int, bt *baseTree, spec []string, holds func(string) ([]string, bool)) (*treeReader, error) {
	t := &treeReader{root: root, base: bt, ignore: d.ignore, keptLinks: map[string]bool{}, holds: holds}
	defer t.dirs.Close()
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
		if _, ok := bt.at(f); ok && f.why != "" {
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
		b, isBase := bt.at(f)
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
// holds nothing), and git must be asked. dir is read one name at a time,
// in path order, keeping the last path's directories open (fsat.Stack); a
// link on the way is not a directory of base.
func baseHas(dir string, paths []string) (in map[string]bool, known bool) {
	in = map[string]bool{}
	if dir == "" {
		return in, false
	}
	root, err := fsat.OpenDir(dir)
	if err != nil {
		return in, false
	}
	defer unix.Close(root)
	var dirs fsat.Stack
	defer dirs.Close()
	empty := map[string]bool{}
	for _, p := range sorted(slices.Clone(paths)) {
		slashed := filepath.ToSlash(p)
		var st unix.Stat_t
		pfd, name, err := dirs.Parent(root, slashed)
		if err == nil {
			err = unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		}
		switch {
		case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
			return map[string]bool{}, false
		case err == nil:
			// Every directory above a file base has holds it: none is empty.
			in[slashed] = false
			continue
		case !gone(err):
			return map[string]bool{}, false
		}
		for d := parentOf(slashed); d != ""; d = parentOf(d) {
			e, seen := empty[d]
			if !seen {
				e = isEmptyDir(root, &dirs, d)
				empty[d] = e
			}
			if e {
				return map[string]bool{}, false
			}
		}
	}
	return in, true
}

// parentOf is the directory above the slash-separated d ("" at the top).
func parentOf(d string) string {
	if i := strings.LastIndexByte(d, '/'); i >= 0 {
		return d[:i]
	}
	return ""
}

// isEmptyDir reports whether d in root is a directory holding nothing.
func isEmptyDir(root int, dirs *fsat.Stack, d string) bool {
	fd, err := dirs.Open(root, d)
	if err != nil {
		return false
	}
	return fsat.Empty(fd)
}

// readRaw reads the raw records at the head of `git diff -z --raw --patch`
// output (":modes ids status" NUL path NUL, each), and the NUL that ends
