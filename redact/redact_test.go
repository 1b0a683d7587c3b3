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

func TestShapes(t *testing.T) {
	cases := map[string]string{
		"key AKIAIOSFODNN7EXAMPLE here":                                                                           "key [REDACTED:aws_access_key] here",
		"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY":                                        "aws_secret_access_key = [REDACTED:aws_secret_key]",
		"token ghp_" + strings.Repeat("a", 36):                                                                    "token [REDACTED:github_token]",
		"Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345":                                                  "Authorization: Bearer [REDACTED:bearer]",
		"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U":        "jwt [REDACTED:jwt]",
		"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\nafter": "[REDACTED:private_key]\nafter",
		"ANTHROPIC_API_KEY=sk-ant-api03-" + strings.Repeat("x", 30):                                               "ANTHROPIC_API_KEY=[REDACTED:api_key]",
		"nothing secret here: sk-short, AKIA123":                                                                  "nothing secret here: sk-short, AKIA123",
	}
	for in, want := range cases {
		got := string(Shapes([]byte(in)))
		if got != want {
			t.Errorf("%q\n got %q\nwant %q", in, got, want)
		}
		if again := string(Shapes([]byte(got))); again != got {
			t.Errorf("not idempotent: %q -> %q", got, again)
		}
	}
}

func TestStreamShapes(t *testing.T) {
	text := "line one\nkey AKIAIOSFODNN7EXAMPLE end\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAAAA\n-----END RSA PRIVATE KEY-----\ntail"
	want := string(Shapes([]byte(text)))
	for i := 0; i <= len(text); i++ {
		var out strings.Builder
		w := (*Redactor)(nil).NewWriter(&out)
		w.Write([]byte(text[:i]))
		w.Write([]byte(text[i:]))
		w.Close()
		if out.String() != want {
			t.Fatalf("cut at %d: %q", i, out.String())
		}
	}
}

// TestShapesPrefilter: the literal prefilter never hides a match the
// regular expressions alone would make, case folding included.
func TestShapesPrefilter(t *testing.T) {
	key := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123"
	for _, in := range []string{
		"AWS_SECRET_ACCESS_KEY=" + key,
		"Aws_Secret_Access_Key: " + key,
		"aws_\u017fecret_access_key=" + key, // U+017F folds to s
		"Authorization: BEARER abcdefghijklmnopqrstuvwxyz",
		"Authorization: bearer abcdefghijklmnopqrstuvwxyz and é",
	} {
		want := []byte(in)
		for _, s := range shapes {
			if s.keep {
				want = s.re.ReplaceAll(want, append([]byte("${1}"), []byte("[REDACTED:"+s.name+"]")...))
			} else {
				want = s.re.ReplaceAll(want, []byte("[REDACTED:"+s.name+"]"))
			}
		}
		if got := Shapes([]byte(in)); string(got) != string(want) || string(got) == in {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}
