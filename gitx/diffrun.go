package gitx

// A diff's scratch repository: a bare repository of paddock's own that
// borrows the project's objects, with a private index, where the work
// tree's changes are staged for git to render.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

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
	project string   // the project's git directory, whose objects it borrows
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
	d := &diffRun{g: g, ctx: ctx, tmp: tmp, format: formatOf(base), objects: filepath.Join(tmp, "objects"), project: gitDir}
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

// parseTree reads `git ls-tree -r -z` output. Its paths and ids are
// slices of one string: a listing of 12,000 entries parses in a fraction
// of the time one allocation per field takes.
func parseTree(out []byte) map[string]baseEntry {
	entries := make(map[string]baseEntry, bytes.Count(out, []byte{0}))
	for rest := string(out); rest != ""; {
		rec := rest
		if i := strings.IndexByte(rest, 0); i >= 0 {
			rec, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		// "MODE TYPE OID\tPATH"
		meta, p, ok := strings.Cut(rec, "\t")
		mode, meta, ok1 := strings.Cut(meta, " ")
		_, oid, ok2 := strings.Cut(meta, " ")
		if ok && ok1 && ok2 && mode != "" && oid != "" && !strings.Contains(oid, " ") {
			entries[p] = baseEntry{mode: mode, oid: oid}
		}
	}
	return entries
}

// baseTree lists all of base's entries: from this process's memo, where
// the listing of a full commit id of a repository is kept parsed (a
// commit never changes, and no replace object applies: see env); from
// cache, where a listing is kept per base; or from git.
func (d *diffRun) baseTree(base, cache string) (*baseTree, error) {
	if !isHex(base) || len(base) != 2*d.format.new().Size() {
		entries, err := d.lsTree(base, nil)
		if err != nil {
			return nil, err
		}
		return newBaseTree(entries), nil
	}
	key := d.format.name + "\x00" + d.project + "\x00" + base
	if bt, ok := treeMemo.get(key, fileStat{}); ok {
		return bt, nil
	}
	out, err := d.listing(base, cache)
	if err != nil {
		return nil, err
	}
	bt := newBaseTree(parseTree(out))
	treeMemo.put(key, fileStat{}, len(bt.entries), bt)
	return bt, nil
}

// listing is `git ls-tree -r -z` of base: kept in cache, if there is
// one, with its SHA-256 after it. The kept files are never synced, and a
// listing a crash left short must not be taken for base's whole: the
// index of a diff is made of it (writeIndex), and git would show what it
// lacks deleted.
func (d *diffRun) listing(base, cache string) ([]byte, error) {
	kept := filepath.Join(cache, "base-"+base+".tree")
	if cache != "" {
		if b, err := os.ReadFile(kept); err == nil && len(b) >= sha256.Size {
			out, sum := b[:len(b)-sha256.Size], sha256.Sum256(b[:len(b)-sha256.Size])
			if bytes.Equal(sum[:], b[len(out):]) {
				return out, nil
			}
		}
	}
	out, err := d.git(nil, "ls-tree", "-r", "-z", "--full-tree", base)
	if err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	if cache != "" {
		sum := sha256.Sum256(out)
		keep(kept, append(slices.Clip(out), sum[:]...))
	}
	return out, nil
}

// baseIndex makes the scratch index base's: a copy of the one kept per
// base in cache, or git's read-tree (then kept).
func (d *diffRun) baseIndex(base, cache string) error {
	return d.baseIndexAt(d.indexFile(), base, cache)
}

// baseIndexAt is baseIndex of the index file index.
func (d *diffRun) baseIndexAt(index, base, cache string) error {
	if !isHex(base) {
		cache = ""
	}
	kept := filepath.Join(cache, "base-"+base+".index")
	if cache != "" {
		if b, err := os.ReadFile(kept); err == nil && d.wholeIndex(b) && os.WriteFile(index, b, 0o600) == nil {
			return nil
		}
	}
	if _, err := d.g.runInput(d.ctx, d.at, d.extraFor(index), nil, "read-tree", base); err != nil {
		return fmt.Errorf("gitx: diff: %w", err)
	}
	if cache != "" {
		if b, err := os.ReadFile(index); err == nil {
			keep(kept, b)
		}
	}
	return nil
}

// wholeIndex reports whether b is an index as git wrote it, its checksum
// whole: a kept index is never synced, git does not check the checksum of
// an index it reads, and one a crash left short would fail every diff
// that copies it (or, read, stand for a base it lacks files of).
func (d *diffRun) wholeIndex(b []byte) bool {
	h := d.format.new()
	n := len(b) - h.Size()
	if n < 12 || string(b[:4]) != "DIRC" {
		return false
	}
	h.Write(b[:n])
	return bytes.Equal(h.Sum(nil), b[n:])
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

// testHookBeforeHash, set by a test, is called with each file's path
// between the walk that saw it and its hashing.
var testHookBeforeHash func(path string)

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
	defer h.dirs.Close()
	for _, f := range files {
		b, inBase := base.at(f)
		if cache.lookup(f) && (f.why != "" || (inBase && b.oid == f.oid) || store.has(f.oid)) {
			continue // as hashed before, and stored if it is to be
		}
		want := func(oid string) bool { return f.why == "" && !(inBase && b.oid == oid) }
		cache.dirty()
		if testHookBeforeHash != nil {
			testHookBeforeHash(f.path)
		}
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

// index makes the scratch index, empty before, of entries ("MODE
// OID\tPATH", MODE 0 removes the path): written by paddock (writeIndex),
// or by git where git must judge them.
func (d *diffRun) index(info []byte) error {
	if len(info) == 0 {
		return nil
	}
	if ok, err := writeIndex(d.indexFile(), d.format, nil, info); ok || err != nil {
		return err
	}
	return d.updateIndex(d.indexFile(), info)
}

// stageIndex makes index base's whole index (full: base's whole tree)
// with info's entries: written by paddock (writeIndex), or, where git
// must judge them, a copy of base's index as git makes it (baseOf) given
// them by git.
func (d *diffRun) stageIndex(index string, full *baseTree, info []byte, baseOf func() ([]byte, error)) error {
	if ok, err := writeIndex(index, d.format, full, info); ok || err != nil {
		return err
	}
	b, err := baseOf()
	if err != nil {
		return err
	}
	if err := os.WriteFile(index, b, 0o600); err != nil {
		return fmt.Errorf("gitx: diff: %w", err)
	}
	return d.updateIndex(index, info)
}

// updateIndex gives the index file index info's entries, by git.
func (d *diffRun) updateIndex(index string, info []byte) error {
	if len(info) == 0 {
		return nil
	}
	if _, err := d.g.runInput(d.ctx, d.at, d.extraFor(index), info, "update-index", "-z", "--index-info"); err != nil {
		return fmt.Errorf("gitx: diff: %w", err)
	}
	return nil
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
