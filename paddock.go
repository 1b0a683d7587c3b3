// Package paddock holds the domain of paddock: the types every other package
// speaks (projects, runs, workspaces, events, locks), the one application error
// type, and the interfaces that have more than one implementation (the state
// store and the workspace providers).
//
// It imports only the standard library. Mechanisms live in their own packages
// and are wired together by cmd/paddockd; docs/ARCHITECTURE.md draws the map.
package paddock

import (
	"fmt"
	"strings"
	"unicode"
)

// EnvPrefix prefixes every environment variable paddock reads.
const EnvPrefix = "PADDOCK_"

// ValidateName checks a project name: 1–63 characters of lower-case ASCII
// letters, digits, '.', '_' and '-', starting with a letter or digit. Names
// appear in paths, URLs and shell commands, so they are kept plain.
func ValidateName(name string) error {
	if validName(name) {
		return nil
	}
	return &Error{
		Code:    CodeBadRequest,
		Message: fmt.Sprintf("invalid name %q: use 1-63 lower-case ASCII letters, digits, '.', '_' or '-', starting with a letter or digit", name),
	}
}

// validName is ^[a-z0-9][a-z0-9._-]{0,62}$, by hand: a package-level
// regular expression is compiled at every start of every command.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// SlugName derives a valid name from free text (a directory's base name, say),
// or returns "" when nothing usable is left.
func SlugName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
			dash = false
		case r == '.' || r == '_' || r == '-':
			b.WriteRune(r)
			dash = r == '-'
		default:
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	out := strings.TrimLeft(strings.TrimRight(b.String(), "-._"), "-._")
	if len(out) > 63 {
		out = strings.TrimRight(out[:63], "-._")
	}
	if ValidateName(out) != nil {
		return ""
	}
	return out
}
