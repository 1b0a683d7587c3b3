// Package redact is the funnel every output passes through before paddock
// stores or returns it: tool results, command output, events, API answers
// and logs.
//
// It masks the values of the secrets a run declared, in the forms a command
// is likely to print them (as is, base64 in both alphabets with and without
// padding, URL-encoded, hex), and well-known credential shapes whoever they
// belong to (cloud keys, forge tokens, API keys, private key blocks, JWTs,
// bearer headers). Masking is idempotent. Writer does the same for a stream:
// a secret split across writes is still masked.
//
// # What it cannot do
//
// Redaction recognises a value; it cannot follow one. A command that
// receives a secret can transform it before printing or writing it
// (reversed, interleaved with other text, XORed, split across files, one
// character per line, compressed) and no masking of outputs finds it
// again. The guarantee is therefore about what paddock hands over, not
// what an agent's commands do with a secret once they hold it: a run gets
// a secret only if it declared it, only in its own commands'
// environment, and it is masked wherever paddock shows or stores it in
// the forms above. Keeping a credential out of the agent's reach entirely
// needs a proxy that injects it into requests instead (not here yet).
package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// MinLen is the shortest value masked: shorter ones would mask ordinary text.
// A secret shorter than that cannot be kept out of outputs, so it must not
// be handed to a run at all: callers refuse it (see Maskable) before they
// inject it anywhere.
const MinLen = 4

// Maskable reports whether a secret's value is long enough for New to mask.
func Maskable(value string) bool { return len(value) >= MinLen }

// Redactor masks a fixed set of secret values.
type Redactor struct {
	pairs []pair // longest first, so that a value inside another is masked as the outer one

	filterOnce sync.Once
	filter     *prefilter
}

type pair struct {
	find []byte
	mask []byte
}

// New returns a Redactor for the named values. A value that is not
// Maskable is left out: its callers have refused it before.
func New(secrets map[string]string) *Redactor {
	values := make(map[string][]string, len(secrets))
	for name, v := range secrets {
		values[name] = []string{v}
	}
	return NewValues(values)
}

// NewValues is New for secrets that have had more than one value (one
// changed while a run used it): each value of a name is masked as the
// name.
func NewValues(secrets map[string][]string) *Redactor {
	r := &Redactor{}
	for name, vs := range secrets {
		for _, v := range vs {
			r.add(name, v)
		}
	}
	// The longest forms first, so that a value inside another is masked
	// as the outer one.
	sort.Slice(r.pairs, func(i, j int) bool { return len(r.pairs[i].find) > len(r.pairs[j].find) })
	return r
}

// add masks value v, in every form New names, as name.
func (r *Redactor) add(name, v string) {
	if !Maskable(v) {
		return
	}
	mask := []byte("[REDACTED:" + name + "]")
	forms := map[string]bool{
		v: true,
		base64.StdEncoding.EncodeToString([]byte(v)):    true,
		base64.RawStdEncoding.EncodeToString([]byte(v)): true,
		base64.URLEncoding.EncodeToString([]byte(v)):    true,
		base64.RawURLEncoding.EncodeToString([]byte(v)): true,
		url.QueryEscape(v):                             true,
		url.PathEscape(v):                              true,
		hex.EncodeToString([]byte(v)):                  true,
		strings.ToUpper(hex.EncodeToString([]byte(v))): true,
	}
	for _, f := range shiftedBase64(v) {
		forms[f] = true
	}
	for _, f := range jsonForms(v) {
		forms[f] = true
	}
	forms[gitQuoted(v)] = true
	for f := range forms {
		r.pairs = append(r.pairs, pair{[]byte(f), mask})
	}
}

// jsonForms is how v reads inside a JSON string, as encoding/json writes
// it with and without its HTML escapes (& < > as \u0026 \u003c \u003e,
// quotes, backslashes and control characters escaped), and inside a JSON
// string that is itself in a JSON string: what a stored event or a
// bundle holds of a value that has such characters. A value JSON writes
// as it is has none.
func jsonForms(v string) []string {
	var out []string
	for _, html := range []bool{true, false} {
		once := jsonString(v, html)
		if once == v {
			continue
		}
		out = append(out, once, jsonString(once, html))
	}
	return out
}

// jsonString is s as encoding/json writes it inside a string, without the
// quotes.
func jsonString(s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	if enc.Encode(s) != nil {
		return s
	}
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}

// gitQuoted is v as git writes it inside a quoted path (core.quotePath,
// its default): a diff's headers name a file whose name holds a byte
// from 0x80 on, or a control character, so. Quotes and backslashes are
// escaped with a backslash, \a \b \t \n \v \f \r stand for their
// characters, and every other control character and byte from 0x7f on
// is three octal digits.
func gitQuoted(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 7 && c <= 13:
			b.WriteByte('\\')
			b.WriteByte("abtnvfr"[c-7])
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// MinTail is the shortest start of a declared secret's form MaskTail
// masks at the end of an output: shorter ones would mask ordinary text.
const MinTail = 4

// MaskTail masks the start of a declared secret's form that b ends with
// (MinTail bytes of it or more, short of the whole form, which Bytes
// masks): where an output was cut (a command's output kept to its limit,
// a stream that ended), the part of a secret before the cut would be
// shown in clear. The mask replaces the part.
func (r *Redactor) MaskTail(b []byte) []byte {
	if r == nil {
		return b
	}
	longest, mask := 0, []byte(nil)
	for _, p := range r.pairs {
		for k := min(len(p.find)-1, len(b)); k >= MinTail && k > longest; k-- {
			if bytes.HasSuffix(b, p.find[:k]) {
				longest, mask = k, p.mask
				break
			}
		}
	}
	if longest == 0 {
		return b
	}
	return append(b[:len(b)-longest:len(b)-longest], mask...)
}

// minShifted is the shortest base64 form of a secret inside other bytes
// that is masked: shorter ones would mask ordinary text.
const minShifted = 8

// shiftedBase64 is how v reads when it is base64-encoded inside other
// bytes (a "NAME=value" line piped to base64): at each of the three
// alignments a value can start at within base64's 3-byte groups, the
// characters that depend on v's bytes alone, in both alphabets.
func shiftedBase64(v string) []string {
	var out []string
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for k, skip := range []int{0, 2, 3} {
			b := append(make([]byte, k), v...)
			s := enc.EncodeToString(b)
			end := len(b) * 8 / 6 // the characters whose six bits are all in b
			if end-skip >= minShifted {
				out = append(out, s[skip:end])
			}
		}
	}
	return out
}

// Bytes returns b with every declared secret form and every credential shape
// masked. It is idempotent. A nil Redactor masks shapes only.
func (r *Redactor) Bytes(b []byte) []byte {
	return Shapes(r.Secrets(b))
}

// Declared reports whether r masks any declared secret (a nil Redactor, or
// one made of no values, masks credential shapes only).
func (r *Redactor) Declared() bool { return r != nil && len(r.pairs) > 0 }

// Secrets returns b with every declared secret form masked, and no
// credential shape: for data that is not text (a binary patch's encoding),
// where a shape would be a coincidence and masking it would corrupt it.
func (r *Redactor) Secrets(b []byte) []byte {
	if r == nil {
		return b
	}
	for _, p := range r.pairs {
		if bytes.Contains(b, p.find) {
			b = bytes.ReplaceAll(b, p.find, p.mask)
		}
	}
	return b
}

// MayMask reports whether Bytes could change b: a form of a declared
// secret, or the literal every match of a credential shape holds, occurs in
// it. It is a quick test, in one pass, for a large text that is almost
// always clean, before masking it piece by piece.
func (r *Redactor) MayMask(b []byte) bool {
	f := r.prefilter()
	// Letters that fold to ASCII ones under Unicode case folding (K, ſ):
	// a shape matched without regard to case may match through them.
	if bytes.Contains(b, []byte("\u212a")) || bytes.Contains(b, []byte("\u017f")) {
		return true
	}
	for i := 0; i+1 < len(b); i++ {
		k := uint16(b[i])<<8 | uint16(b[i+1])
		if f.bits[k>>6]&(1<<(k&63)) == 0 {
			continue
		}
		if i+2 < len(b) && !f.short {
			// Its second and third bytes too: a pair of letters that
			// starts a needle ("be", "sk") is common in text, a triple
			// far less.
			if k := uint16(b[i+1])<<8 | uint16(b[i+2]); f.next[k>>6]&(1<<(k&63)) == 0 {
				continue
			}
		}
		for _, n := range f.needles[k] {
			if len(b)-i >= len(n.find) && (bytes.Equal(b[i:i+len(n.find)], n.find) || (n.fold && bytes.EqualFold(b[i:i+len(n.find)], n.find))) {
				return true
			}
		}
	}
	return false
}

// prefilter indexes what MayMask looks for by its first two bytes.
type prefilter struct {
	bits    [1 << 10]uint64 // one bit for each pair of first bytes
	next    [1 << 10]uint64 // and for each pair of second and third bytes
	short   bool            // a needle of two bytes: next does not apply
	needles map[uint16][]needle
}

type needle struct {
	find []byte
	fold bool
}

func (r *Redactor) prefilter() *prefilter {
	if r == nil {
		return shapesOnly()
	}
	r.filterOnce.Do(func() { r.filter = newPrefilter(r.pairs) })
	return r.filter
}

var shapesOnly = sync.OnceValue(func() *prefilter { return newPrefilter(nil) })

func newPrefilter(pairs []pair) *prefilter {
	f := &prefilter{needles: map[uint16][]needle{}}
	add := func(n needle) {
		if len(n.find) < 2 {
			return
		}
		firsts := [][2]byte{{n.find[0], n.find[1]}}
		if n.fold {
			firsts = nil
			for _, a := range caseVariants(n.find[0]) {
				for _, b := range caseVariants(n.find[1]) {
					firsts = append(firsts, [2]byte{a, b})
				}
			}
		}
		for _, p := range firsts {
			k := uint16(p[0])<<8 | uint16(p[1])
			f.bits[k>>6] |= 1 << (k & 63)
			f.needles[k] = append(f.needles[k], n)
		}
		if len(n.find) < 3 {
			f.short = true
			return
		}
		seconds, thirds := []byte{n.find[1]}, []byte{n.find[2]}
		if n.fold {
			seconds, thirds = caseVariants(n.find[1]), caseVariants(n.find[2])
		}
		for _, a := range seconds {
			for _, b := range thirds {
				k := uint16(a)<<8 | uint16(b)
				f.next[k>>6] |= 1 << (k & 63)
			}
		}
	}
	for _, p := range pairs {
		add(needle{find: p.find})
	}
	for _, s := range shapes {
		for _, l := range s.lits {
			add(needle{find: []byte(l), fold: s.fold})
		}
	}
	return f
}

func caseVariants(c byte) []byte {
	switch {
	case c >= 'a' && c <= 'z':
		return []byte{c, c - 'a' + 'A'}
	case c >= 'A' && c <= 'Z':
		return []byte{c, c - 'A' + 'a'}
	}
	return []byte{c}
}

// String is Bytes for strings.
func (r *Redactor) String(s string) string { return string(r.Bytes([]byte(s))) }

// Strings masks each element.
func (r *Redactor) Strings(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = r.String(s)
	}
	return out
}
