package confine

import "testing"

// The policy is checked for every path a tool writes and every entry a
// recursive delete or a change set holds: it must stay cheap for ASCII.
func BenchmarkMatchASCII(b *testing.B) {
	p := DefaultPolicy()
	for b.Loop() {
		p.Match("src/internal/pkg/deep/file_test.go")
	}
}

func BenchmarkMatchUnicode(b *testing.B) {
	p := DefaultPolicy()
	for b.Loop() {
		p.Match("src/caf\u00e9/\u043f\u0440\u0438\u0432\u0435\u0442.go")
	}
}
