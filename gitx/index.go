package gitx

// A diff's scratch index, written by paddock.
//
// git diff --cached compares an index with base; what it reads of an
// index entry is its path, mode and blob id (no stat data: the scratch
// repository has no work tree). paddock writes that index itself, the
// entries `git update-index -z --index-info` would make of the same
// lines, and spares a diff a git process that reads and writes the whole
// index (8 ms of a clone's 1,000-file change set, 2-3 ms of a small
// one's). Where only git should judge the lines (a path git may refuse,
// a file where another line needs a directory), git stages them, as
// before.

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
)

// indexEntry is an entry of a scratch index.
type indexEntry struct {
	path string
	mode uint32
	oid  string // hex
}

// indexModes are the modes of the lines writeIndex stages ("0" removes).
var indexModes = map[string]uint32{"100644": 0o100644, "100755": 0o100755, "120000": 0o120000, "160000": 0o160000}

// writeIndex writes file, a version 2 index of base's entries (none if
// base is nil) with the index lines info ("MODE OID\tPATH" NUL each, MODE
// 0 removing PATH) applied, as `git update-index -z --index-info` would
// make it of an index of base. It reports false, having written nothing,
// where git must stage info itself: a line git may judge otherwise than
// taking it as given (mayRefuse; a mode or id it reads otherwise; a path
// given twice) or that needs a directory where the index holds a file,
// or the other way round (git replaces one by the other).
func writeIndex(file string, format objectFormat, base *baseTree, info []byte) (bool, error) {
	idLen := format.new().Size() * 2
	changes, ok := parseIndexLines(info, idLen)
	if !ok {
		return false, nil
	}
	var order []string
	if base != nil {
		order = base.sorted()
	}
	entries := make([]indexEntry, 0, len(order)+len(changes))
	i := 0
	for _, c := range changes {
		for ; i < len(order) && order[i] < c.path; i++ {
			b := base.entries[order[i]]
			entries = append(entries, indexEntry{order[i], indexModes[b.mode], b.oid})
		}
		if i < len(order) && order[i] == c.path {
			i++
		}
		if c.mode != 0 {
			entries = append(entries, c)
		}
	}
	for ; i < len(order); i++ {
		b := base.entries[order[i]]
		entries = append(entries, indexEntry{order[i], indexModes[b.mode], b.oid})
	}
	if !oneKindEach(entries, changes) {
		return false, nil
	}
	for _, e := range entries {
		if e.mode == 0 || len(e.oid) != idLen {
			return false, nil // a base entry of a kind read-tree makes no entry of
		}
	}
	return true, saveIndex(file, format, entries)
}

// parseIndexLines reads index lines into changes sorted by path; false
// for lines git must judge.
func parseIndexLines(info []byte, idLen int) ([]indexEntry, bool) {
	var changes []indexEntry
	for rest := string(info); rest != ""; {
		line, tail, ok := strings.Cut(rest, "\x00")
		if !ok {
			return nil, false
		}
		rest = tail
		meta, p, ok := strings.Cut(line, "\t")
		mode, oid, ok2 := strings.Cut(meta, " ")
		if !ok || !ok2 || len(oid) != idLen || !isHex(oid) || mayRefuse(p, mode == "120000") {
			return nil, false
		}
		m, known := indexModes[mode]
		if !known && mode != "0" {
			return nil, false
		}
		changes = append(changes, indexEntry{p, m, oid})
	}
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].path < changes[j].path })
	for i := 1; i < len(changes); i++ {
		if changes[i].path == changes[i-1].path {
			return nil, false
		}
	}
	return changes, true
}

// oneKindEach reports whether no path of changes that entries (sorted)
// holds is a file where another entry needs a directory, or the other way
// round: base holds none such, so any is a change's.
func oneKindEach(entries, changes []indexEntry) bool {
	has := func(p string) bool {
		_, ok := slices.BinarySearchFunc(entries, p, func(e indexEntry, p string) int { return strings.Compare(e.path, p) })
		return ok
	}
	for _, c := range changes {
		if c.mode == 0 {
			continue
		}
		for d := c.path; strings.Contains(d, "/"); {
			d = d[:strings.LastIndexByte(d, '/')]
			if has(d) {
				return false
			}
		}
		under := c.path + "/"
		i, _ := slices.BinarySearchFunc(entries, under, func(e indexEntry, p string) int { return strings.Compare(e.path, p) })
		if i < len(entries) && strings.HasPrefix(entries[i].path, under) {
			return false
		}
	}
	return true
}

// mayRefuse reports whether git may refuse path (a link's, if link) as
// an index entry's, or take it otherwise than as given: a superset of
// what git's verify_path refuses where core.protectNTFS is on (git's
// default) and core.protectHFS too (macOS's). Left to git are: a name
// that is .git in any case followed by nothing but spaces and dots, or
// by those and a colon (.gitignore and .github are not); a name that
// begins with git~ in any case; a link's name that begins with
// .gitmodules in any case or holds a ~; any path with a backslash; an
// empty, . or .. name; and any byte an HFS+ file system ignores in names
// (every one of them begins with 0xe2 or 0xef in UTF-8).
func mayRefuse(path string, link bool) bool {
	if strings.IndexByte(path, '\\') >= 0 || strings.IndexByte(path, 0xe2) >= 0 || strings.IndexByte(path, 0xef) >= 0 {
		return true
	}
	for name := range strings.SplitSeq(path, "/") {
		if name == "" || name == "." || name == ".." {
			return true
		}
		lower := strings.ToLower(name)
		if rest, dotgit := strings.CutPrefix(lower, ".git"); dotgit {
			if rest = strings.TrimLeft(rest, " ."); rest == "" || rest[0] == ':' {
				return true
			}
		}
		if strings.HasPrefix(lower, "git~") || (link && (strings.HasPrefix(lower, ".gitmodules") || strings.Contains(name, "~"))) {
			return true
		}
	}
	return false
}

// saveIndex writes entries, sorted by path, as a version 2 index with
// no extension, and its checksum.
func saveIndex(file string, format objectFormat, entries []indexEntry) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("gitx: diff: %w", err)
	}
	sum := format.new()
	w := bufio.NewWriterSize(io.MultiWriter(f, sum), 64<<10)
	var head [12]byte
	copy(head[:], "DIRC")
	binary.BigEndian.PutUint32(head[4:], 2)
	binary.BigEndian.PutUint32(head[8:], uint32(len(entries)))
	w.Write(head[:])
	idLen := sum.Size()
	fixed := 40 + idLen + 2 // stat data, id, flags
	buf := make([]byte, 0, 512)
	for _, e := range entries {
		size := (fixed + len(e.path) + 8) &^ 7 // the path and 1 to 8 NULs
		buf = slices.Grow(buf[:0], size)[:size]
		clear(buf)
		binary.BigEndian.PutUint32(buf[24:], e.mode)
		if _, err := hex.Decode(buf[40:40+idLen], []byte(e.oid)); err != nil {
			f.Close()
			return fmt.Errorf("gitx: diff: %s: %w", e.path, err)
		}
		binary.BigEndian.PutUint16(buf[40+idLen:], uint16(min(len(e.path), 0xfff)))
		copy(buf[fixed:], e.path)
		w.Write(buf)
	}
	err = w.Flush()
	if err == nil {
		_, err = f.Write(sum.Sum(nil))
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("gitx: diff: %w", err)
	}
	return nil
}

// sorted is base's paths in git's index order, made once per base tree
// (a base tree of a commit is kept: treeMemo).
func (b *baseTree) sorted() []string {
	b.orderOnce.Do(func() {
		b.order = make([]string, 0, len(b.entries))
		for p := range b.entries {
			b.order = append(b.order, p)
		}
		sort.Strings(b.order)
	})
	return b.order
}
