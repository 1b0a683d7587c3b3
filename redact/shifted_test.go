package redact

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestShiftedBase64: a secret base64-encoded inside other bytes, at any of
// the three alignments and with any bytes after it, is masked, in both
// alphabets.
func TestShiftedBase64(t *testing.T) {
	secret := "pdk-s3cr3t/Value+42"
	r := New(map[string]string{"TOKEN": secret})
	for _, prefix := range []string{"", "A", "AB", "ABC", "API_TOKEN=", "x:"} {
		for _, suffix := range []string{"", "\n", "!!", "; more"} {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
				line := enc.EncodeToString([]byte(prefix + secret + suffix))
				got := string(r.Bytes([]byte(line)))
				if !strings.Contains(got, "[REDACTED:TOKEN]") {
					t.Errorf("%q+secret+%q encoded as %q is not masked", prefix, suffix, line)
				}
			}
		}
	}
	if got := string(r.Bytes([]byte("ordinary text that is not base64 at all"))); strings.Contains(got, "REDACTED") {
		t.Fatalf("masked ordinary text: %q", got)
	}
}
