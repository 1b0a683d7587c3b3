package gitx

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
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
	// Cache, if not empty, is a private directory (paddock's, never the
	// work tree's) where what is made of the work tree is kept between
	// calls (see DiffWorkTree and DiffPaths).
	Cache string
	// IncludeIgnored: files the ignore rules leave out are part of the diff.
	IncludeIgnored bool
	// Check, if not nil, sees the raw entries and the withheld files
	// before the patch is written, and may refuse (a change set over its
	// limits is never rendered).
	Check func(raw []byte, withheld []Withheld) error
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
}

// inMemoryScratch is the most content a diff's scratch directory keeps on a tmpfs.
const inMemoryScratch = 64 << 20

// scratchAttributes is the scratch repository's info/attributes, which
// takes precedence over every .gitattributes: no attribute of a work tree
// (or of base) changes what a blob holds or how a diff shows it. The
// scratch repository is bare as well, so git reads no .gitattributes of a
// work tree at all; this holds where a git reads them from elsewhere.
const scratchAttributes = "* !diff !merge !text !eol !crlf !filter !ident !working-tree-encoding !encoding !whitespace !export-subst !export-ignore !delta\n"

// diffRun is one diff in progress: its scratch repository and directory.
type diffRun struct {
	g       *Git
	ctx     context.Context
	tmp     string
	at      where    // the scratch repository
	extra   []string // its index and objects
	objects string   // where blobs made of the work tree go
	format  objectFormat
	ignore  *ignorer
}

// newDiff makes the scratch repository of a diff against base of the
// project whose git directory is gitDir: bare, with a config paddock
// writes (so no filter, textconv or diff driver a project defines is
// known to it), the attributes above, the project's info/exclude, and
// the project's objects borrowed.
func (g *Git) newDiff(ctx context.Context, gitDir, base string, content int64, o DiffOptions) (*diffRun, error) {
	tmp, objects, err := scratch(gitDir, content)
	if err != nil {
		return nil, err
	}
	d := &diffRun{g: g, ctx: ctx, tmp: tmp, format: formatOf(base), objects: filepath.Join(tmp, "objects")}
	if o.Cache != "" {
		d.objects = filepath.Join(o.Cache, "objects")
	}
	repo := filepath.Join(tmp, "repo")
	config := "[core]\n\tbare = true\n"
	if d.format.name == formatSHA256.name {
		config += "\trepositoryformatversion = 1\n[extensions]\n\tobjectFormat = sha256\n"
	}
	config += "[core]\n\tcompression = " + compressionOf(ctx, g, gitDir) + "\n"
	exclude, _ := os.ReadFile(filepath.Join(gitDir, "info", "exclude"))
	err = errors.Join(
		os.MkdirAll(filepath.Join(d.objects, "pack"), 0o700),
		os.MkdirAll(filepath.Join(repo, "objects"), 0o700),
		os.MkdirAll(filepath.Join(repo, "refs"), 0o700),
		os.MkdirAll(filepath.Join(repo, "info"), 0o700),
		os.WriteFile(filepath.Join(repo, "HEAD"), []byte("ref: refs/heads/paddock-scratch\n"), 0o600),
		os.WriteFile(filepath.Join(repo, "config"), []byte(config), 0o600),
		os.WriteFile(filepath.Join(repo, "info", "attributes"), []byte(scratchAttributes), 0o600),
		os.WriteFile(filepath.Join(repo, "info", "exclude"), exclude, 0o600),
	)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	d.at = gitDirAt(repo)
	d.extra = []string{
		"GIT_INDEX_FILE=" + filepath.Join(tmp, "index"),
		"GIT_OBJECT_DIRECTORY=" + d.objects,
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + objects,
		"GIT_LITERAL_PATHSPECS=1",
	}
	if !o.IncludeIgnored {
		if d.ignore, err = newIgnorer(ctx, g, repo, filepath.Join(tmp, "ignore")); err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("gitx: diff: %w", err)
		}
	}
	return d, nil
}

// compressionOf is how a diff deflates a binary patch: as the project
// deflates its objects (core.compression, a number and nothing else), or
// fast.
func compressionOf(ctx context.Context, g *Git, gitDir string) string {
	v := g.fileConfig(ctx, filepath.Join(gitDir, "config"), "core.compression")
	if n, err := strconv.Atoi(v); err == nil && n >= -1 && n <= 9 {
		return v
	}
	return "1"
}

func (d *diffRun) close() {
	d.ignore.close()
	os.RemoveAll(d.tmp)
}

func (d *diffRun) git(stdin []byte, args ...string) ([]byte, error) {
	return d.g.runInput(d.ctx, d.at, d.extra, stdin, args...)
}

// lsTree lists base's entries (under paths, if any).
func (d *diffRun) lsTree(base string, paths []string) (map[string]baseEntry, error) {
	args := []string{"ls-tree", "-r", "-z", "--full-tree", base}
	if len(paths) > 0 {
		args = append(append(args, "--"), paths...)
	}
	out, err := d.git(nil, args...)
	if err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	return parseTree(out), nil
}

// parseTree reads `git ls-tree -r -z` output.
func parseTree(out []byte) map[string]baseEntry {
	entries := map[string]baseEntry{}
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if ok && len(f) == 3 {
			entries[p] = baseEntry{mode: f[0], oid: f[2]}
		}
	}
	return entries
}

// baseTree lists all of base's entries: from cache, where a listing is
// kept per base (a base never changes), or from git.
func (d *diffRun) baseTree(base, cache string) (map[string]baseEntry, error) {
	if cache == "" || !isHex(base) {
		return d.lsTree(base, nil)
	}
	kept := filepath.Join(cache, "base-"+base+".tree")
	out, err := os.ReadFile(kept)
	if err != nil {
		if out, err = d.git(nil, "ls-tree", "-r", "-z", "--full-tree", base); err != nil {
			return nil, fmt.Errorf("gitx: diff: %w", err)
		}
		keep(kept, out)
	}
	return parseTree(out), nil
}

// baseIndex makes the scratch index base's: a copy of the one kept per
// base in cache, or git's read-tree (then kept).
func (d *diffRun) baseIndex(base, cache string) error {
	index := filepath.Join(d.tmp, "index")
	if !isHex(base) {
		cache = ""
	}
	kept := filepath.Join(cache, "base-"+base+".index")
	if cache != "" {
		if b, err := os.ReadFile(kept); err == nil && os.WriteFile(index, b, 0o600) == nil {
			return nil
		}
	}
	if _, err := d.git(nil, "read-tree", base); err != nil {
		return fmt.Errorf("gitx: diff: %w", err)
	}
	if cache != "" {
		if b, err := os.ReadFile(index); err == nil {
			keep(kept, b)
		}
	}
	return nil
}

// isHex reports whether s is an object id (a name a cache file can take).
func isHex(s string) bool {
	return len(s) >= 40 && strings.Trim(s, "0123456789abcdef") == ""
}

// keep writes b to file whole or not at all; a cache lost costs only time.
func keep(file string, b []byte) {
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".tmp-")
	if err != nil {
		return
	}
	_, err = tmp.Write(b)
	if errors.Join(err, tmp.Close()) != nil || os.Rename(tmp.Name(), file) != nil {
		os.Remove(tmp.Name())
	}
}

// hashAll sets every file's blob id, from cache where its stat data says
// it is unchanged, and stores the objects of files that are not withheld
// and that base does not have.
func (d *diffRun) hashAll(root int, files []*wfile, base *baseTree, cache *statCache) error {
	store, err := openPackStore(d.objects, d.format)
	if err != nil {
		return fmt.Errorf("gitx: diff: %w", err)
	}
	defer store.abort()
	h := &hasher{root: root, format: d.format, store: store}
	for _, f := range files {
		b, inBase := base.entries[f.path]
		want := func(oid string) bool { return f.why == "" && !(inBase && b.oid == oid) }
		if cache.lookup(f) && (!want(f.oid) || store.has(f.oid)) {
			continue
		}
		cache.dirty()
		if err := h.hash(f, want, f.why == "" && !inBase); err != nil {
			if gone(err) {
				err = fmt.Errorf("%s: %w", f.path, errChanged)
			}
			if ce := changedError(err); ce != nil {
				return ce
			}
			return fmt.Errorf("gitx: diff: %s: %w", f.path, err)
		}
	}
	if err := store.finish(); err != nil {
		return fmt.Errorf("gitx: diff: %w", err)
	}
	return nil
}

// index adds entries ("MODE OID\tPATH", MODE 0 removes the path) to the
// scratch index.
func (d *diffRun) index(info []byte) error {
	if len(info) == 0 {
		return nil
	}
	if _, err := d.git(info, "update-index", "-z", "--index-info"); err != nil {
		return fmt.Errorf("gitx: diff: %w", err)
	}
	return nil
}

// render writes the scratch index's diff against base (under spec): the
// entries and the patch in one git process. The entries are read first
// and checked; the patch after them streams to the caller.
func (d *diffRun) render(base string, spec []string, o DiffOptions, withheld []Withheld, verify func(raw []byte) error) (*Snapshot, error) {
	snap := &Snapshot{Withheld: withheld}
	patch, buf := o.patch()
	args := append([]string{"diff", "--cached", "-z", "--raw", "--patch", "--binary", "--no-renames", "--full-index", "--no-abbrev",
		"--no-color", "--no-ext-diff", "--no-textconv", base}, spec...)
	err := d.g.stream(d.ctx, d.at, d.extra, args, func(out *bufio.Reader) error {
		var err error
		if snap.Raw, err = readRaw(out); err != nil {
			return err
		}
		if err := verify(snap.Raw); err != nil {
			return err
		}
		if o.Check != nil {
			if err := o.Check(snap.Raw, withheld); err != nil {
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
	entries, err := d.baseTree(base, o.Cache)
	if err != nil {
		return nil, err
	}
	bt := newBaseTree(entries)
	root, err := openTree(workTree)
	if err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	defer unix.Close(root)
	t := &treeReader{root: root, base: bt, ignore: d.ignore, ownGit: true, exclude: o.Exclude, keptLinks: map[string]bool{}}
	since := time.Now()
	if err := t.walk(""); err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	t.sortFiles()
	if err := t.dropIgnored(); err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	if err := d.hashAll(root, t.files, bt, cache); err != nil {
		return nil, err
	}
	cache.save(t.files, since)

	// base's index, and the changes on it: removals first (a file that
	// becomes a directory is never both at once).
	var adds, removals bytes.Buffer
	var withheld []Withheld
	present, seen := map[string]bool{}, map[string]bool{}
	var fresh []string
	for _, f := range t.files {
		seen[f.path] = true
		b, inBase := bt.entries[f.path]
		if inBase && b.mode == f.mode && b.oid == f.oid {
			continue
		}
		if f.why != "" {
			withheld = append(withheld, withheldOf(f, b, inBase))
			continue
		}
		indexLine(&adds, f.mode, f.oid, f.path)
		present[f.path] = true
		if !inBase {
			fresh = append(fresh, f.path)
		}
	}
	var removed []string
	for p := range bt.entries {
		if !seen[p] && !t.keptLinks[p] && !t.excluded(p) {
			removed = append(removed, p)
		}
	}
	sort.Strings(removed)
	for _, p := range removed {
		indexLine(&removals, "0", strings.Repeat("0", len(d.format.new().Sum(nil))*2), p)
	}
	if err := d.baseIndex(base, o.Cache); err != nil {
		return nil, err
	}
	if err := d.index(append(removals.Bytes(), adds.Bytes()...)); err != nil {
		return nil, err
	}
	want := len(present) + len(removed)
	snap, err := d.render(base, nil, o, withheld, func(raw []byte) error {
		if n := bytes.Count(raw, []byte{0}) / 2; n != want {
			return fmt.Errorf("gitx: diff: git reports %d entries, the index was given %d", n, want)
		}
		return verifyRaw(raw, present, fresh)
	})
	if err != nil {
		return nil, err
	}
	snap.Ignored = sorted(t.ignored)
	return snap, nil
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

// scratch makes a private directory for a diff's index and objects (and
// content bytes of files), and returns it with the absolute path of the
// repository's object store, which the diff borrows from.
func scratch(gitDir string, content int64) (tmp, objects string, err error) {
	objects, err = filepath.Abs(filepath.Join(gitDir, "objects"))
	if err != nil {
		return "", "", err
	}
	// In memory where the machine has a tmpfs for it and the content is
	// small: a diff's scratch files (an index, the shadow tree of an
	// overlay's changes) are written and read once; on a disk, making a
	// thousand small files costs more than the diff. Large content goes to
	// disk: a tmpfs is memory.
	err = errors.ErrUnsupported
	var st syscall.Statfs_t
	if content <= inMemoryScratch && syscall.Statfs("/dev/shm", &st) == nil && int64(st.Bavail)*int64(st.Bsize) >= 1<<30 {
		tmp, err = os.MkdirTemp("/dev/shm", "paddock-diff-")
	}
	if err != nil { // no tmpfs, or one too small for the change set's limits
		tmp, err = os.MkdirTemp("", "paddock-diff-")
	}
	if err != nil {
		return "", "", fmt.Errorf("gitx: diff: %w", err)
	}
	return tmp, objects, nil
}

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
	// Which of those paths base has: from its checkout where that can
	// tell (ids unknown, and no submodule), else from git.
	var bt *baseTree
	inBase, known := baseHas(o.BaseFiles, paths)
	if known {
		entries := map[string]baseEntry{}
		for p := range inBase {
			entries[p] = baseEntry{mode: "100644"}
		}
		bt = newBaseTree(entries)
	} else {
		entries, err := d.lsTree(base, spec)
		if err != nil {
			return nil, err
		}
		bt = newBaseTree(entries)
	}
	root, err := openTree(workTree)
	if err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	defer unix.Close(root)
	t := &treeReader{root: root, base: bt, ignore: d.ignore, keptLinks: map[string]bool{}}
	for _, p := range spec {
		if err := t.walk(p); err != nil {
			return nil, fmt.Errorf("gitx: diff: %w", err)
		}
	}
	t.sortFiles()
	t.files = uniqueFiles(t.files)
	if err := t.dropIgnored(); err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	// A withheld file base has stays in the index as base has it, which
	// needs its id.
	for _, f := range t.files {
		if _, ok := bt.entries[f.path]; ok && known && f.why != "" {
			entries, err := d.lsTree(base, spec)
			if err != nil {
				return nil, err
			}
			bt, known = newBaseTree(entries), false
			break
		}
	}
	if err := d.hashAll(root, t.files, bt, nil); err != nil {
		return nil, err
	}
	// The index holds every file now under those paths (an unchanged one
	// to the same blob), base's submodules there as they are, and what is
	// withheld as base has it: the diff, limited to those paths, shows
	// what changed.
	var info bytes.Buffer
	var withheld []Withheld
	present := map[string]bool{}
	var fresh []string
	for _, f := range t.files {
		b, isBase := bt.entries[f.path]
		if f.why == "" {
			indexLine(&info, f.mode, f.oid, f.path)
			present[f.path] = true
			if !isBase {
				fresh = append(fresh, f.path)
			}
			continue
		}
		if isBase {
			indexLine(&info, b.mode, b.oid, f.path)
			if b.mode == f.mode && b.oid == f.oid {
				continue
			}
		}
		withheld = append(withheld, withheldOf(f, b, isBase))
	}
	for p, b := range bt.entries {
		if b.mode == "160000" {
			indexLine(&info, b.mode, b.oid, p)
		}
	}
	if err := d.index(info.Bytes()); err != nil {
		return nil, err
	}
	snap, err := d.render(base, append([]string{"--"}, spec...), o, withheld, func(raw []byte) error {
		return verifyRaw(raw, present, fresh)
	})
	if err != nil {
		return nil, err
	}
	snap.Ignored = sorted(t.ignored)
	return snap, nil
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
