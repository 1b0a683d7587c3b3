package changeset_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/redact"
)

// BenchmarkMaskDiff masks a 64 MiB diff of ordinary code (1,000 files of
// 60-character lines), with two declared secrets: the cost masking adds to
// a change set, against copying the diff as it is.
func BenchmarkMaskDiff(b *testing.B) {
	src := filepath.Join(b.TempDir(), "diff")
	f, _ := os.Create(src)
	w := bufio.NewWriter(f)
	for file := 0; w.Size() >= 0 && file < 1000; file++ {
		fmt.Fprintf(w, "diff --git a/pkg/file%04d.go b/pkg/file%04d.go\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/pkg/file%04d.go\n@@ -0,0 +1,1100 @@\n", file, file, file)
		for line := 0; line < 1100; line++ {
			fmt.Fprintf(w, "+\tx := computeSomething(%06d, \"a string literal\") // comment\n", line)
		}
	}
	w.Flush()
	f.Close()
	fi, _ := os.Stat(src)
	red := redact.New(map[string]string{"API_TOKEN": "tok-5e3f9a1c-very-secret", "DB_PASSWORD": "correct horse battery"})
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(fi.Size())
		for b.Loop() {
			in, _ := os.Open(src)
			io.Copy(io.Discard, in)
			in.Close()
		}
	})
	b.Run("mask", func(b *testing.B) {
		b.SetBytes(fi.Size())
		for b.Loop() {
			if _, err := changeset.MaskDiff(red, src, io.Discard, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
