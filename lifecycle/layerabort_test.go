package lifecycle_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/lifecycle"
)

// TestOverlayLookFailingRecordsNoRevert: a look whose keeping of a version
// fails with "not exist" records nothing: it must not stop half-way and
// record every file it did not reach as reverted to the base.
func TestOverlayLookFailingRecordsNoRevert(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	r := e.create(t, paddock.KindOverlay, "")
	sh(t, e.m, r.ID, "echo one > a.txt && echo zed > z.txt")
	lifecycle.SettleEffects(e.m, r.ID)
	dirs, _ := filepath.Glob(filepath.Join(e.state, "*", r.ID, "provenance"))
	if len(dirs) != 1 {
		t.Fatalf("provenance dirs %v", dirs)
	}
	// The next version of a.txt cannot be kept: its temporary file is a
	// link into a directory that does not exist (ENOENT on open).
	trap := filepath.Join(dirs[0], changeset.BlobID([]byte("boom\n"))+".tmp")
	if err := os.Symlink("/nonexistent-paddock-dir/f", trap); err != nil {
		t.Fatal(err)
	}
	sh(t, e.m, r.ID, "echo boom > a.txt")
	sh(t, e.m, r.ID, "true")
	lifecycle.SettleEffects(e.m, r.ID)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(dirs[0]), "provenance.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"z.txt":"base"`) {
		t.Fatalf("z.txt, untouched since the first command, recorded as reverted:\n%s", b)
	}
}
