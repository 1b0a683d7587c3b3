package termsafe

import (
	"encoding/json"
	"strings"
	"testing"
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
