package gitx

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/internal/fsat"
	"golang.org/x/sys/unix"
)

// Blobs are hashed and stored by paddock, from the bytes a file holds: no
// filter, end-of-line conversion or encoding applies (git's
// `hash-object --no-filters`), and git is never handed a workspace path.

// objectFormat is a repository's hash: sha1 or sha256.
type objectFormat struct {
	name string
	new  func() hash.Hash
}

var (
	formatSHA1   = objectFormat{"sha1", sha1.New}
	formatSHA256 = objectFormat{"sha256", sha256.New}
)

// formatOf is the hash of the repository whose commit base is (a full id).
func formatOf(base string) objectFormat {
	if len(base) == 64 {
		return formatSHA256
	}
	return formatSHA1
}

// inMemoryHash is the largest file hashed from memory: one read, and the
// object written from the same bytes. A larger one is streamed twice when
// its object is needed.
const inMemoryHash = 1 << 20

// errChanged is a file that changed while it was read.
var errChanged = errors.New("changed while it was read")

// hasher hashes a work tree's files and stores the objects git needs in
// one pack of a directory of paddock's (never the project's object
// store): one file per diff, not one per blob.
type hasher struct {
	root   int
	format objectFormat
	store  *packStore
	buf    []byte
	dirs   fsat.Stack
}

// open opens the file rel for reading, refusing anything but a regular
// file, without following a link at any step.
func (h *hasher) open(rel string) (*os.File, error) {
	f, err := h.dirs.OpenRegular(h.root, rel)
	if errors.Is(err, fsat.ErrNotRegular) {
		err = fmt.Errorf("%s: %w (no longer a regular file)", rel, errChanged)
	}
	return f, err
}

// content returns what git stores for f: a link's target, or a reader of
// a file's bytes and their size.
func (h *hasher) content(f *wfile) (io.ReadCloser, int64, error) {
	if f.mode == "120000" {
		dfd, name, err := h.dirs.Parent(h.root, f.path)
		if err != nil {
			return nil, 0, err
		}
		target, err := fsat.Readlink(dfd, name)
		if err != nil {
			return nil, 0, err
		}
		return io.NopCloser(strings.NewReader(target)), int64(len(target)), nil
	}
	r, err := h.open(f.path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := r.Stat()
	if err != nil {
		r.Close()
		return nil, 0, err
	}
	return r, fi.Size(), nil
}

// hash sets f.oid and, when want says the object is needed (it is not
// one base has), stores it unless the store has it. always says want
// holds whatever the id: a large file is then read once. A file that
// changes while it is read, or whose size is not the one the walk saw
// (f.st, which the limits weigh: DiffOptions.Check), is errChanged.
func (h *hasher) hash(f *wfile, want func(oid string) bool, always bool) error {
	r, size, err := h.content(f)
	if err != nil {
		return err
	}
	defer r.Close()
	if size != f.st.Size {
		return fmt.Errorf("%s: %w", f.path, errChanged)
	}
	if size <= inMemoryHash {
		if cap(h.buf) < int(size)+1 {
			h.buf = make([]byte, 0, max(int(size)+1, 64<<10))
		}
		// One byte more than the size: a file that grew is seen to.
		n, err := io.ReadFull(r, h.buf[:size+1])
		switch {
		case err != nil && err != io.EOF && err != io.ErrUnexpectedEOF:
			return err
		case int64(n) != size:
			return fmt.Errorf("%s: %w", f.path, errChanged)
		}
		b := h.buf[:n]
		f.oid = h.id(b)
		if want(f.oid) && !h.store.has(f.oid) {
			return h.store.add(f.oid, b)
		}
		return nil
	}
	if always {
		f.oid, err = h.store.addLarge(r, size, "")
		return err
	}
	hh := h.format.new()
	fmt.Fprintf(hh, "blob %d\x00", size)
	if n, err := io.Copy(hh, r); err != nil {
		return err
	} else if n != size {
		return fmt.Errorf("%s: %w", f.path, errChanged)
	}
	f.oid = hex.EncodeToString(hh.Sum(nil))
	if !want(f.oid) || h.store.has(f.oid) {
		return nil
	}
	r2, size2, err := h.content(f)
	if err != nil {
		return err
	}
	defer r2.Close()
	if size2 != size {
		return fmt.Errorf("%s: %w", f.path, errChanged)
	}
	_, err = h.store.addLarge(r2, size, f.oid)
	return err
}

func (h *hasher) id(b []byte) string {
	hh := h.format.new()
	fmt.Fprintf(hh, "blob %d\x00", len(b))
	hh.Write(b)
	return hex.EncodeToString(hh.Sum(nil))
}

// changedError is the public error of a file that kept changing while a
// change set was computed.
func changedError(err error) error {
	if !errors.Is(err, errChanged) {
		return nil
	}
	return &paddock.Error{Code: paddock.CodeConflict, Message: "a file changed while the change set was computed; compute it again", Err: err}
}

// statCache remembers the blob id of each file of a work tree by what
// stat said of it, so that a diff hashes again only what changed since
// the last one (git's index does the same for git add).
type statCache struct {
	file    string
	format  string
	entries map[string]cached
	changed bool // a file was hashed: the cache is worth writing
}

func (c *statCache) dirty() {
	if c != nil {
		c.changed = true
	}
}

type cached struct {
	st   fileStat
	mode string
	oid  string
}

const statCacheMagic = "paddock-stat-v1\n"

// loadStatCache reads the cache at file; a missing or unreadable one is
// empty (a lost cache costs only time).
func loadStatCache(file, format string) *statCache {
	c := &statCache{file: file, format: format, entries: map[string]cached{}}
	f, err := os.Open(file)
	if err != nil {
		return c
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return c
	}
	key, id := format+"\x00"+file, statOf(&st)
	if e, ok := statMemo.get(key, id); ok {
		c.entries = e
		return c
	}
	b, err := io.ReadAll(f)
	if err != nil || !bytes.HasPrefix(b, []byte(statCacheMagic+format+"\n")) {
		return c
	}
	c.entries = parseStatCache(b[len(statCacheMagic)+len(format)+1:])
	statMemo.put(key, id, len(c.entries), c.entries)
	return c
}

// parseStatCache reads the entries of a stat cache file.
func parseStatCache(b []byte) map[string]cached {
	entries := make(map[string]cached, len(b)/96) // an entry is 85 bytes and its path
	// The paths and ids are slices of one string (no allocation per
	// entry); the numbers are read from the bytes at the same offset.
	all := string(b)
	for rest := all; len(rest) > 0; {
		var e cached
		var p string
		var ok bool
		if p, rest, ok = strings.Cut(rest, "\x00"); !ok {
			break
		}
		if e.mode, rest, ok = strings.Cut(rest, "\x00"); !ok {
			break
		}
		if e.oid, rest, ok = strings.Cut(rest, "\x00"); !ok || len(rest) < 36 {
			break
		}
		n := b[len(all)-len(rest):]
		e.st = fileStat{Ino: int64(binary.LittleEndian.Uint64(n)), Size: int64(binary.LittleEndian.Uint64(n[8:])),
			Mtime: int64(binary.LittleEndian.Uint64(n[16:])), Ctime: int64(binary.LittleEndian.Uint64(n[24:])),
			Mode: binary.LittleEndian.Uint32(n[32:])}
		rest = rest[36:]
		entries[p] = e
	}
	return entries
}

// lookup sets f.oid from the cache when f is as it was when hashed.
func (c *statCache) lookup(f *wfile) bool {
	if c == nil {
		return false
	}
	e, ok := c.entries[f.path]
	if ok && e.st == f.st && e.mode == f.mode {
		f.oid = e.oid
		return true
	}
	return false
}

// save writes the cache of files, leaving out those changed too close to
// since (when the walk began) for their stat data to tell a later change
// from this one: the kernel's clock ticks coarser than a nanosecond. It
// writes nothing when the cache would gain no entry (the files hashed
// were all changed that recently): the file, and the memo's copy of it,
// stay good, and an entry of a file changed since is only not used. A
// cache lost costs only time.
func (c *statCache) save(files []*wfile, since time.Time) {
	if c == nil || !c.changed {
		return
	}
	limit := since.Add(-time.Second).UnixNano()
	if !slices.ContainsFunc(files, func(f *wfile) bool { return settled(f, limit) && !c.holds(f) }) {
		return
	}
	_, _ = c.write(files, limit)
}

// settled reports whether f was hashed and its ctime and mtime are
// before limit.
func settled(f *wfile, limit int64) bool {
	return f.oid != "" && f.st.Ctime < limit && f.st.Mtime < limit
}

// holds reports whether the cache held f as it is now: such an entry
// stays true for the reason it was first written.
func (c *statCache) holds(f *wfile) bool {
	e, ok := c.entries[f.path]
	return ok && e.st == f.st && e.mode == f.mode && e.oid == f.oid
}

// write replaces the cache file with the files hashed now whose ctime and
// mtime are before limit, and those the cache held as they are; it
// returns how many it holds.
func (c *statCache) write(files []*wfile, limit int64) (int, error) {
	var b bytes.Buffer
	b.WriteString(statCacheMagic + c.format + "\n")
	var num [36]byte
	n := 0
	for _, f := range files {
		if !settled(f, limit) && !c.holds(f) {
			continue
		}
		n++
		b.WriteString(f.path + "\x00" + f.mode + "\x00" + f.oid + "\x00")
		binary.LittleEndian.PutUint64(num[:], uint64(f.st.Ino))
		binary.LittleEndian.PutUint64(num[8:], uint64(f.st.Size))
		binary.LittleEndian.PutUint64(num[16:], uint64(f.st.Mtime))
		binary.LittleEndian.PutUint64(num[24:], uint64(f.st.Ctime))
		binary.LittleEndian.PutUint32(num[32:], f.st.Mode)
		b.Write(num[:])
	}
	if err := os.MkdirAll(filepath.Dir(c.file), 0o700); err != nil {
		return 0, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.file), filepath.Base(c.file)+".tmp-"+strconv.Itoa(os.Getpid()))
	if err != nil {
		return 0, err
	}
	_, err = tmp.Write(b.Bytes())
	if err = errors.Join(err, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return 0, err
	}
	if err := os.Rename(tmp.Name(), c.file); err != nil {
		os.Remove(tmp.Name())
		return 0, err
	}
	return n, nil
}
