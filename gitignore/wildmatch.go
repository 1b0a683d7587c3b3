package gitignore

import "strings"

// The results of wildmatch, as git's wildmatch.c names them. The two
// aborts cut the backtracking short: once the text is used up, or a '/'
// that a single '*' cannot cross is reached, no later start can match.
const (
	wmMatch           = 0
	wmNoMatch         = 1
	wmAbortAll        = -1
	wmAbortToStarStar = -2
)

// Match reports whether text matches the glob pattern as git's wildmatch
// does. With pathname set ('/'-separated paths, WM_PATHNAME) '*', '?' and
// bracket expressions do not match '/', and "**" between slashes matches
// any number of directories; without it '*' matches anything.
//
// It is a transcription of git's dowild(), whose corner cases (a ']' first
// in a bracket expression, '!' or '^' negating it, a range ending in an
// escape, [:class:] names, "**" only special next to '/') it keeps, because
// the ignore rules must agree with git's to the byte.
func Match(pattern, text string, pathname bool) bool {
	return dowild(pattern, text, pathname) == wmMatch
}

// at returns s[i], or 0 past its end: the C original reads a terminating
// NUL there, and no path or pattern holds one.
func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func isGlobSpecial(c byte) bool {
	return c == '*' || c == '?' || c == '[' || c == '\\'
}

func dowild(p, text string, pathname bool) int {
	pi, ti := 0, 0
	for ; pi < len(p); pi, ti = pi+1, ti+1 {
		pc := p[pi]
		tc := at(text, ti)
		if tc == 0 && pc != '*' {
			return wmAbortAll
		}
		switch pc {
		case '\\':
			// The next character, literally; a trailing backslash
			// matches nothing.
			pi++
			if tc != at(p, pi) {
				return wmNoMatch
			}
		case '?':
			if pathname && tc == '/' {
				return wmNoMatch
			}
		case '*':
			var matchSlash bool
			pi++
			if at(p, pi) == '*' {
				prev := pi - 2 // before the first '*'
				for pi++; at(p, pi) == '*'; pi++ {
				}
				next := at(p, pi)
				if (prev < 0 || p[prev] == '/') && (next == 0 || next == '/' || (next == '\\' && at(p, pi+1) == '/')) {
					// "**/" may match no directory at all: try the
					// rest of the pattern right here first.
					if next == '/' && dowild(p[pi+1:], text[ti:], pathname) == wmMatch {
						return wmMatch
					}
					matchSlash = true
				} else {
					matchSlash = !pathname // "**" inside a name is '*'
				}
			} else {
				matchSlash = !pathname
			}
			if pi >= len(p) {
				// A trailing "**" matches everything, a trailing '*' what
				// has no more slashes.
				if !matchSlash && strings.IndexByte(text[ti:], '/') >= 0 {
					return wmNoMatch
				}
				return wmMatch
			}
			if !matchSlash && p[pi] == '/' {
				// A single '*' then '/': this directory, whatever its name.
				slash := strings.IndexByte(text[ti:], '/')
				if slash < 0 {
					return wmNoMatch
				}
				ti += slash
				continue // the loop steps over both slashes
			}
			for tc != 0 {
				// Before a literal, skip to where the literal is: what
				// comes before it belongs to the star.
				if lit := p[pi]; !isGlobSpecial(lit) {
					for {
						tc = at(text, ti)
						if tc == 0 || (!matchSlash && tc == '/') || tc == lit {
							break
						}
						ti++
					}
					if tc != lit {
						return wmNoMatch
					}
				}
				if m := dowild(p[pi:], text[ti:], pathname); m != wmNoMatch {
					if !matchSlash || m != wmAbortToStarStar {
						return m
					}
				} else if !matchSlash && tc == '/' {
					return wmAbortToStarStar
				}
				ti++
				tc = at(text, ti)
			}
			return wmAbortAll
		case '[':
			var in, ok bool
			if pi, in, ok = bracket(p, pi, tc); !ok {
				return wmAbortAll
			}
			if !in || (pathname && tc == '/') {
				return wmNoMatch
			}
		default:
			if tc != pc {
				return wmNoMatch
			}
		}
	}
	if ti < len(text) {
		return wmNoMatch
	}
	return wmMatch
}

// class reports whether c is in the [:name:] class, with git's own ctype
// (ASCII only; space is " \t\n\r", as git's sane_ctype has it), and
// whether name is a class at all.
func class(name string, c byte) (in, ok bool) {
	alpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	digit := c >= '0' && c <= '9'
	space := c == ' ' || c == '\t' || c == '\n' || c == '\r'
	switch name {
	case "alnum":
		return alpha || digit, true
	case "alpha":
		return alpha, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 0x20 || c == 0x7f, true
	case "digit":
		return digit, true
	case "graph":
		return c > 0x20 && c < 0x7f, true
	case "lower":
		return c >= 'a' && c <= 'z', true
	case "print":
		return c >= 0x20 && c < 0x7f, true
	case "punct":
		return c > 0x20 && c < 0x7f && !alpha && !digit, true
	case "space":
		return space, true
	case "upper":
		return c >= 'A' && c <= 'Z', true
	case "xdigit":
		return digit || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F', true
	}
	return false, false
}

// bracket is the case '[' of git's dowild(), line for line: it matches tc
// against the bracket expression that opens at p[pi]. end is the index of
// its closing ']', isMember whether tc is a member (negation applied), and
// wellFormed false for an expression that aborts the whole match (no
// closing ']', an escape at the end, an unknown [:class:]). The caller
// adds that with pathname no bracket expression matches '/'.
func bracket(p string, pi int, tc byte) (end int, isMember, wellFormed bool) {
	pi++
	pc := at(p, pi)
	if pc == '^' {
		pc = '!'
	}
	negated := pc == '!'
	if negated {
		pi++
		pc = at(p, pi)
	}
	var prev byte
	matched := false
	for {
		switch {
		case pc == 0:
			return pi, false, false
		case pc == '\\':
			pi++
			if pc = at(p, pi); pc == 0 {
				return pi, false, false
			}
			if tc == pc {
				matched = true
			}
		case pc == '-' && prev != 0 && at(p, pi+1) != 0 && at(p, pi+1) != ']':
			pi++
			pc = p[pi]
			if pc == '\\' {
				pi++
				if pc = at(p, pi); pc == 0 {
					return pi, false, false
				}
			}
			if tc <= pc && tc >= prev {
				matched = true
			}
			pc = 0 // a range is no start of the next one
		case pc == '[' && at(p, pi+1) == ':':
			s := pi + 2
			pi = s
			for pc = at(p, pi); pc != 0 && pc != ']'; pc = at(p, pi) {
				pi++
			}
			if pc == 0 {
				return pi, false, false
			}
			if pi-s-1 < 0 || p[pi-1] != ':' {
				// No ":]": the '[' is an ordinary member.
				pi = s - 2
				pc = '['
				if tc == pc {
					matched = true
				}
				break
			}
			in, ok := class(p[s:pi-1], tc)
			if !ok {
				return pi, false, false // an unknown class
			}
			if in {
				matched = true
			}
			pc = 0
		default:
			if tc == pc {
				matched = true
			}
		}
		prev = pc
		pi++
		if pc = at(p, pi); pc == ']' {
			break
		}
	}
	return pi, matched != negated, true
}
