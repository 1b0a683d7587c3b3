package lifecycle_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
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
