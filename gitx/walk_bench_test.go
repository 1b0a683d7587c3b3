package gitx

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock/internal/fsat"
	"golang.org/x/sys/unix"
)

// BenchmarkWalk: a whole tree's walk (12,000 files in 600 directories) on
// one goroutine and on the pool of walkers (see fsat.Walkers).
func BenchmarkWalk(b *testing.B) {
	dir := b.TempDir()
	for i := range 12000 {
		d := filepath.Join(dir, fmt.Sprintf("mod%02d/pkg%02d", i/400, (i/20)%20))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.go", i)), []byte("x"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	bt := newBaseTree(map[string]baseEntry{})
	for name, par := range map[string]bool{"one": false, "pool": true} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				root, err := fsat.OpenDir(dir)
				if err != nil {
					b.Fatal(err)
				}
				t := &treeReader{root: root, base: bt, ownGit: true, keptLinks: map[string]bool{}}
				walk := func() error { return t.walk("") }
				if par {
					walk = t.walkAll
				}
				if err := walk(); err != nil {
					b.Fatal(err)
				}
				if len(t.files) != 12000 {
					b.Fatal(len(t.files))
				}
				unix.Close(root)
			}
		})
	}
}
