package manifest

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/corpus/*/want.json")

// dirTree is a Tree over a directory on disk, as a revision would hold it.
type dirTree struct {
	root  string
	files []string
	reads []string
}

func newDirTree(t *testing.T, root string) *dirTree {
	d := &dirTree{root: root}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel != "want.json" {
			d.files = append(d.files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *dirTree) Files() []string { return d.files }

func (d *dirTree) ReadFile(p string) ([]byte, bool) {
	d.reads = append(d.reads, p)
	b, err := os.ReadFile(filepath.Join(d.root, filepath.FromSlash(p)))
	return b, err == nil
}

// TestGolden: each layout under testdata/corpus yields its want.json;
// go test ./manifest -update rewrites them (read the diff before committing).
func TestGolden(t *testing.T) {
	dirs, err := os.ReadDir(filepath.Join("testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range dirs {
		t.Run(e.Name(), func(t *testing.T) {
			dir := filepath.Join("testdata", "corpus", e.Name())
			m := DetectTree(newDirTree(t, dir))
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(m); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			want := filepath.Join(dir, "want.json")
			if *update {
				if err := os.WriteFile(want, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			w, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("%v (go test ./manifest -update writes it)", err)
			}
			if !bytes.Equal(got, w) {
				t.Errorf("the manifest differs from %s (go test ./manifest -update, then read the diff):\n%s", want, got)
			}
			// Every staged file is the base's content, and a check that
			// names it names it where it is staged.
			for name, content := range m.Files {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || !bytes.Equal(b, content) {
					t.Errorf("staged %s is not the base's", name)
				}
			}
		})
	}
}
