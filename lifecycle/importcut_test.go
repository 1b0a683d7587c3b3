package lifecycle_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/lifecycle"
)

// TestImportCutShortIsRolledBack: an import a crash cut (kill -9 1.1 s into
// `paddock import` left a half-restored run, never submitted, never rolled
// back: issue #29 item 9) is rejected by the next start's recovery, its
// workspace gone as a rejected run's goes, and the project untouched; a
// mark whose run was never made is removed. An import is whole or leaves
// nothing.
func TestImportCutShortIsRolledBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	digest, lines := gittest.TreeDigest(t, e.repo)
	// The run the import had made, half restored, when the daemon died.
	r := e.create(t, paddock.KindClone, "")
	if _, err := e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(`{"path":"half.txt","content":"half of a bundle\n"}`)); err != nil {
		t.Fatal(err)
	}
	if err := lifecycle.ImportMark(e.m, r.ID); err != nil {
		t.Fatal(err)
	}
	// A mark whose run the crash came before.
	if err := os.MkdirAll(filepath.Join(e.state, "artifacts", "r-nevermade"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := lifecycle.ImportMark(e.m, "r-nevermade"); err != nil {
		t.Fatal(err)
	}
	found := e.reopen(t)
	var rolled, removed bool
	for _, f := range found {
		rolled = rolled || f.RunID == r.ID && f.Issue == "an import cut short" && f.Action == paddock.ActionRolledBack
		removed = removed || f.RunID == "r-nevermade" && f.Issue == "an import cut short"
	}
	if !rolled || !removed {
		t.Fatalf("the cut import's run was not rolled back, or the lone mark not removed: %+v", found)
	}
	got, err := e.m.Run(ctx, r.ID)
	if err != nil || (got.State() != paddock.StateRejected && got.State() != paddock.StateCleaned) {
		t.Fatalf("the cut import's run is %v (%v)", got.State(), err)
	}
	if _, err := os.Stat(filepath.Join(e.state, "artifacts", r.ID, "importing")); !os.IsNotExist(err) {
		t.Fatalf("the import's mark stays: %v", err)
	}
	if again := e.reopen(t); len(again) != 0 {
		for _, f := range again {
			if f.Issue == "an import cut short" {
				t.Fatalf("a second start finds the import again: %+v", f)
			}
		}
	}
	gittest.RequireIdentical(t, e.repo, digest, lines)
}
