package changeset

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/redact"
)

// TestCleanDiffUnmasked holds cleanCheck to what it promises: a diff it
// and scan's plan let through (Watch keeps it as git wrote it) is one
// masking writes unchanged, and in which it finds nothing. Random diffs
// of lines that masking acts on (credential shapes, declared secrets, key
// markers, key data, characters a terminal acts on, long hunk header
// text, binary patches) and lines it does not; each such line alone must
// make the diff dirty, and the clean ones must come out of maskDiff the
// same.
func TestCleanDiffUnmasked(t *testing.T) {
	t.Parallel()
	const declared = "s3cr3t-Declared-Value-42"
	keyData := strings.Repeat("MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB", 1)
	// Lines masking acts on, and what acts on them.
	acted := []string{
		"aws = AKIAIOSFODNN7EXAMPLE",
		"token: ghp_" + strings.Repeat("a1B2", 9),
		"password = " + declared,
		"-----BEGIN RSA PRIVATE KEY-----",
		"-----END RSA PRIVATE KEY-----",
		"color \x1b[31mred",
		"a bell \x07 rings",
		"bidi \u202e reversed",
	}
	plain := []string{
		"package main", "func main() {", "\tx := 1 + 2", "}", "// a comment with -- dashes", "",
		"return nil", "s := \"quoted\"", "x := y[1:2]", "# heading", "| a | b |", "-----",
		"BEGIN and END without dashes", "Kelvin K in text",
	}
	red := redact.New(map[string]string{"TOKEN": declared})
	secretPatch := binaryPatch(t, append([]byte{0, 1, 2}, declared+"\x00"...))
	long := strings.Repeat("x", maxLine+10) + " AKIAIOSFODNN7EXAMPLE"
	rng := rand.New(rand.NewPCG(7, 35))
	root := t.TempDir()
	var clean, dirty int
	for n := range 3000 {
		var d strings.Builder
		keyed := map[string]bool{} // files whose new content holds a key
		files := 1 + rng.IntN(3)
		for f := range files {
			p := fmt.Sprintf("dir%d/file%d.txt", n%7, f)
			fmt.Fprintf(&d, "diff --git a/%s b/%s\nindex 1111111..2222222 100644\n--- a/%s\n+++ b/%s\n", p, p, p, p)
			switch rng.IntN(80) {
			case 0:
				d.WriteString("GIT binary patch\nliteral 5\nMcmZ?d00001\n\nliteral 0\nHcmV?d00001\n\n")
				continue
			case 1:
				d.WriteString(secretPatch)
				continue
			}
			keyed[p] = rng.IntN(4) == 0
			for range 1 + rng.IntN(3) {
				text := ""
				switch rng.IntN(12) {
				case 0:
					text = " " + keyData[:48] // as long as key data
				case 1:
					text = " func f()"
				}
				fmt.Fprintf(&d, "@@ -1,3 +1,3 @@%s\n", text)
				for range 1 + rng.IntN(6) {
					line := plain[rng.IntN(len(plain))]
					switch k := rng.IntN(150); {
					case k < len(acted):
						line = acted[k]
					case k < len(acted)+3:
						line = keyData // key data: placed in its new file
					}
					fmt.Fprintf(&d, "%c%s\n", " +-"[rng.IntN(3)], line)
				}
				if rng.IntN(10) == 0 {
					d.WriteString("\\ No newline at end of file\n")
				}
				if n%500 == 0 {
					fmt.Fprintf(&d, "+%s\n", long) // masked as a stream
				}
			}
		}
		diff := []byte(d.String())
		keySpans := func(path string) []span {
			if keyed[path] {
				return []span{{1, 100}}
			}
			return nil
		}
		k := &cleanCheck{red: red}
		p, err := scanFrom(red, bytes.NewReader(diff), k)
		if err != nil {
			t.Fatal(err)
		}
		ok := !k.dirty && p.empty()
		for _, path := range p.placed {
			ok = ok && len(keySpans(path)) == 0
		}
		src := filepath.Join(root, "diff")
		if err := os.WriteFile(src, diff, 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		found, err := maskDiff(red, src, &out, keySpans)
		if err != nil {
			t.Fatal(err)
		}
		changed := !bytes.Equal(out.Bytes(), diff)
		for _, f := range found {
			changed = changed || f.Masked || f.Control
		}
		if ok && changed {
			t.Fatalf("diff %d taken for clean, but masking changes it or finds in it:\n%s\nmasked:\n%s", n, diff, out.Bytes())
		}
		if ok {
			clean++
		} else {
			dirty++
		}
	}
	// Both kinds, many of each: a check that lets nothing through, or
	// everything, is not tested by this.
	if clean < 300 || dirty < 300 {
		t.Fatalf("%d clean and %d dirty diffs: the generator does not test both", clean, dirty)
	}
	t.Logf("%d clean, %d dirty", clean, dirty)
}

// binaryPatch is git's binary patch (from its "GIT binary patch" line)
// of a file made to hold content.
func binaryPatch(t *testing.T, content []byte) string {
	t.Helper()
	repo := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Skipf("git: %v %s", err, out)
		}
		return string(out)
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(repo, "bin.dat"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "-N", "bin.dat")
	diff := git("diff", "--binary")
	i := strings.Index(diff, "GIT binary patch")
	if i < 0 {
		t.Fatalf("no binary patch in %q", diff)
	}
	return diff[i:]
}

// TestKeySpansOfAChangedFile: the key spans of a placed file read from
// the workspace count only if the file still hashes to the blob git
// hashed; a file rewritten since (its key's markers taken out while its
// key's lines stay) has every line taken for one inside a key, so a
// hunk of the blob's key is masked rather than shown.
func TestKeySpansOfAChangedFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	now := "line one\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\nline three\n"
	if err := os.WriteFile(filepath.Join(root, "k.txt"), []byte(now), 0o644); err != nil {
		t.Fatal(err)
	}
	hashed := "-----BEGIN RSA PRIVATE KEY-----\n" + now + "-----END RSA PRIVATE KEY-----\n"
	for _, c := range []struct {
		blob string
		want []span
	}{
		{BlobID([]byte(now)), nil},          // as hashed: no key in it
		{BlobID([]byte(hashed)), everyLine}, // rewritten since it was hashed
		{"not-an-id", everyLine},
	} {
		keys := newKeySpanReader(root, map[string]string{"k.txt": c.blob})
		got := keys.of("k.txt")
		keys.close()
		if !slices.Equal(got, c.want) {
			t.Errorf("blob %s: spans %v, want %v", c.blob, got, c.want)
		}
	}
}
