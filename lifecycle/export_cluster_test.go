package lifecycle

import "context"

// StoreCheckpoint stores run id's checkpoint in the shared store, as a job's
// start and end and a checkpoint do.
func StoreCheckpoint(ctx context.Context, m *Manager, id, why string) {
	m.storeCheckpoint(ctx, id, why)
}
