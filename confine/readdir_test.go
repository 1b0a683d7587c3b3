package confine

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReadDir: the listing is os.ReadDir's, sorted, types from the
// directory; Info stats the entry itself, relative to the directory, even
// when a link has since replaced a directory above it.
func TestReadDir(t *testing.T) {
	base := t.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{ws + "/d/sub", outside + "/d"} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(ws+"/d/b.txt", []byte("12345"), 0o644)
	os.WriteFile(ws+"/d/a.txt", []byte("1"), 0o644)
	os.Symlink("b.txt", ws+"/d/link")
	os.WriteFile(outside+"/d/b.txt", []byte("a longer file outside"), 0o644)
	r, err := Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d, err := r.Sub(Trusted("d"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	entries, err := d.ReadDir()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"a.txt", "b.txt", "link", "sub"}) {
		t.Fatalf("names = %q", names)
	}
	if !entries[3].IsDir() || entries[2].Type()&os.ModeSymlink == 0 || !entries[1].Type().IsRegular() {
		t.Fatalf("types: %v %v %v", entries[1].Type(), entries[2].Type(), entries[3].Type())
	}
	// The directory moved away and a link to outside put in its place:
	// the entries still describe what the open directory holds.
	os.Rename(ws+"/d", ws+"/moved")
	os.Symlink(outside+"/d", ws+"/d")
	fi, err := entries[1].Info()
	if err != nil || fi.Size() != 5 {
		t.Fatalf("Info of b.txt = %v, %v; want the workspace's 5 bytes", fi, err)
	}
	if fi, err := entries[2].Info(); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("Info of the link = %v, %v; want the link itself", fi, err)
	}
}
