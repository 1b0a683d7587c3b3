package redact

import (
	"bytes"

	"github.com/paddock-dev/paddock/internal/lazyre"
)

// shape is a well-known credential format, masked wherever it appears,
// declared or not.
type shape struct {
	name string
	re   *lazyre.Regexp
	// keep: the first submatch (a header or key name) stays.
	keep bool
	// lits: the shape cannot match unless one of these occurs (in lower
	// case when fold is set). A fast substring scan skips the regular
	// expression on almost all output.
	lits []string
	fold bool
}

// privateKeyBlock is a PEM private key: its BEGIN line, lines that can be
// part of a key (base64 data, "Name: value" headers, blank lines) and its
// END line. Lines may be indented, quoted or carry a diff's +, - or space in
// front, and may end with the newline escaped (\n, \\n) as in JSON or a
// string literal, at any depth.
//
// Nothing else may stand between BEGIN and END: text that is not key data
// (a line of code, a diff's "diff --git" or "@@" header) ends the match, so
// a BEGIN in one file and an END in another, or a "key" wrapped around
// code, masks nothing between them. (It used to match any text up to the
// next END, and hid whole files of a change set from the reviewer.)
var privateKeyBlock = lazyre.New(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----` +
	`(?:` + keyLineEnd + `(?:` + keyData + `|` + keyHeader + `)?)*?` +
	keyLineEnd + `-----END [A-Z0-9 ]*PRIVATE KEY-----`)

const (
	// keyLineEnd ends one line of a key block and starts the next: what may
	// close a line (quotes, a concatenation), newlines raw or escaped, and
	// what may open the next line (indentation, quotes, a diff's prefix).
	keyLineEnd = `[\t "',+;]*(?:\r|\n|\\+[rn])+[\t "'+-]*`
	keyData    = `[A-Za-z0-9+/=]+`
	keyHeader  = `[A-Za-z][A-Za-z-]*: [A-Za-z0-9,+/=._-]*`
)

// KeyMarker says which PEM private key marker comes last in line: a BEGIN
// line (KeyBegins), an END line (KeyEnds), or neither (0).
func KeyMarker(line []byte) int {
	if !bytes.Contains(line, []byte("-----")) {
		return 0 // almost every line: one pass instead of one a marker
	}
	last, at := 0, -1
	for _, m := range []struct {
		word string
		kind int
	}{{"-----BEGIN ", KeyBegins}, {"-----END ", KeyEnds}} {
		for rest, off := line, 0; ; {
			i := bytes.Index(rest, []byte(m.word))
			if i < 0 {
				break
			}
			j := i + len(m.word)
			for j < len(rest) && (rest[j] == ' ' || isUpperOrDigit(rest[j])) {
				j++
			}
			// The label, a run of capitals, digits and spaces, ends in
			// "PRIVATE KEY" and the marker in five dashes.
			if bytes.HasSuffix(rest[i+len(m.word):j], []byte("PRIVATE KEY")) && bytes.HasPrefix(rest[j:], []byte("-----")) && off+i > at {
				last, at = m.kind, off+i
			}
			rest, off = rest[j:], off+j
		}
	}
	return last
}

// Kinds of KeyMarker.
const (
	KeyBegins = 1
	KeyEnds   = 2
)

func isUpperOrDigit(c byte) bool { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') }

// IsKeyData reports whether line (without its line ending) could be a line
// of a PEM key's base64 body, quoted or indented as privateKeyBlock allows.
func IsKeyData(line []byte) bool {
	// Trimmed by hand: bytes.TrimLeft and TrimRight make a set of their
	// cutset at each call, and this is asked of many lines.
	for len(line) > 0 && (line[0] == '\t' || line[0] == ' ' || line[0] == '"' || line[0] == '\'') {
		line = line[1:]
	}
	for n := len(line); n > 0; n = len(line) {
		switch line[n-1] {
		case '\t', ' ', '"', '\'', ',', '+', ';', '\r':
			line = line[:n-1]
			continue
		}
		break
	}
	if len(line) == 0 {
		return false
	}
	for _, c := range line {
		if !isUpperOrDigit(c) && !(c >= 'a' && c <= 'z') && c != '+' && c != '/' && c != '=' {
			return false
		}
	}
	return true
}

// shapes are the credential formats every output is scanned for.
var shapes = []shape{
	{name: "private_key", re: privateKeyBlock, lits: []string{"PRIVATE KEY-----"}},
	{name: "aws_access_key", re: lazyre.New(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b`), lits: []string{"AKIA", "ASIA", "AGPA", "AIDA", "AROA"}},
	{name: "aws_secret_key", re: lazyre.New(`(?i)(aws_secret_access_key["']?\s*[:=]\s*["']?)[A-Za-z0-9/+=]{40}`), keep: true, lits: []string{"aws_secret_access_key"}, fold: true},
	{name: "github_token", re: lazyre.New(`\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b`), lits: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}},
	{name: "gitlab_token", re: lazyre.New(`\bglpat-[A-Za-z0-9_-]{20,}\b`), lits: []string{"glpat-"}},
	{name: "slack_token", re: lazyre.New(`\bxox[abposr]-[A-Za-z0-9-]{10,}\b`), lits: []string{"xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-"}},
	{name: "google_api_key", re: lazyre.New(`\bAIza[0-9A-Za-z_-]{35}\b`), lits: []string{"AIza"}},
	{name: "api_key", re: lazyre.New(`\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}\b`), lits: []string{"sk-"}},
	{name: "jwt", re: lazyre.New(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`), lits: []string{"eyJ"}},
	{name: "bearer", re: lazyre.New(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/-]{16,}=*`), keep: true, lits: []string{"bearer"}, fold: true},
}

// mayMatch reports whether one of s's literals occurs in b (or in lower,
// b in lower case, for a shape matched without regard to case; lower is nil
// when b is not all ASCII, since Unicode case folding matches letters such
// as U+017F to ASCII ones that lower-casing does not produce).
func (s *shape) mayMatch(b, lower []byte) bool {
	in := b
	if s.fold {
		if lower == nil {
			return true
		}
		in = lower
	}
	for _, l := range s.lits {
		if bytes.Contains(in, []byte(l)) {
			return true
		}
	}
	return false
}

// Shapes masks well-known credential shapes in b. Text holding none of the
// literals every match of a shape holds is returned as it is after one
// pass over it (MayMask's), which is almost all text: the shapes' own
// tests, each a pass of its own, run only where one of them may match.
func Shapes(b []byte) []byte {
	if !(*Redactor)(nil).MayMask(b) {
		return b
	}
	return shapesAll(b)
}

// shapesAll is Shapes without its first pass: each shape's own test.
func shapesAll(b []byte) []byte {
	lower := asciiLower(b)
	for i := range shapes {
		s := &shapes[i]
		if !s.mayMatch(b, lower) || !s.re.Match(b) {
			continue
		}
		mask := []byte("[REDACTED:" + s.name + "]")
		if s.keep {
			b = s.re.ReplaceAll(b, append([]byte("${1}"), mask...))
		} else {
			b = s.re.ReplaceAll(b, mask)
		}
		lower = asciiLower(b)
	}
	return b
}

// asciiLower is b in lower case, or nil if b holds any non-ASCII byte.
func asciiLower(b []byte) []byte {
	for _, c := range b {
		if c >= 0x80 {
			return nil
		}
	}
	return bytes.ToLower(b)
}
