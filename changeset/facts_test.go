package changeset

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
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
