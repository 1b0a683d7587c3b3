package paddock

import (
	"encoding/json"
	"time"
)

// Event is one append-only record of what happened in a run. Seq is assigned
// by the store in the same transaction as the change the event records: per
// run it starts at 1 and increases by one, with no gaps and no repeats.
type Event struct {
	RunID string          `json:"run_id"`
	Seq   int64           `json:"seq"`
	Time  time.Time       `json:"time"`
	Type  string          `json:"type"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// Event types recorded by the core.
const (
	EventRunCreated       = "run.created"
	EventRunRemoved       = "run.removed"
	EventLockAcquired     = "lock.acquired"
	EventLockReleased     = "lock.released"
	EventLockForceRelease = "lock.force_released"
	// EventProjectSettings is recorded on the live runs of a project whose
	// settings changed: what their agents may write, or submit, changed.
	EventProjectSettings = "project.settings_changed"
	EventCheckpoint      = "workspace.checkpoint"
	EventResumed         = "workspace.resumed"
)
