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

func TestStreamSplitsAnywhere(t *testing.T) {
	const v = "s3cr3t-token-value"
	r := New(map[string]string{"T": v})
	text := "start " + v + " middle " + base64.StdEncoding.EncodeToString([]byte(v)) + " end " + v
	want := r.String(text)
	// Every way of cutting the text into two or three writes.
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j += 7 {
			var out strings.Builder
			w := r.NewWriter(&out)
			w.Write([]byte(text[:i]))
			w.Write([]byte(text[i:j]))
			w.Write([]byte(text[j:]))
			w.Close()
			if out.String() != want {
				t.Fatalf("cut at %d and %d: %q", i, j, out.String())
			}
		}
	}
	// Byte by byte.
	var out strings.Builder
	w := r.NewWriter(&out)
	for i := 0; i < len(text); i++ {
		w.Write([]byte{text[i]})
	}
	w.Close()
	if out.String() != want {
		t.Fatalf("byte by byte: %q", out.String())
	}
}
