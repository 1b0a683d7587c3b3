package lifecycle

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// StoreCheckpoint stores run id's checkpoint in the shared store, as a job's
// start and end and a checkpoint do.
func StoreCheckpoint(ctx context.Context, m *Manager, id, why string) {
	m.Nodes.storeCheckpoint(ctx, id, why)
}

// SetCheckpointDelay sets how soon after a change a run's checkpoint is
// stored, for test t, and puts it back when t's cleanups have run. Call it
// before the test's manager is made: its delayed stores run until the
// manager is closed (a cleanup of its own), and the delay is read by them.
func SetCheckpointDelay(t testing.TB, d time.Duration) {
	old := checkpointDelay.Swap(int64(d))
	t.Cleanup(func() { checkpointDelay.Store(old) })
}

// AdoptionMarker leaves the marker of an adoption under way for run id, as
// a crash in the middle of one would.
func AdoptionMarker(m *Manager, id, from, root string, state paddock.WorkspaceState) error {
	return m.Nodes.writeAdoptionMarker(id, adoptionMarker{From: from, Root: root, State: state})
}

// ImportMark leaves the mark of an import under way for run id, as a crash
// in the middle of one would.
func ImportMark(m *Manager, id string) error {
	if err := os.MkdirAll(filepath.Dir(m.Bundles.importMark(id)), 0o700); err != nil {
		return err
	}
	return os.WriteFile(m.Bundles.importMark(id), []byte("r-from\n"), 0o600)
}

// SandboxFails makes m's sandbox probe answer err, as a machine that
// cannot confine a command would.
func SandboxFails(m *Manager, err error) {
	m.Broker.sandboxProbe.try = func(context.Context) error { return err }
}

// CheckpointSoon schedules run id's checkpoint as a call that changed its
// files does.
func CheckpointSoon(m *Manager, id string) { m.Nodes.checkpointSoon(id) }
