// Package redact masks secret values in output before paddock stores or
// returns it. A secret is masked in the forms a command is likely to print
// it: as is, base64 (standard and URL alphabets, padded or not), URL-encoded
// and hex.
//
// This covers the values of the secrets a run declared. Well-known credential
// shapes (cloud keys, forge tokens, private keys) and streaming across chunk
// boundaries belong to the protocol's redaction funnel.
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

// Bytes returns b with every secret form masked. It is idempotent: masked
// output holds no form of a secret, so masking it again changes nothing.
func (r *Redactor) Bytes(b []byte) []byte {
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
