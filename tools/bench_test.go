package tools

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/confine"
)

// BenchmarkGrep searches a 2,000-file tree; bench/tools compares the same
// against ripgrep.
func BenchmarkGrep(b *testing.B) {
	dir := b.TempDir()
	for i := 0; i < 2000; i++ {
		p := filepath.Join(dir, fmt.Sprintf("m%02d/p%02d/f%05d.go", i/400, (i/20)%20, i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		body := strings.Repeat("alpha beta gamma delta return func struct value\n", 60+i%100)
		if i%500 == 7 {
			body += "needle_token_xyz\n"
		}
		os.WriteFile(p, []byte(body), 0o644)
	}
	root, err := confine.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	args, _ := json.Marshal(map[string]any{"pattern": "needle_token_xyz", "literal": true})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, _, _ := registry["grep"].Call(b.Context(), root, args)
		if len(res.(*GrepResult).Matches) != 4 {
			b.Fatalf("%+v", res)
		}
	}
}
