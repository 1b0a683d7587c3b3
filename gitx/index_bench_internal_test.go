package gitx

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkWriteIndex: base's whole index of 12,000 files with 1,000 of
// them changed, as a clone's change set writes it.
func BenchmarkWriteIndex(b *testing.B) {
	entries := map[string]baseEntry{}
	for i := range 12000 {
		entries[fmt.Sprintf("mod%02d/pkg%02d/file%05d.go", i/400, (i/20)%20, i)] = baseEntry{"100644", fmt.Sprintf("%040x", i)}
	}
	bt := newBaseTree(entries)
	var info bytes.Buffer
	for k := range 1000 {
		i := k * 12
		indexLine(&info, "100644", strings.Repeat("ab", 20), fmt.Sprintf("mod%02d/pkg%02d/file%05d.go", i/400, (i/20)%20, i))
	}
	file := filepath.Join(b.TempDir(), "index")
	bt.sorted()
	for b.Loop() {
		if ok, err := writeIndex(file, formatSHA1, bt, info.Bytes()); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
