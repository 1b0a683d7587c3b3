package gitx

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestBaseHas: a checkout tells which paths base has only where it can:
// not for a directory (git must list what is under it), nor under an
// empty directory (a submodule's checkout holds nothing).
func TestBaseHas(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644)
	os.MkdirAll(filepath.Join(dir, "d"), 0o755)
	os.WriteFile(filepath.Join(dir, "d", "x"), []byte("x"), 0o644)
	os.Symlink("a", filepath.Join(dir, "link"))
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	for _, tc := range []struct {
		paths []string
		want  map[string]bool
		known bool
	}{
		{[]string{"a", "new", "d/x", "link", "d/new/y", "a/b"}, map[string]bool{"a": false, "d/x": false, "link": false}, true},
		{[]string{"a", "d"}, map[string]bool{}, false},
		{[]string{"sub/x"}, map[string]bool{}, false},
		{[]string{"sub"}, map[string]bool{}, false},
	} {
		in, known := baseHas(dir, tc.paths)
		if known != tc.known || !reflect.DeepEqual(in, tc.want) {
			t.Errorf("%v: %v %t, want %v %t", tc.paths, in, known, tc.want, tc.known)
		}
	}
	if _, known := baseHas("", []string{"a"}); known {
		t.Error("no directory, yet known")
	}
}
