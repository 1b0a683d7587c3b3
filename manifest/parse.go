package manifest

import (
	"path"
	"strings"
)

// MatchPath reports whether name matches pattern, a slash-separated glob
// where "*", "?" and "[…]" match within one element (path.Match) and an
// element "**" matches any number of elements, none included. It is how
// workspace member globs and Check.Results globs are read.
func MatchPath(pattern, name string) bool {
	return matchParts(splitPath(pattern), splitPath(name))
}

func splitPath(p string) []string {
	p = strings.Trim(strings.TrimPrefix(p, "./"), "/")
	if p == "" || p == "." {
		return nil
	}
	return strings.Split(p, "/")
}

func matchParts(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchParts(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// matchMembers lists the dirs (relative to the root) below root that the
// workspace globs (relative to root; "!" excludes) take in.
func matchMembers(root string, globs []string, dirs []string) []string {
	var out []string
	for _, dir := range dirs {
		if dir == root || !within(dir, root) {
			continue
		}
		r := rel(dir, root)
		in := false
		for _, g := range globs {
			if neg, ok := strings.CutPrefix(g, "!"); ok {
				if MatchPath(neg, r) {
					in = false
				}
			} else if MatchPath(g, r) {
				in = true
			}
		}
		if in {
			out = append(out, dir)
		}
	}
	return out
}

// toml is the little of TOML detection needs: every key's raw value under
// its dotted name ("tool.poetry.name", "workspace.members"), and the tables.
type toml struct {
	values map[string]string
	tables map[string]bool
}

// parseTOML reads keys, tables and multi-line arrays; it does not
// unescape strings or read inline tables' insides, and never fails.
func parseTOML(b []byte) toml {
	t := toml{values: map[string]string{}, tables: map[string]bool{}}
	table := ""
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(stripComment(lines[i]))
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "[") {
			name := strings.Trim(line, "[] \t")
			table = unquoteKey(name)
			t.tables[table] = true
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		// A multi-line array: read on until its brackets close.
		for strings.HasPrefix(v, "[") && strings.Count(v, "[") > strings.Count(v, "]") && i+1 < len(lines) {
			i++
			v += " " + strings.TrimSpace(stripComment(lines[i]))
		}
		key := unquoteKey(strings.TrimSpace(k))
		if table != "" {
			key = table + "." + key
		}
		t.values[key] = v
	}
	return t
}

// stripComment drops a # comment outside quotes.
func stripComment(line string) string {
	var q byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case q != 0 && c == q:
			q = 0
		case q == 0 && (c == '"' || c == '\''):
			q = c
		case q == 0 && c == '#':
			return line[:i]
		}
	}
	return line
}

func unquoteKey(k string) string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

// has reports whether the table, or a key below it, is there.
func (t toml) has(table string) bool {
	for k := range t.tables {
		if k == table || strings.HasPrefix(k, table+".") {
			return true
		}
	}
	for k := range t.values {
		if strings.HasPrefix(k, table+".") {
			return true
		}
	}
	return false
}

// str is a key's string value, unquoted.
func (t toml) str(key string) string {
	v := t.values[key]
	if ss := quoted(v); len(ss) > 0 {
		return ss[0]
	}
	return ""
}

// strs is a key's array of strings.
func (t toml) strs(key string) []string { return quoted(t.values[key]) }

// quoted lists the quoted strings in s, in order.
func quoted(s string) []string {
	var out []string
	for {
		i := strings.IndexAny(s, `"'`)
		if i < 0 {
			return out
		}
		q := s[i]
		j := strings.IndexByte(s[i+1:], q)
		if j < 0 {
			return out
		}
		out = append(out, s[i+1:i+1+j])
		s = s[i+1+j+1:]
	}
}

// firstLine is a file's first line that is not blank or a # comment.
func firstLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

// properties reads a Java .properties file's key (enough of the format for
// a wrapper's distributionUrl: one line, \: escapes).
func properties(b []byte, key string) string {
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		k, v, ok := strings.Cut(l, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.ReplaceAll(strings.TrimSpace(v), `\`, "")
		}
	}
	return ""
}

// between is the text between the first prefix and the next suffix.
func between(s, prefix, suffix string) string {
	_, after, ok := strings.Cut(s, prefix)
	if !ok {
		return ""
	}
	v, _, ok := strings.Cut(after, suffix)
	if !ok {
		return ""
	}
	return v
}
