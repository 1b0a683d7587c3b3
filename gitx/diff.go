package gitx

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/internal/fsat"
	"golang.org/x/sys/unix"
)

// Snapshot is what DiffWorkTree and DiffPaths report: git's raw entries
// and its binary unified diff of a work tree against a base commit, and
// what of the work tree is never part of a diff.
type Snapshot struct {
	Raw []byte // `git diff --raw -z --full-index` output
	// Diff is the `git diff --binary --full-index` output, when the caller
	// gave no DiffOptions.Patch to stream it to.
	Diff    []byte
	Ignored []string // untracked files the ignore rules leave out
	// Withheld are the work tree's files that differ from base and that
	// no diff holds: .git entries, the files of an embedded repository
	// (see the package doc). A change set lists them, to be seen and
	// never applied.
	Withheld []Withheld
}

// Withheld is a file of a work tree left out of a diff, and why.
type Withheld struct {
	Path             string
	OldMode, NewMode string // OldMode is empty when base does not have it
	OldBlob, NewBlob string
	Why              string
}

// DiffOptions are what DiffWorkTree and DiffPaths take besides the trees.
type DiffOptions struct {
	wholeIndex bool // a diff of a whole index of base whatever the paths (tests)

	// Cache, if not empty, is a private directory (paddock's, never the
	// work tree's) where what is made of the work tree is kept between
	// calls (see DiffWorkTree and DiffPaths).
	Cache string
	// IncludeIgnored: files the ignore rules leave out are part of the diff.
	IncludeIgnored bool
	// Check, if not nil, sees the raw entries and the withheld files
	// before the patch is written, and may refuse (a change set over its
	// limits is never rendered). size gives the size of a work tree's file
	// as it was read and hashed (a link's: its target's length), false for
	// a path it was not.
	Check func(raw []byte, withheld []Withheld, size func(path string) (int64, bool)) error
	// Patch, if not nil, receives the unified diff as git writes it: the
	// diff never has to fit in memory. Without it Snapshot.Diff holds it.
	Patch io.Writer
	// Exclude leaves top-level paths out (DiffWorkTree only).
	Exclude []string
	// BaseFiles, if not empty, is a directory holding base's tracked files
	// as git checks them out and nothing else (an overlay's lower layer).
	// DiffPaths then learns from it which of its paths base has, instead of
	// asking git, whenever it can tell: every path is a file there or
	// absent, and none lies under an empty directory (a submodule's).
	BaseFiles string
	// Content is how many bytes of files DiffPaths will read (an overlay's
	// upper layer holds them): the objects made of them are kept in memory
	// (a tmpfs) only when that is small.
	Content int64
	// Holds, if not nil, gives the names a directory of the work tree
	// (its path, "" the top) can hold at most, where the caller knows
	// them (known): an overlay's, from its layers. DiffPaths lists a
	// directory only if those could make it look like a repository or
	// hold a .gitignore: what a directory cannot hold, it does not hold.
	Holds func(dir string) (names []string, known bool)
}

// render writes the scratch index's diff against base (under spec): the
// entries and the patch in one git process. The entries are read first
// and checked; the patch after them streams to the caller.
func (d *diffRun) render(base string, spec []string, o DiffOptions, files []*wfile, withheld []Withheld, verify func(raw []byte) error) (*Snapshot, error) {
	snap := &Snapshot{Withheld: withheld}
	patch, buf := o.patch()
	args := diffArgs(base, spec)
	err := d.g.stream(d.ctx, d.at, d.extra, args, func(out *bufio.Reader) error {
		var err error
		if snap.Raw, err = readRaw(out); err != nil {
			return err
		}
		if err := verify(snap.Raw); err != nil {
			return err
		}
		if o.Check != nil {
			if err := o.Check(snap.Raw, withheld, sizeOf(files)); err != nil {
				return err
			}
		}
		_, err = io.Copy(patch, out)
		return err
	})
	var pe *paddock.Error
	if errors.As(err, &pe) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	snap.Diff = buf.Bytes()
	return snap, nil
}

// diffArgs is git's command line for the scratch index's diff against
// base under spec: every part of a diff (diffparts.go) takes the same,
// for their answers to join into one.
func diffArgs(base string, spec []string) []string {
	return append([]string{"diff", "--cached", "-z", "--raw", "--patch", "--binary", "--no-renames", "--full-index", "--no-abbrev",
		"--no-color", "--no-ext-diff", "--no-textconv", base}, spec...)
}

// sizeOf looks up the size of a file of files (sorted by path) as it was
// read: the limits are checked against what was hashed, with no look at
// the work tree again.
func sizeOf(files []*wfile) func(string) (int64, bool) {
	return func(p string) (int64, bool) {
		i, ok := slices.BinarySearchFunc(files, p, func(f *wfile, p string) int { return strings.Compare(f.path, p) })
		if !ok {
			return 0, false
		}
		return files[i].st.Size, true
	}
}

// verify checks git's entries against what was staged (verifyRaw);
// where the index was made of base's whole (whole), every entry must also
// be a path s staged, or one git deleted for a file or a directory s
// staged in its place: an entry s does not account for (a file of base
// that an index made of a listing lacks, shown deleted) is never taken
// for a change.
func (s *staged) verify(raw []byte, whole bool) error {
	if whole {
		var dirs map[string]bool // the directories of the paths staged
		fields := bytes.Split(raw, []byte{0})
		for i := 0; i+1 < len(fields); i += 2 {
			p := string(fields[i+1])
			if _, gone := slices.BinarySearch(s.gone, p); gone || s.present[p] {
				continue
			}
			if dirs == nil {
				dirs = map[string]bool{}
				for q := range s.present {
					for d := path.Dir(q); d != "." && !dirs[d]; d = path.Dir(d) {
						dirs[d] = true
					}
				}
			}
			replaced := dirs[p]
			for d := path.Dir(p); d != "." && !replaced; d = path.Dir(d) {
				replaced = s.present[d]
			}
			if !bytes.HasSuffix(fields[i], []byte(" D")) || !replaced {
				return fmt.Errorf("gitx: diff: git reports %q, which the index was not given", p)
			}
		}
	}
	return verifyRaw(raw, s.present, s.fresh)
}

// verifyRaw checks git's entries against what the index was given: git
// drops, with a mere warning, an index entry whose path it refuses, and a
// file must never leave a change set that way. A path the index holds is
// never deleted, and every new one is there.
func verifyRaw(raw []byte, present map[string]bool, fresh []string) error {
	seen := map[string]bool{}
	fields := bytes.Split(raw, []byte{0})
	for i := 0; i+1 < len(fields); i += 2 {
		p := string(fields[i+1])
		seen[p] = true
		if bytes.HasSuffix(fields[i], []byte(" D")) && present[p] {
			return fmt.Errorf("gitx: diff: git left %q out of the index", p)
		}
	}
	for _, p := range fresh {
		if !seen[p] {
			return fmt.Errorf("gitx: diff: git left %q out of the index", p)
		}
	}
	return nil
}

func indexLine(b *bytes.Buffer, mode, oid, p string) {
	fmt.Fprintf(b, "%s %s\t%s\x00", mode, oid, p)
}

// DiffWorkTree compares the files of workTree with commit base of the
// repository whose git directory is gitDir, and never touches either's
// index or object store. paddock reads the work tree (see the package
// doc: git never does, and its own .git is left out), hashes what changed
// and hands git the changes in a temporary index of a scratch repository
// that borrows the repository's objects; the blobs go to a directory of
// paddock's. Top-level paths in o.Exclude are left out.
//
// o.Cache keeps the blobs and each file's blob id by its stat data
// between calls: a file whose stat data (size, mtime, ctime, inode: ctime
// cannot be set back by the work tree's owner) has not changed since the
// last call is not read again. Without it every call hashes every file.
func (g *Git) DiffWorkTree(ctx context.Context, gitDir, workTree, base string, o DiffOptions) (*Snapshot, error) {
	if err := CheckRef(base); err != nil {
		return nil, err
	}
	d, err := g.newDiff(ctx, gitDir, base, 0, o)
	if err != nil {
		return nil, err
	}
	defer d.close()
	var cache *statCache
	if o.Cache != "" {
		cache = loadStatCache(filepath.Join(o.Cache, "stat"), d.format.name)
	}
	bt, err := d.baseTree(base, o.Cache)
	if err != nil {
		return nil, err
	}
	root, err := fsat.OpenDir(workTree)
	if err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	defer unix.Close(root)
	since := time.Now()
	t, err := d.readWorkTree(root, bt, o.Exclude)
	if err != nil {
		return nil, err
	}
	if err := d.hashAll(root, t.files, bt, cache); err != nil {
		return nil, err
	}
	cache.save(t.files, since)
	s := d.stageWorkTree(t, bt)
	want := len(s.present) + len(s.gone)
	if want == 0 {
		return unchanged(o, t.files, s.withheld, t.ignored)
	}
	verify := func(raw []byte) error {
		if n := bytes.Count(raw, []byte{0}) / 2; n != want {
			return fmt.Errorf("gitx: diff: git reports %d entries, the index was given %d", n, want)
		}
		return s.verify(raw, true)
	}
	// With few changes the index holds the changed files alone and the
	// diff is limited to the changed paths: git reads and writes no index
	// of the whole of base (12,000 entries cost each git command 20 ms).
	var snap *Snapshot
	changed := slices.Concat(s.gone, slices.Collect(maps.Keys(s.present)))
	if !o.wholeIndex && onCommandLine(changed) {
		sort.Strings(changed)
		if err := d.index(s.adds); err != nil {
			return nil, err
		}
		snap, err = d.render(base, append([]string{"--"}, changed...), o, t.files, s.withheld, verify)
	} else {
		snap, err = d.renderWhole(base, o.Cache, s, o, t.files, verify)
	}
	if err != nil {
		return nil, err
	}
	snap.Ignored = sorted(t.ignored)
	return snap, nil
}

// unchanged is the snapshot of a work tree that holds base's files and
// no other (but those withheld): what git's diff would render, with
// nothing for git to do.
func unchanged(o DiffOptions, files []*wfile, withheld []Withheld, ignored []string) (*Snapshot, error) {
	if o.Check != nil {
		if err := o.Check(nil, withheld, sizeOf(files)); err != nil {
			return nil, err
		}
	}
	snap := &Snapshot{Withheld: withheld, Ignored: sorted(ignored)}
	if o.Patch == nil {
		snap.Diff = []byte{}
	}
	return snap, nil
}

// readWorkTree reads the whole work tree at root but its own .git and the
// top-level paths in exclude, leaving out what the ignore rules do.
func (d *diffRun) readWorkTree(root int, bt *baseTree, exclude []string) (*treeReader, error) {
	t := &treeReader{root: root, base: bt, ignore: d.ignore, ownGit: true, exclude: exclude, keptLinks: map[string]bool{}}
	if err := t.walkAll(); err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	t.sortFiles()
	bt.mark(t.files)
	if err := t.dropIgnored(); err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	return t, nil
}

// staged is what a diff gives the scratch index, and what git's answer
// is checked against.
type staged struct {
	info     bytes.Buffer    // index entries, "MODE OID\tPATH" NUL each
	adds     []byte          // info's entries of files alone, without its removals (stageWorkTree)
	gone     []string        // base's paths the work tree no longer has, sorted (stageWorkTree)
	withheld []Withheld      // files that differ and that no diff holds
	present  map[string]bool // paths the index holds a file of the work tree at
	fresh    []string        // those of them base does not have
}

// add stages a file of the work tree.
func (s *staged) add(f *wfile, inBase bool) {
	indexLine(&s.info, f.mode, f.oid, f.path)
	s.present[f.path] = true
	if !inBase {
		s.fresh = append(s.fresh, f.path)
	}
}

// stageWorkTree is what DiffWorkTree gives base's index: the changes
// of the whole tree, removals first (a file that becomes a directory is
// never both at once).
func (d *diffRun) stageWorkTree(t *treeReader, bt *baseTree) *staged {
	s := &staged{present: map[string]bool{}}
	var adds bytes.Buffer
	matched := 0 // paths of files base has: when they and the submodules kept are all of base, nothing is gone
	for i, f := range t.files {
		b, inBase := bt.at(f)
		if inBase && (i == 0 || t.files[i-1].path != f.path) { // sorted: a path listed twice counts once
			matched++
		}
		if inBase && b.mode == f.mode && b.oid == f.oid {
			continue
		}
		if f.why != "" {
			s.withheld = append(s.withheld, withheldOf(f, b, inBase))
			continue
		}
		indexLine(&adds, f.mode, f.oid, f.path)
		s.present[f.path] = true
		if !inBase {
			s.fresh = append(s.fresh, f.path)
		}
	}
	var gone []string
	if matched+len(t.keptLinks) < len(bt.entries) {
		seen := make(map[string]bool, len(t.files))
		for _, f := range t.files {
			seen[f.path] = true
		}
		for p := range bt.entries {
			if !seen[p] && !t.keptLinks[p] && !t.excluded(p) {
				gone = append(gone, p)
			}
		}
	}
	sort.Strings(gone)
	for _, p := range gone {
		indexLine(&s.info, "0", strings.Repeat("0", len(d.format.new().Sum(nil))*2), p)
	}
	s.info.Write(adds.Bytes())
	s.adds, s.gone = adds.Bytes(), gone
	return s
}

func withheldOf(f *wfile, b baseEntry, inBase bool) Withheld {
	w := Withheld{Path: f.path, NewMode: f.mode, NewBlob: f.oid, Why: f.why}
	if inBase {
		w.OldMode, w.OldBlob = b.mode, b.oid
	}
	return w
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}

// patch is where the unified diff goes: o.Patch, or a buffer whose bytes
// become Snapshot.Diff.
func (o DiffOptions) patch() (io.Writer, *bytes.Buffer) {
	if o.Patch != nil {
		return o.Patch, &bytes.Buffer{}
	}
	b := &bytes.Buffer{}
	return b, b
}

// them, leaving out positioned at the patch.
func readRaw(out *bufio.Reader) ([]byte, error) {
	var raw []byte
	for {
		b, err := out.Peek(1)
		if err == io.EOF {
			return raw, nil
		}
		if err != nil {
			return nil, err
		}
		if b[0] != ':' {
			if b[0] == 0 {
				out.ReadByte()
			}
			return raw, nil
		}
		for n := 0; n < 2; n++ { // the header, then the path
			rec, err := out.ReadBytes(0)
			if err != nil {
				return nil, fmt.Errorf("a truncated raw record: %w", err)
			}
			raw = append(raw, rec...)
		}
	}
}
