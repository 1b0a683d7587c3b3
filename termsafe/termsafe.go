// Package termsafe makes text that paddock did not write safe to show on a
// terminal: file names and file contents from an agent's workspace, event
// data, error messages.
//
// A terminal acts on some characters instead of showing them: ESC starts
// sequences that move the cursor, rewrite the window title (OSC), recolour
// or clear what was shown; CR and BS return over a line so that later text
// hides earlier text; C1 controls (U+0080–U+009F) are ESC sequences of
// their own on many terminals; and the bidirectional overrides and isolates
// (U+202A–U+202E, U+2066–U+2069) reorder what follows so that code reads
// differently from what it does ("Trojan Source", CVE-2021-42574). Text
// shown to a reviewer must show these characters, not obey them.
//
// Escaped characters are written as \xNN (a byte: C0, DEL, a byte that is
// not UTF-8) or \uNNNN (a C1 or bidirectional character). A backslash
// itself is left as it is, so that code reads as code; whether a name or a
// change holds a real control character is said by the change set's
// control_chars label, not by the look of the text.
//
// Guaranteed: no byte that a terminal interprets as a control, except tab,
// newline and a CR directly before a newline (in Text), leaves Escape,
// Field or Writer. Not guaranteed: that the text looks like its bytes —
// look-alike letters (confusables) are shown as they are and labelled
// elsewhere.
package termsafe

import (
	"encoding/binary"
	"fmt"
	"io"
	"unicode/utf8"
)

// isBidi reports the bidirectional embedding, override and isolate
// controls, which reorder the text that follows them.
func isBidi(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// Has reports whether b holds a character a terminal would act on: a C0
// control other than tab and newline (a CR directly before a newline is a
// line ending, not a control), DEL, a C1 control or a bidirectional
// override or isolate. Bytes that are not UTF-8 are not counted.
func Has(b []byte) bool {
	for i := 0; i < len(b); {
		// Eight bytes at a time while they are all printable ASCII: most
		// text, between its tabs and newlines.
		for i+8 <= len(b) {
			if x := binary.LittleEndian.Uint64(b[i:]); hasBelow(x, 0x20)|hasAbove(x, 0x7e) != 0 {
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		if c < utf8.RuneSelf {
			if c == 0x7f || (c < 0x20 && c != '\t' && c != '\n' && !(c == '\r' && i+1 < len(b) && b[i+1] == '\n')) {
				return true
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			if (r >= 0x80 && r <= 0x9f) || isBidi(r) {
				return true
			}
		}
		i += n
	}
	return false
}

// hasBelow and hasAbove are not 0 when a byte of x is below n, above n
// (n at most 127): exact, from "Bit Twiddling Hacks" (determine if a word
// has a byte less than n, greater than n).
func hasBelow(x, n uint64) uint64 { return (x - ones*n) & ^x & (ones * 0x80) }
func hasAbove(x, n uint64) uint64 { return ((x + ones*(127-n)) | x) & (ones * 0x80) }

const ones = ^uint64(0) / 255

// HasInName is Has for a name shown on one line: tab, newline and CR are
// controls there too.
func HasInName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 {
			return true
		}
	}
	return Has([]byte(s))
}

// Text escapes what a terminal would act on in multi-line text, keeping
// tab, newline and CRLF line endings.
func Text(s string) string { return string(escape(nil, []byte(s), false)) }

// Field escapes what a terminal would act on in a value shown on one line
// (a path, a name): tab, newline and CR are escaped too, so that a name
// cannot start a line of its own in a listing.
func Field(s string) string { return string(escape(nil, []byte(s), true)) }

// escape appends b to dst with every control escaped. oneLine escapes tab,
// newline and CR too; otherwise a CR is kept only directly before a newline
// (a CR at the end of b is followed by nothing: Writer holds one back).
func escape(dst, b []byte, oneLine bool) []byte {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case c == 0x7f || (c < 0x20 && (oneLine || (c != '\t' && c != '\n' && c != '\r'))):
				dst = fmt.Appendf(dst, `\x%02x`, c)
			case c == '\r' && !(i+1 < len(b) && b[i+1] == '\n'):
				dst = fmt.Appendf(dst, `\x%02x`, c)
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			dst = fmt.Appendf(dst, `\x%02x`, c)
		case (r >= 0x80 && r <= 0x9f) || isBidi(r):
			dst = fmt.Appendf(dst, `\u%04x`, r)
		default:
			dst = append(dst, b[i:i+n]...)
		}
		i += n
	}
	return dst
}

// Writer escapes a stream of multi-line text (as Text does) on its way to
// an io.Writer. A character split across writes is escaped whole: an
// unfinished UTF-8 sequence and a CR at the end of a write are held back
// until the next write or Flush.
type Writer struct {
	w       io.Writer
	pending []byte
	buf     []byte
}

// NewWriter returns a Writer that passes escaped text to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write escapes p and passes on all of it that can be decided now.
func (t *Writer) Write(p []byte) (int, error) {
	t.pending = append(t.pending, p...)
	cut := len(t.pending)
	// Hold back an unfinished UTF-8 sequence at the end.
	for k := 1; k <= utf8.UTFMax-1 && k <= cut; k++ {
		c := t.pending[cut-k]
		if c < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(t.pending[cut-k:]) {
				cut -= k
			}
			break
		}
	}
	// Hold back a CR whose next byte has not come yet.
	if cut > 0 && cut == len(t.pending) && t.pending[cut-1] == '\r' {
		cut--
	}
	if cut == 0 {
		return len(p), nil
	}
	t.buf = escape(t.buf[:0], t.pending[:cut], false)
	n := copy(t.pending, t.pending[cut:])
	t.pending = t.pending[:n]
	if _, err := t.w.Write(t.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush passes on what was held back: the text ended there.
func (t *Writer) Flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	t.buf = escape(t.buf[:0], t.pending, false)
	t.pending = t.pending[:0]
	_, err := t.w.Write(t.buf)
	return err
}

// JSON escapes, in encoded JSON, the characters encoding/json leaves as they
// are but a terminal acts on (DEL, C1 controls, bidirectional overrides), as
// \u escapes: the same JSON value, safe to print. b must be valid JSON,
// as an encoder writes it; these characters can only occur in its strings.
func JSON(b []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c == 0x7f {
				out = append(out, b[last:i]...)
				out = append(out, `\u007f`...)
				last = i + 1
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if (r >= 0x80 && r <= 0x9f) || isBidi(r) {
			out = append(out, b[last:i]...)
			out = fmt.Appendf(out, `\u%04x`, r)
			last = i + n
		}
		i += n
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// JSONWriter applies JSON to each write: use it under a json.Encoder,
// which writes one whole value per write.
type JSONWriter struct{ W io.Writer }

func (j JSONWriter) Write(p []byte) (int, error) {
	if _, err := j.W.Write(JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
