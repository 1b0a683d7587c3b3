package lazyre

import (
	"testing"
)

func TestLazy(t *testing.T) {
	// An invalid expression costs nothing and says nothing until used.
	bad := New(`(`)
	re := New(`^a(b+)$`)
	if !re.MatchString("abb") || re.Match([]byte("ac")) || string(re.ReplaceAll([]byte("abb"), []byte("${1}"))) != "bb" {
		t.Fatal("New does not behave as regexp.MustCompile")
	}
	if loc := re.FindStringIndex("abbb"); len(loc) != 2 || loc[1] != 4 || re.String() != `^a(b+)$` {
		t.Fatalf("FindStringIndex = %v", loc)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("an invalid expression did not panic at its first use")
		}
	}()
	bad.MatchString("x")
}

func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		New(`(?i)\b(generated|written|created|authored)\s+(with|by|using)\b`)
	}
}
