package redact

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
)

func TestForms(t *testing.T) {
	const v = "s3cr3t/value+with=chars?&"
	r := New(map[string]string{"TOKEN": v, "SHORT": "ab"})
	for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)),
		url.QueryEscape(v), hex.EncodeToString([]byte(v))} {
		out := r.String("before " + form + " after")
		if strings.Contains(out, form) || out != "before [REDACTED:TOKEN] after" {
			t.Errorf("%q -> %q", form, out)
		}
	}
	if out := r.String("ab cd"); out != "ab cd" {
		t.Errorf("a value shorter than MinLen was masked: %q", out)
	}
	once := r.String("x " + v + " y " + v)
	if r.String(once) != once {
		t.Error("not idempotent")
	}
}
