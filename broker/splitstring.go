package broker

import "strings"

// splitString splits the value of env -S (--split-string) into words as
// GNU env does (coreutils 9.1, env.c: validate_split_str, then build_argv):
//
//   - space and tab outside quotes separate words;
//   - '…' quotes everything but \\ and \' ; "…" quotes everything but
//     backslash escapes;
//   - \\ \' \" \# \$ pass the character (\" \# \$ not inside '…'), \_
//     separates words outside "…" and is a space inside, \c ends the
//     string (not inside "…"), \f \n \r \t \v are those characters;
//   - a # where a word would start ends the string.
//
// What env would refuse (an unknown escape, a backslash at the end, an
// unterminated quote, $ that is not ${NAME}) is refused here too, and so is
// what this reading cannot know or what versions of env read differently:
// ${NAME} (its value is env's environment when it runs) and a newline,
// vertical tab, form feed or carriage return outside quotes (coreutils
// 9.1 keeps them in a word, later versions separate words there).
func splitString(s string) ([]word, error) {
	// parse_split_string skips leading white space (isspace); nothing left
	// is no words at all.
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	if s == "" {
		return nil, nil
	}
	if err := validateSplit(s); err != nil {
		return nil, err
	}
	var (
		words   []word
		cur     strings.Builder
		sq, dq  bool
		sep     = true
		started bool
	)
	start := func() {
		if sep {
			if started {
				words = append(words, word{lit: cur.String(), known: true})
			}
			cur.Reset()
			started, sep = true, false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' && !dq:
			sq = !sq
			start()
			continue
		case c == '"' && !sq:
			dq = !dq
			start()
			continue
		case (c == ' ' || c == '\t') && !sq && !dq:
			sep = true
			continue
		case c == '#' && sep:
			i = len(s) // a comment to the end
			continue
		case c == '\\' && (!sq || i+1 < len(s) && (s[i+1] == '\\' || s[i+1] == '\'')):
			i++
			n := s[i]
			switch {
			case n == '\\' || n == '\'' || !sq && (n == '#' || n == '$' || n == '"'):
				c = n
			case n == '_' && !dq:
				sep = true
				continue
			case n == '_':
				c = ' '
			case n == 'c':
				i = len(s) // \c ends the string
				continue
			default:
				c = map[byte]byte{'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v'}[n]
			}
		case c == '$' && !sq:
			return nil, unsure("env -S expands ${NAME} from its environment when it runs")
		}
		start()
		cur.WriteByte(c)
	}
	if started {
		words = append(words, word{lit: cur.String(), known: true})
	}
	return words, nil
}

// validateSplit is env's first pass over the string: what it refuses, for
// the whole string (a # or \c that ends the words does not end this pass).
func validateSplit(s string) error {
	var sq, dq bool
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'':
			sq = !sq && !dq
		case '"':
			dq = !sq && !dq
		case '\\':
			if i+1 >= len(s) {
				return unsure("env -S would refuse a backslash at the end of its string")
			}
			n := s[i+1]
			if dq && n == 'c' {
				return unsure(`env -S would refuse \c inside "…"`)
			}
			if !strings.ContainsRune(`cfnrtv#$_"'\`, rune(n)) {
				return unsure(`env -S would refuse the sequence \%c`, n)
			}
			i++
		case '$':
			if !sq {
				return unsure("env -S expands ${NAME} from its environment when it runs (and refuses any other $)")
			}
		case '\n', '\v', '\f', '\r':
			if !sq && !dq {
				return unsure("a newline, vertical tab, form feed or carriage return in env -S's string (versions of env split there differently)")
			}
		}
	}
	if sq || dq {
		return unsure("env -S would refuse a quote its string does not close")
	}
	return nil
}
