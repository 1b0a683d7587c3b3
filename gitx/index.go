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
	"encoding/binary"
	"encoding/hex"
	"fmt"
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
	idSize := format.new().Size()
	changes, ok := parseIndexLines(info, idSize*2)
	if !ok {
		return false, nil
	}
	var order []string
	enc := &encodedBase{starts: []int{0}}
	if base != nil {
		order = base.sorted()
		if enc = base.encoded(idSize); enc == nil {
			return false, nil // a base entry of a kind read-tree makes no entry of
		}
	}
	if !oneKindEach(base, order, changes) {
		return false, nil
	}
	// Base's entries as they are encoded, in runs between the changes.
	out := make([]byte, 12, 12+len(enc.bytes)+len(info)+len(changes)*(40+idSize+2+8)+idSize)
	count, i := 0, 0
	for _, c := range changes {
		j := i + sort.SearchStrings(order[i:], c.path)
		out = append(out, enc.bytes[enc.starts[i]:enc.starts[j]]...)
		count += j - i
		i = j
		if i < len(order) && order[i] == c.path {
			i++
		}
		if c.mode != 0 {
			out, _ = appendEntry(out, c, idSize)
			count++
		}
	}
	out = append(out, enc.bytes[enc.starts[i]:enc.starts[len(order)]]...)
	count += len(order) - i
	copy(out, "DIRC")
	binary.BigEndian.PutUint32(out[4:], 2)
	binary.BigEndian.PutUint32(out[8:], uint32(count))
	sum := format.new()
	sum.Write(out)
	if err := os.WriteFile(file, sum.Sum(out), 0o600); err != nil {
		return true, fmt.Errorf("gitx: diff: %w", err)
	}
	return true, nil
}

// encodedBase is a base tree's entries as an index holds them
// (appendEntry), one after the other in path order, and where each
// begins (and the last ends).
type encodedBase struct {
	idSize int
	bytes  []byte
	starts []int
}

// encoded is b's entries encoded for an index of ids of idSize bytes,
// made once per base tree (a base tree of a commit is kept: treeMemo);
// nil where an entry is of a kind appendEntry does not write.
func (b *baseTree) encoded(idSize int) *encodedBase {
	b.encodeOnce.Do(func() {
		order := b.sorted()
		e := &encodedBase{idSize: idSize, starts: make([]int, 0, len(order)+1)}
		for i, p := range order {
			be := b.orderEntries[i]
			e.starts = append(e.starts, len(e.bytes))
			var ok bool
			if e.bytes, ok = appendEntry(e.bytes, indexEntry{p, indexModes[be.mode], be.oid}, idSize); !ok {
				return
			}
		}
		e.starts = append(e.starts, len(e.bytes))
		b.enc = e
	})
	if b.enc == nil || b.enc.idSize != idSize {
		return nil
	}
	return b.enc
}

// appendEntry appends e as a version 2 index entry holds it: no stat data
// but its mode, its id, its path's length (at most 0xfff, git's cap), its
// path, and 1 to 8 NULs. False, and dst unchanged, for an entry with no
// mode or an id that is not one of idSize bytes in hex.
func appendEntry(dst []byte, e indexEntry, idSize int) ([]byte, bool) {
	fixed := 40 + idSize + 2
	size := (fixed + len(e.path) + 8) &^ 7
	n := len(dst)
	dst = slices.Grow(dst, size)[:n+size]
	b := dst[n:]
	clear(b)
	binary.BigEndian.PutUint32(b[24:], e.mode)
	if e.mode == 0 || len(e.oid) != 2*idSize {
		return dst[:n], false
	}
	if _, err := hex.Decode(b[40:40+idSize], []byte(e.oid)); err != nil {
		return dst[:n], false
	}
	binary.BigEndian.PutUint16(b[40+idSize:], uint16(min(len(e.path), 0xfff)))
	copy(b[fixed:], e.path)
	return dst, true
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

// oneKindEach reports whether no path changes stage is a file where
// another entry needs a directory, or the other way round, in base (with
// order, its sorted paths; or none) with changes applied. Base holds none
// such, so any is a change's.
func oneKindEach(base *baseTree, order []string, changes []indexEntry) bool {
	adds, removed := map[string]bool{}, map[string]bool{}
	for _, c := range changes {
		if c.mode == 0 {
			removed[c.path] = true
		} else {
			adds[c.path] = true
		}
	}
	isFile := func(p string) bool {
		if adds[p] {
			return true
		}
		if base == nil || removed[p] {
			return false
		}
		_, ok := base.entries[p]
		return ok
	}
	dirs := map[string]bool{} // the directories of what is added
	for p := range adds {
		for d := p; strings.Contains(d, "/"); {
			d = d[:strings.LastIndexByte(d, '/')]
			if dirs[d] {
				break
			}
			dirs[d] = true
		}
	}
	for p := range adds {
		if dirs[p] {
			return false // and another file added below it
		}
		for d := p; strings.Contains(d, "/"); {
			d = d[:strings.LastIndexByte(d, '/')]
			if isFile(d) {
				return false
			}
		}
		if base != nil && base.dirs[p] { // base's files below it must all go
			under := p + "/"
			for i := sort.SearchStrings(order, under); i < len(order) && strings.HasPrefix(order[i], under); i++ {
				if !removed[order[i]] {
					return false
				}
			}
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
