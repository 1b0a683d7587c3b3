package termsafe

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// cases: text, Text of it, whether Has reports it.
var cases = []struct {
	in, text string
	has      bool
}{
	{"plain text\twith tab\n", "plain text\twith tab\n", false},
	{"crlf line\r\nnext\r\n", "crlf line\r\nnext\r\n", false},
	{"\x1b[2J\x1b[Hcleared", `\x1b[2J\x1b[Hcleared`, true},
	{"\x1b]0;innocent title\x07", `\x1b]0;innocent title\x07`, true},
	{"rm -rf /\rls -la  ", `rm -rf /\x0dls -la  `, true},
	{"evil\x08\x08\x08good", `evil\x08\x08\x08good`, true},
	{"trailing cr\r", `trailing cr\x0d`, true},
	{"del\x7f", `del\x7f`, true},
	{"c1 \u009b31m csi", `c1 \u009b31m csi`, true},
	{"access = \"user\u202e \u2066// admin\u2069\u2066\"", `access = "user\u202e \u2066// admin\u2069\u2066"`, true},
	{"ümlaut, 日本語, emoji 🙂", "ümlaut, 日本語, emoji 🙂", false},
	{"latin-1 \xe9t\xe9", `latin-1 \xe9t\xe9`, false},
	{`a literal \x1b stays`, `a literal \x1b stays`, false},
}

func TestText(t *testing.T) {
	for _, c := range cases {
		if got := Text(c.in); got != c.text {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.text)
		}
		if got := Has([]byte(c.in)); got != c.has {
			t.Errorf("Has(%q) = %t", c.in, got)
		}
		if Has([]byte(Text(c.in))) {
			t.Errorf("Text(%q) still has controls", c.in)
		}
	}
}

func TestField(t *testing.T) {
	for in, want := range map[string]string{
		"dir/file.go":            "dir/file.go",
		"a\nmodify\t100644\tb":   `a\x0amodify\x09100644\x09b`,
		"x\x1b]0;t\x07\u202e.sh": `x\x1b]0;t\x07\u202e.sh`,
	} {
		if got := Field(in); got != want {
			t.Errorf("Field(%q) = %q, want %q", in, got, want)
		}
	}
	if !HasInName("a\tb") || !HasInName("a\u2066b") || HasInName("plain/ü.txt") {
		t.Error("HasInName")
	}
}

// TestWriterSplitsAnywhere: a stream cut anywhere escapes as the whole does.
func TestWriterSplitsAnywhere(t *testing.T) {
	var all strings.Builder
	for _, c := range cases {
		all.WriteString(c.in)
	}
	text := all.String()
	want := Text(text)
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j += 5 {
			var out strings.Builder
			w := NewWriter(&out)
			w.Write([]byte(text[:i]))
			w.Write([]byte(text[i:j]))
			w.Write([]byte(text[j:]))
			w.Flush()
			if out.String() != want {
				t.Fatalf("cut at %d and %d:\n got %q\nwant %q", i, j, out.String(), want)
			}
		}
	}
}

func TestJSON(t *testing.T) {
	v := map[string]string{"path": "a\u202eb\u009b\x7fc\x1b", "plain": "ü"}
	b, _ := json.Marshal(v)
	safe := JSON(b)
	var back map[string]string
	if err := json.Unmarshal(safe, &back); err != nil || back["path"] != v["path"] || back["plain"] != "ü" {
		t.Fatalf("%s: %v %q", safe, err, back)
	}
	if Has(safe) {
		t.Fatalf("%q still has controls", safe)
	}
	if string(JSON([]byte(`{"a":"b"}`))) != `{"a":"b"}` {
		t.Fatal("changed plain JSON")
	}
}

// hasOneByOne is Has as it was before it read eight bytes at a time.
func hasOneByOne(b []byte) bool {
	for i := 0; i < len(b); {
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

// TestHasWordAtATime: Has, reading printable ASCII eight bytes at a time,
// answers as it did one byte at a time, wherever the one character that
// counts falls among the eight, and at every edge of the ASCII range.
func TestHasWordAtATime(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	special := []string{"\t", "\n", "\r", "\r\n", "\x7f", "\x1b", "\x00", "\x1f", " ", "~", "\x80", "\xff", "\xc2\x85", "\xc2\xa0", "é", "\u202e", "\u2066", "\u2069x", "\xe2\x80"}
	for i := range 200000 {
		var b []byte
		n := rng.IntN(40)
		for range n {
			if rng.IntN(12) == 0 {
				b = append(b, special[rng.IntN(len(special))]...)
			} else {
				b = append(b, byte(0x20+rng.IntN(0x5f)))
			}
		}
		if got, want := Has(b), hasOneByOne(b); got != want {
			t.Fatalf("case %d: Has(%q) = %v, one byte at a time %v", i, b, got, want)
		}
	}
	for c := range 256 {
		for at := range 17 {
			b := []byte(strings.Repeat("a", 16))
			b = append(b[:at], append([]byte{byte(c)}, b[at:]...)...)
			if got, want := Has(b), hasOneByOne(b); got != want {
				t.Fatalf("byte %#x at %d: Has = %v, one byte at a time %v", c, at, got, want)
			}
		}
	}
}
