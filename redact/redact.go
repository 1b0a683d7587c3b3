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
package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"sort"
)

// MinLen is the shortest value masked: shorter ones would mask ordinary text.
const MinLen = 4

// Redactor masks a fixed set of secret values.
type Redactor struct {
	pairs []pair // longest first, so that a value inside another is masked as the outer one
}

type pair struct {
	find []byte
	mask []byte
}

// New returns a Redactor for the named values.
func New(secrets map[string]string) *Redactor {
	r := &Redactor{}
	for name, v := range secrets {
		if len(v) < MinLen {
			continue
		}
		mask := []byte("[REDACTED:" + name + "]")
		forms := map[string]bool{
			v: true,
			base64.StdEncoding.EncodeToString([]byte(v)):    true,
			base64.RawStdEncoding.EncodeToString([]byte(v)): true,
			base64.URLEncoding.EncodeToString([]byte(v)):    true,
			base64.RawURLEncoding.EncodeToString([]byte(v)): true,
			url.QueryEscape(v):            true,
			url.PathEscape(v):             true,
			hex.EncodeToString([]byte(v)): true,
		}
		for f := range forms {
			r.pairs = append(r.pairs, pair{[]byte(f), mask})
		}
	}
	sort.Slice(r.pairs, func(i, j int) bool { return len(r.pairs[i].find) > len(r.pairs[j].find) })
	return r
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
