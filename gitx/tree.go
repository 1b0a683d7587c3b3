package gitx

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/internal/fsat"
	"golang.org/x/sys/unix"
)

// A work tree as paddock reads it for a diff. git never reads a workspace:
// what a workspace holds (a .git file naming another repository, a FIFO
// where git expects HEAD, a repository's config) is read here, by rules
// paddock states, and git gets blob ids.

// Reasons a file of a work tree is withheld: reported, never applied.
const (
	whyDotGit     = "a .git entry (git's own files; a gitdir: file points git elsewhere): never applied"
	whyEmbedded   = "inside an embedded git repository (%s): never applied"
	whyGitmodules = "a symbolic link named .gitmodules (git refuses it): never applied"
)

// wfile is one file (a regular file or a symbolic link) of a work tree.
type wfile struct {
	path string // slash-separated, relative to the work tree
	mode string // 100644, 100755 or 120000
	oid  string // its blob id, once hashed
	st   fileStat
	why  string // not empty: withheld, and why

	// What base holds at path, where a base tree marked it (mark).
	markedBy *baseTree
	inBase   bool
	base     baseEntry
}

// fileStat is what tells that a file is unchanged since it was hashed
// (the stat cache): a file's owner can set its mtime back, not its ctime.
type fileStat struct {
	Ino, Size, Mtime, Ctime int64
	Mode                    uint32
}

func statOf(st *unix.Stat_t) fileStat {
	return fileStat{Ino: int64(st.Ino), Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Mode: uint32(st.Mode)}
}

// baseTree is what base holds under the paths a diff compares.
type baseTree struct {
	entries map[string]baseEntry
	dirs    map[string]bool // every directory that holds an entry

	orderOnce    sync.Once
	order        []string    // entries' paths, sorted (sorted)
	orderEntries []baseEntry // their entries, in that order
	encodeOnce   sync.Once
	enc          *encodedBase // entries as an index holds them (encoded)
}

type baseEntry struct {
	mode, oid string // oid is empty when only the file's existence is known
}

func newBaseTree(entries map[string]baseEntry) *baseTree {
	b := &baseTree{entries: entries, dirs: map[string]bool{}}
	for p := range entries {
		for d := path.Dir(p); d != "." && !b.dirs[d]; d = path.Dir(d) {
			b.dirs[d] = true
		}
	}
	return b
}

func (b *baseTree) isLink(p string) bool { return b.entries[p].mode == "160000" }

// sorted is base's paths in git's index order, made once per base tree
// (a base tree of a commit is kept: treeMemo).
func (b *baseTree) sorted() []string {
	b.orderOnce.Do(func() {
		b.order = make([]string, 0, len(b.entries))
		for p := range b.entries {
			b.order = append(b.order, p)
		}
		sort.Strings(b.order)
		b.orderEntries = make([]baseEntry, len(b.order))
		for i, p := range b.order {
			b.orderEntries[i] = b.entries[p]
		}
	})
	return b.order
}

// mark notes in each of files (sorted by path) what b holds at its path,
// found by going through both in order: a diff's passes over a whole
// tree's files (the ignore rules, the hashes, the staging) then look
// each up once, not each in a map of 12,000 paths (about 1.5 ms a pass).
func (b *baseTree) mark(files []*wfile) {
	order := b.sorted()
	j := 0
	for _, f := range files {
		for j < len(order) && order[j] < f.path {
			j++
		}
		f.markedBy, f.inBase = b, j < len(order) && order[j] == f.path
		if f.inBase {
			f.base = b.orderEntries[j]
		}
	}
}

// at is what b holds at f's path.
func (b *baseTree) at(f *wfile) (baseEntry, bool) {
	if f.markedBy == b {
		return f.base, f.inBase
	}
	e, ok := b.entries[f.path]
	return e, ok
}

// treeReader lists a work tree's files. It opens every directory and file
// relative to its parent, never following a symbolic link, and opens a
// file only after fstat says it is a regular one (O_NONBLOCK, so that a
// FIFO swapped in meanwhile cannot block it).
type treeReader struct {
	root    int // the work tree
	base    *baseTree
	ignore  *ignorer // nil: every file counts, ignored or not
	ownGit  bool     // a top-level ".git" is the work tree's own repository
	exclude []string // top-level paths left out

	files     []*wfile
	ignored   []string
	keptLinks map[string]bool // base's submodules the work tree still has a directory for
	gitDirs   map[string]bool // directories seen, and whether they look like a repository
	dirs      fsat.Stack      // the directories walk opened last
	pool      *walkPool       // not nil: directories may be read on goroutines of their own
	// holds, if not nil, gives the names a directory can hold at most
	// (DiffOptions.Holds); assumed are the directories on a path's way it
	// was taken at its word for, not listed (nor seen in gitDirs).
	holds   func(dir string) ([]string, bool)
	assumed map[string]bool
}

// gone reports an error that means the entry went away, or is not what
// the walk took it for: a tree being changed while it is read.
func gone(err error) bool { return fsat.NotThere(err) }

// names lists the directory dirfd, sorted.
func names(dirfd int) ([]string, error) {
	ns, err := fsat.Names(dirfd)
	sort.Strings(ns)
	return ns, err
}

// looksLikeGitDir reports whether a directory holding these names is one
// git would take for a repository, or one a single more file would make
// one: HEAD beside objects, refs, commondir or config (folded, as a
// case-insensitive file system would match them).
func looksLikeGitDir(ns []string) bool {
	var head, other bool
	for _, n := range ns {
		switch confine.Fold(n) {
		case "head":
			head = true
		case "objects", "refs", "commondir", "config":
			other = true
		}
	}
	return head && other
}

// walk reads the work tree under start ("" for all of it): start's
// ancestors are checked as its directories would be by a whole walk.
func (t *treeReader) walk(start string) error {
	if start == "" {
		return t.walkDir(t.root, "", "")
	}
	why := ""
	parts := strings.Split(start, "/")
	rel := ""
	for i, name := range parts {
		// The stack keeps the directories of the path before: paths in
		// order open each directory once.
		parent, err := t.dirs.Open(t.root, rel)
		if gone(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := t.enterDir(parent, rel, &why, true); err != nil {
			return err
		}
		child := path.Join(rel, name)
		if isDotGitName(name) && why == "" && !(t.ownGit && child == ".git") {
			why = whyDotGit
		}
		if i == len(parts)-1 {
			return t.visit(parent, child, name, why)
		}
		if why == "" && t.base.isLink(child) {
			return nil // inside a submodule: git keeps it as it is
		}
		rel = child
	}
	return nil
}

// enterDir is what is learnt from a directory before anything below it is
// read: whether it is an embedded repository (why is set then), and its
// ignore rules. It returns the directory's names, sorted, when it had to
// list them (the first time it sees the directory).
//
// onPath: the directory is only on the way to a path of the diff's
// (walk), whose own names were read with what Holds says of the
// directory, so Holds may stand for its listing. A directory walked whole
// (walkDir) is decided by its own listing, the names it then visits,
// even where Holds stood for one before: what Holds says was read
// earlier, and a command may have added names since.
func (t *treeReader) enterDir(dirfd int, rel string, why *string, onPath bool) ([]string, error) {
	if t.gitDirs == nil {
		t.gitDirs = map[string]bool{}
	}
	looks, seen := t.gitDirs[rel]
	if !seen && onPath && (t.assumed[rel] || t.innocent(rel)) {
		if t.assumed == nil {
			t.assumed = map[string]bool{}
		}
		t.assumed[rel] = true // and not seen: a whole walk lists it
		return nil, nil
	}
	var ns []string
	if !seen {
		var err error
		if ns, err = names(dirfd); err != nil {
			return nil, err
		}
		looks = rel != "" && looksLikeGitDir(ns)
		t.gitDirs[rel] = looks
	}
	switch {
	case *why != "":
	case looks:
		*why = fmt.Sprintf(whyEmbedded, rel)
	case t.ignore != nil && !seen && slices.Contains(ns, ".gitignore"):
		return ns, t.ignore.keepRules(dirfd, rel)
	}
	return ns, nil
}

// innocent reports whether directory rel, by the names it can hold at
// most (holds), can neither look like a repository nor hold a .gitignore
// whose rules count: then enterDir need not list it to find out.
func (t *treeReader) innocent(rel string) bool {
	if t.holds == nil {
		return false
	}
	ns, known := t.holds(rel)
	return known && (rel == "" || !looksLikeGitDir(ns)) && (t.ignore == nil || !slices.Contains(ns, ".gitignore"))
}

// walkDir reads the directory dirfd (at rel) and everything below it.
func (t *treeReader) walkDir(dirfd int, rel, why string) error {
	ns, err := t.enterDir(dirfd, rel, &why, false)
	if err != nil {
		return err
	}
	if ns == nil {
		if ns, err = names(dirfd); err != nil {
			return err
		}
	}
	for _, name := range ns {
		child := name // a directory's names are names, never . or ..
		if rel != "" {
			child = rel + "/" + name
		}
		if t.excluded(child) || (t.ownGit && child == ".git") {
			continue
		}
		cwhy := why
		if cwhy == "" && isDotGitName(name) {
			cwhy = whyDotGit
		}
		if err := t.visit(dirfd, child, name, cwhy); err != nil {
			return err
		}
	}
	return nil
}

// visit reads the entry name of the directory dirfd, child (its path).
func (t *treeReader) visit(dirfd int, child, name, why string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if gone(err) {
			return nil
		}
		return err
	}
	var mode string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if why == "" && t.base.isLink(child) {
			t.keptLinks[child] = true
			return nil // a submodule's directory: git keeps the link as it is
		}
		if why == "" && t.ignore != nil && !t.base.dirs[child] {
			ignored, err := t.ignore.dir(child)
			if err != nil {
				return err
			}
			if ignored {
				t.ignored = append(t.ignored, child+"/")
				return nil
			}
		}
		fd, err := fsat.OpenAt(dirfd, name, true)
		if gone(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if t.pool.spawn(t, fd, child, why) {
			return nil
		}
		defer unix.Close(fd)
		return t.walkDir(fd, child, why)
	case unix.S_IFREG:
		mode = "100644"
		if st.Mode&0o100 != 0 { // git keeps the owner's execute bit only
			mode = "100755"
		}
	case unix.S_IFLNK:
		mode = "120000"
		if why == "" && isGitmodulesName(name) {
			why = whyGitmodules
		}
	default:
		return nil // not content git keeps: a FIFO, a socket, a device
	}
	t.files = append(t.files, &wfile{path: child, mode: mode, st: statOf(&st), why: why})
	return nil
}

func (t *treeReader) excluded(p string) bool {
	for _, x := range t.exclude {
		if p == x || strings.HasPrefix(p, x+"/") {
			return true
		}
	}
	return false
}

// sortFiles puts the files in byte order of their paths, git's index
// order, which a walk directory by directory does not give ("a.txt"
// sorts before "a/b").
func (t *treeReader) sortFiles() {
	slices.SortFunc(t.files, func(a, b *wfile) int { return strings.Compare(a.path, b.path) })
}

// dropIgnored asks the ignore rules about the new files found (those base
// does not track, and that are not withheld), and leaves out the ignored.
func (t *treeReader) dropIgnored() error {
	if t.ignore == nil {
		return nil
	}
	var fresh []string
	for _, f := range t.files {
		if f.why == "" {
			if _, tracked := t.base.at(f); !tracked {
				fresh = append(fresh, f.path)
			}
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	ignored, err := t.ignore.files(fresh)
	if err != nil {
		return err
	}
	kept := t.files[:0]
	for _, f := range t.files {
		if ignored[f.path] {
			t.ignored = append(t.ignored, f.path)
		} else {
			kept = append(kept, f)
		}
	}
	t.files = kept
	return nil
}

// isDotGitName reports whether some file system could take name for
// ".git" (confine's rule, the one the file tools keep agents out by).
func isDotGitName(name string) bool { return confine.IsDotGit(name) }

// isGitmodulesName reports whether git would take name for ".gitmodules",
// which it refuses as a symbolic link (and then leaves out of an index).
func isGitmodulesName(name string) bool {
	f := confine.Fold(name)
	return f == ".gitmodules" || strings.HasPrefix(f, "gitmod~") || strings.HasPrefix(f, "gi7eba~")
}

// walkPool reads the directories of one walk on the goroutines of a
// fsat.Spread. Each goroutine has a treeReader of its own, whose findings
// the walk gathers at the end.
type walkPool struct {
	spread  *fsat.Spread
	mu      sync.Mutex
	readers []*treeReader
}

// spawn reads the directory fd (at rel) on a goroutine of its own, if one
// is free, and then closes fd; it reports whether it did.
func (p *walkPool) spawn(t *treeReader, fd int, rel, why string) bool {
	if p == nil {
		return false
	}
	sub := &treeReader{root: t.root, base: t.base, ignore: t.ignore, ownGit: t.ownGit, exclude: t.exclude, keptLinks: map[string]bool{}, pool: p}
	if !p.spread.TryGo(func() error { defer unix.Close(fd); return sub.walkDir(fd, rel, why) }) {
		return false
	}
	p.mu.Lock()
	p.readers = append(p.readers, sub)
	p.mu.Unlock()
	return true
}

// walkAll reads the whole work tree, its directories on the goroutines of
// a pool.
func (t *treeReader) walkAll() error {
	t.pool = &walkPool{spread: fsat.NewSpread(fsat.Walkers)}
	err := t.walk("")
	return errors.Join(err, t.pool.gather(t))
}

// gather waits for the pool's goroutines and adds what they found to t.
func (p *walkPool) gather(t *treeReader) error {
	err := p.spread.Wait()
	for _, sub := range p.readers {
		t.files = append(t.files, sub.files...)
		t.ignored = append(t.ignored, sub.ignored...)
		for l := range sub.keptLinks {
			t.keptLinks[l] = true
		}
	}
	return err
}
