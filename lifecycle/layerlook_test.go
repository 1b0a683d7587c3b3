package lifecycle_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/lifecycle"
)

// TestOverlayLookWithKeptListings: an overlay run's looks after its
// commands, with its upper layer's listings kept (judged still at once),
// blame each change on the command that made it: a file appended to in a
// directory listed before, a name made in it, one made in a directory
// made opaque (removed and made again), and a file of the base removed
// (a whiteout in a directory listed before).
func TestOverlayLookWithKeptListings(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	lifecycle.JudgeLayersAhead(t, time.Hour)
	ctx := context.Background()
	r := e.create(t, paddock.KindOverlay, "")
	sh(t, e.m, r.ID, "mkdir -p d/e && echo one > d/e/f.txt")
	// A tick of the file system's clock between each command and the
	// look before it (layerStill keeps them apart outside tests).
	time.Sleep(30 * time.Millisecond)
	sh(t, e.m, r.ID, "echo two >> d/e/f.txt")
	time.Sleep(30 * time.Millisecond)
	sh(t, e.m, r.ID, "echo new > d/e/h.txt && rm README.md")
	time.Sleep(30 * time.Millisecond)
	sh(t, e.m, r.ID, "rm -r cmd && mkdir cmd && echo fresh > cmd/main.go")
	b, err := e.m.Provenance.Blame(ctx, r.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	by := map[string][]string{}
	for _, h := range b.Hunks {
		for _, q := range h.Seqs {
			by[h.Path] = append(by[h.Path], b.Sources[q].What)
		}
	}
	for path, want := range map[string][]string{
		"d/e/f.txt":   {"echo one", "echo two"},
		"d/e/h.txt":   {"echo new"},
		"cmd/main.go": {"echo fresh"},
		"README.md":   {"rm README.md"},
	} {
		got := by[path]
		if len(got) != len(want) {
			t.Fatalf("%s blamed on %q, want %d commands (%q); all: %+v", path, got, len(want), want, by)
		}
		for i, w := range want {
			if !strings.Contains(got[i], w) {
				t.Fatalf("%s blamed on %q, want %q", path, got, want)
			}
		}
	}
}

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
