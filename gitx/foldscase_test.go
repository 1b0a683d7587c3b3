package gitx

import (
	"os"
	"testing"
)

// TestFoldsCaseHere: this machine's temporary directory tells a name from
// the same name in capitals (a file system that folds case could not be
// mounted here to test the other answer: no vfat, no casefold).
func TestFoldsCaseHere(t *testing.T) {
	dir := t.TempDir()
	folds, err := foldsCase(dir)
	if err != nil {
		t.Fatal(err)
	}
	if folds {
		t.Fatalf("%s folds case, says the probe", dir)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the probe left %v", ents)
	}
}
