// Package gitignore decides what a tree's .gitignore files leave out, with
// git's own rules, at the pace of a directory walk.
//
// Each .gitignore is parsed once into a File: one compiled form per
// pattern, with a quick test on the entry's name (equal, suffix, prefix)
// that rejects most names without running the glob. A walk keeps a Dir
// per directory it enters, linking the Files that govern it, and asks of
// each entry by its name: a directory found ignored is not entered, so
// nothing below it is ever matched, as git never looks inside one. There
// are no regular expressions; globs are git's wildmatch, on the name or on
// the path below the .gitignore's directory.
//
// # What it follows
//
// git's rules as dir.c applies them (gitignore(5)): a UTF-8 byte-order
// mark, comments, CR before LF, trailing spaces unless escaped, '!'
// negation, a trailing '/' for directories only, a pattern with a '/'
// before its end anchored to its file's directory and matched with
// WM_PATHNAME, one without matched against the name at every depth, "**",
// bracket expressions with ranges and [:classes:], backslash escapes. The
// deepest .gitignore decides, and within one file the last matching line.
// A file is never re-included below an ignored directory. Its results are
// tested against `git check-ignore --no-index`.
//
// # What it does not do
//
// It reads only the .gitignore files the caller hands it: not
// .git/info/exclude nor core.excludesFile, which a workspace's agent
// should not be able to aim at the host's configuration. Matching is case
// sensitive (core.ignoreCase false, as git sets it on Linux file systems).
package gitignore

import (
	"bytes"
	"strings"
)

// File is one .gitignore, compiled.
type File struct {
	patterns []pattern
}

// quick is how a pattern's last segment is tested against an entry's name
// before anything else.
type quick uint8

const (
	quickExact  quick = iota // the name is lit
	quickSuffix              // "*lit"
	quickPrefix              // "lit*"
	quickAny                 // "*", or no test possible
	quickGlob                // wildmatch of last against the name
)

type pattern struct {
	glob     string // as wildmatch reads it: no '!', no trailing '/', no leading '/'
	negate   bool
	dirOnly  bool
	basename bool // no '/' but a trailing one: matched against the name at any depth
	// segs, if not 0, is how many segments the path below the file's
	// directory must have: a pathname pattern without "**" matches
	// only paths with as many.
	segs  int
	quick quick
	lit   string // quickExact, quickSuffix, quickPrefix
	last  string // quickGlob: the glob's last segment
}

// Parse compiles the content of a .gitignore.
func Parse(content []byte) *File {
	f := &File{}
	content = bytes.TrimPrefix(content, []byte("\xef\xbb\xbf"))
	for len(content) > 0 {
		line := content
		if i := bytes.IndexByte(content, '\n'); i >= 0 {
			line, content = content[:i], content[i+1:]
		} else {
			content = nil
		}
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if i := bytes.IndexByte(line, 0); i >= 0 {
			line = line[:i] // git reads a line as a C string
		}
		if p, ok := parse(trimTrailingSpaces(string(line))); ok {
			f.patterns = append(f.patterns, p)
		}
	}
	return f
}

// trimTrailingSpaces drops the spaces that end s, but not one escaped with
// a backslash (nor the ones before it).
func trimTrailingSpaces(s string) string {
	lastSpace := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if lastSpace < 0 {
				lastSpace = i
			}
		case '\\':
			i++
			if i == len(s) {
				return s
			}
			lastSpace = -1
		default:
			lastSpace = -1
		}
	}
	if lastSpace >= 0 {
		return s[:lastSpace]
	}
	return s
}

func parse(s string) (pattern, bool) {
	var p pattern
	if strings.HasPrefix(s, "!") {
		p.negate, s = true, s[1:]
	}
	if strings.HasSuffix(s, "/") {
		p.dirOnly, s = true, s[:len(s)-1]
	}
	p.basename = !strings.Contains(s, "/")
	if !p.basename {
		s = strings.TrimPrefix(s, "/")
	}
	if s == "" {
		return p, false // matches no name
	}
	p.glob = s
	last := s
	if !p.basename {
		// The last segment must match the name, and without "**" the
		// path has as many segments as the pattern: unless a bracket
		// expression or an escape could hold a '/' that is no separator.
		if strings.ContainsAny(s, `[\`) {
			p.quick = quickAny
			return p, true
		}
		last = s[strings.LastIndexByte(s, '/')+1:]
		if !strings.Contains(s, "**") {
			p.segs = strings.Count(s, "/") + 1
		}
		if last == "**" {
			p.quick = quickAny
			return p, true
		}
	}
	switch i := strings.IndexAny(last, `*?[\`); {
	case i < 0:
		p.quick, p.lit = quickExact, last
	case last == "*":
		p.quick = quickAny
	case i == 0 && last[0] == '*' && !strings.ContainsAny(last[1:], `*?[\`):
		p.quick, p.lit = quickSuffix, last[1:]
	case i == len(last)-1 && last[i] == '*':
		p.quick, p.lit = quickPrefix, last[:i]
	default:
		p.quick, p.last = quickGlob, last
	}
	return p, true
}

// name reports whether the pattern's last segment matches name; for a
// basename pattern that is the whole test.
func (p *pattern) name(name string) bool {
	switch p.quick {
	case quickExact:
		return name == p.lit
	case quickSuffix:
		return strings.HasSuffix(name, p.lit)
	case quickPrefix:
		return strings.HasPrefix(name, p.lit)
	case quickGlob:
		return Match(p.last, name, true)
	}
	return true
}

// Dir is a directory of a walk with the .gitignore files that govern its
// entries: its own and its ancestors'.
type Dir struct {
	parent *Dir
	files  *Dir // the nearest of this directory and its ancestors with a File
	file   *File
	rel    string // below the top, "" for the top itself
	depth  int
}

// Root is the top of a walk, with its .gitignore (nil if it has none).
func Root(f *File) *Dir {
	d := &Dir{file: f}
	if f != nil {
		d.files = d
	}
	return d
}

// Child is d's subdirectory name, with its .gitignore (nil if none). Ask
// d.Ignored(name, true) first: git never reads what an ignored directory holds.
func (d *Dir) Child(name string, f *File) *Dir {
	c := &Dir{parent: d, files: d.files, file: f, rel: name, depth: d.depth + 1}
	if d.rel != "" {
		c.rel = d.rel + "/" + name
	}
	if f != nil {
		c.files = c
	}
	return c
}

// Ignored reports whether d's entry name (a directory if isDir; a symbolic
// link is not one) is ignored. The deepest .gitignore with a matching line
// decides, and in it the last such line: ignored unless it is a '!' one.
func (d *Dir) Ignored(name string, isDir bool) bool {
	for fr := d.files; fr != nil; {
		if matched, ignored := fr.file.match(d, fr, name, isDir); matched {
			return ignored
		}
		if fr.parent == nil {
			break
		}
		fr = fr.parent.files
	}
	return false
}

// match finds f's last line that matches d's entry name, f being the
// .gitignore of base, d or one of its ancestors.
func (f *File) match(d, base *Dir, name string, isDir bool) (matched, ignored bool) {
	segs := d.depth - base.depth + 1
	for i := len(f.patterns) - 1; i >= 0; i-- {
		p := &f.patterns[i]
		if (p.dirOnly && !isDir) || (p.segs != 0 && p.segs != segs) || !p.name(name) {
			continue
		}
		if !p.basename && !Match(p.glob, below(d, base, name), true) {
			continue
		}
		return true, !p.negate
	}
	return false, false
}

// below is the path of d's entry name relative to base, an ancestor of d
// or d itself.
func below(d, base *Dir, name string) string {
	if d == base {
		return name
	}
	rel := d.rel
	if base.rel != "" {
		rel = rel[len(base.rel)+1:]
	}
	return rel + "/" + name
}
