package changeset

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/redact"
)

// TestLabelFactsKeptByBlob: what label learns of a file's content (size,
// binary, a credential's shape) is kept by its blob id, and another entry
// with that blob is labelled from it without its file being read; a file
// whose content is not its entry's blob (it changed since the diff) is
// labelled from what it holds and kept under no id.
func TestLabelFactsKeptByBlob(t *testing.T) {
	root := t.TempDir()
	secret := "key = AKIAIOSFODNN7EXAMPLE\n"
	os.WriteFile(filepath.Join(root, "a.txt"), []byte(secret), 0o644)
	os.WriteFile(filepath.Join(root, "bin"), []byte("x\x00y"), 0o644)
	pol := confine.DefaultPolicy()
	entry := func(p, blob string) *paddock.ChangeEntry {
		return &paddock.ChangeEntry{Path: p, Op: paddock.OpCreate, NewMode: "100644", NewBlob: blob}
	}
	a := entry("a.txt", BlobID([]byte(secret)))
	label(a, root, pol)
	if !slices.Contains(a.Risks, "secret") || a.Size != int64(len(secret)) {
		t.Fatalf("a.txt: %+v", a)
	}
	bin := entry("bin", BlobID([]byte("x\x00y")))
	label(bin, root, pol)
	if !bin.Binary || !slices.Contains(bin.Risks, "binary") {
		t.Fatalf("bin: %+v", bin)
	}
	// No file at copy.txt: its facts come from its blob's.
	c := entry("copy.txt", a.NewBlob)
	label(c, root, pol)
	if !slices.Contains(c.Risks, "secret") || c.Size != a.Size {
		t.Fatalf("copy.txt, labelled by its blob: %+v", c)
	}
	// A file that is not its entry's blob any more.
	os.WriteFile(filepath.Join(root, "b.txt"), []byte("plain\n"), 0o644)
	stale := BlobID([]byte("what the diff saw\n"))
	b := entry("b.txt", stale)
	label(b, root, pol)
	if slices.Contains(b.Risks, "secret") || b.Size != 6 {
		t.Fatalf("b.txt: %+v", b)
	}
	if _, ok := factsOf(stale); ok {
		t.Fatal("facts kept under a blob id the file's content does not have")
	}
	if _, ok := factsOf(BlobID([]byte("plain\n"))); ok {
		t.Fatal("facts kept under the content's id for an entry of another blob")
	}
}

// TestKeySpansFromFacts: the lines of a private key that label found in
// a blob are kept with its facts, and masking a hunk in the middle of
// that key (no marker in it) takes them from there: the file need not be
// read again, nor even be there.
func TestKeySpansFromFacts(t *testing.T) {
	root := t.TempDir()
	var body []string
	for i := range 24 {
		body = append(body, strings.Repeat(string(rune('A'+i)), 64))
	}
	content := "# deploy key\n-----BEGIN OPENSSH PRIVATE KEY-----\n" + strings.Join(body, "\n") + "\n-----END OPENSSH PRIVATE KEY-----\n"
	os.MkdirAll(filepath.Join(root, "deploy"), 0o755)
	os.WriteFile(filepath.Join(root, "deploy/id.pem"), []byte(content), 0o600)
	blob := BlobID([]byte(content))
	label(&paddock.ChangeEntry{Path: "deploy/id.pem", Op: paddock.OpCreate, NewMode: "100644", NewBlob: blob}, root, confine.DefaultPolicy())
	c, ok := factsOf(blob)
	if !ok || !slices.Equal(c.keys, []span{{3, 26}}) {
		t.Fatalf("facts of the key's blob: %+v, %t; want its lines 3 to 26 inside a key", c, ok)
	}
	plain := BlobID([]byte("no key here\n"))
	keepFacts(plain, contentFacts{size: 12})

	// A hunk at the key's lines 10-12 (its 8th to 10th lines of data).
	diff := filepath.Join(t.TempDir(), "diff")
	os.WriteFile(diff, []byte("diff --git a/deploy/id.pem b/deploy/id.pem\nindex 1111111..2222222 100644\n--- a/deploy/id.pem\n+++ b/deploy/id.pem\n"+
		"@@ -10,3 +10,3 @@\n "+body[7]+"\n-"+body[8]+"\n+"+strings.Repeat("z", 64)+"\n "+body[9]+"\n"), 0o600)
	mask := func(blobs map[string]string) string {
		var out strings.Builder
		keys := newKeySpanReader(t.TempDir(), blobs) // a workspace without the file
		defer keys.close()
		if _, err := maskDiff(redact.New(nil), diff, &out, keys.of); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	got := mask(map[string]string{"deploy/id.pem": blob})
	for _, line := range []string{body[7], body[8], body[9], strings.Repeat("z", 64)} {
		if strings.Contains(got, line) {
			t.Fatalf("a line of the key is shown:\n%s", got)
		}
	}
	if n := strings.Count(got, "[REDACTED:private_key]"); n != 4 {
		t.Fatalf("%d lines masked, want 4:\n%s", n, got)
	}
	// Facts that say the blob holds no key: its lines are shown as they are.
	if got := mask(map[string]string{"deploy/id.pem": plain}); !strings.Contains(got, " "+body[7]+"\n") {
		t.Fatalf("masked without a key in the blob:\n%s", got)
	}
}

// TestPlacedHunkWithoutAKey: a hunk of long letter-only lines (a key's
// look, but no marker) in a file that holds no key is not followed line by
// line, and what it holds is masked all the same: a credential's shape, a
// declared secret. A file of more keys than are kept with its facts is
// read again for them, and its key's lines are masked.
func TestPlacedHunkWithoutAKey(t *testing.T) {
	letters := strings.Repeat("abcdefghij", 6)
	content := letters + "\ntoken xoxb-1234567890-abcdefghij\npassword hunter2-very-secret\n" + letters + "\n"
	blob := BlobID([]byte(content))
	keepFacts(blob, contentFacts{size: int64(len(content))})
	diff := filepath.Join(t.TempDir(), "diff")
	os.WriteFile(diff, []byte("diff --git a/a.txt b/a.txt\nindex 1111111..2222222 100644\n--- a/a.txt\n+++ b/a.txt\n"+
		"@@ -1,2 +1,4 @@\n "+letters+"\n+token xoxb-1234567890-abcdefghij\n+password hunter2-very-secret\n "+letters+"\n"), 0o600)
	var out strings.Builder
	keys := newKeySpanReader(t.TempDir(), map[string]string{"a.txt": blob})
	defer keys.close()
	found, err := maskDiff(redact.New(map[string]string{"PW": "hunter2-very-secret"}), diff, &out, keys.of)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.Contains(got, "xoxb-1234567890") || strings.Contains(got, "hunter2") || !found["a.txt"].Masked {
		t.Fatalf("shown:\n%s", got)
	}
	if !strings.Contains(got, " "+letters+"\n") {
		t.Fatalf("the letters, which no key holds, were masked:\n%s", got)
	}

	// Many keys: none kept with the facts, the file read again.
	root := t.TempDir()
	var b strings.Builder
	for range maxKeptKeys + 1 {
		b.WriteString("-----BEGIN PRIVATE KEY-----\n" + strings.Repeat("K", 64) + "\n-----END PRIVATE KEY-----\n")
	}
	b.WriteString("-----BEGIN PRIVATE KEY-----\n" + strings.Repeat("M", 64) + "\n" + strings.Repeat("N", 64) + "\n-----END PRIVATE KEY-----\n")
	many := b.String()
	os.WriteFile(filepath.Join(root, "keys.pem"), []byte(many), 0o600)
	mblob := BlobID([]byte(many))
	label(&paddock.ChangeEntry{Path: "keys.pem", Op: paddock.OpCreate, NewMode: "100644", NewBlob: mblob}, root, confine.DefaultPolicy())
	if c, ok := factsOf(mblob); !ok || !c.manyKeys || c.keys != nil {
		t.Fatalf("facts of a file of %d keys: %+v %t", maxKeptKeys+2, c, ok)
	}
	last := 3*(maxKeptKeys+1) + 2 // the M line
	os.WriteFile(diff, []byte(fmt.Sprintf("diff --git a/keys.pem b/keys.pem\nindex 1111111..2222222 100644\n--- a/keys.pem\n+++ b/keys.pem\n"+
		"@@ -%d,2 +%d,2 @@\n %s\n-%s\n+%s\n", last, last, strings.Repeat("M", 64), strings.Repeat("O", 64), strings.Repeat("N", 64))), 0o600)
	out.Reset()
	mkeys := newKeySpanReader(root, map[string]string{"keys.pem": mblob})
	defer mkeys.close()
	if _, err := maskDiff(redact.New(nil), diff, &out, mkeys.of); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); strings.Contains(got, strings.Repeat("M", 64)) || strings.Contains(got, strings.Repeat("N", 64)) || strings.Contains(got, strings.Repeat("O", 64)) {
		t.Fatalf("a key's line shown:\n%s", got)
	}
}
