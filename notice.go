package paddock

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// A notice is an event an orchestrator is told of without polling: the
// store keeps each in an outbox (its notices, numbered in commit order)
// in the same transaction as the event, and the daemon delivers them to
// the configured webhooks and serves them on GET /v1/events/stream.

// NoticeRunRejected is the notice of a run's rejection: the run's
// workspace.state event whose state became rejected.
const NoticeRunRejected = "run.rejected"

// NoticeTypes are the notable types, in the order of a run's life.
var NoticeTypes = []string{
	EventSubmitted,
	EventApproved,
	EventApplied,
	NoticeRunRejected,
	EventAccessRequested,
	EventJobFinished,
	EventJobInterrupted,
	EventNodeLost,
}

// IsNoticeType reports whether typ is one of NoticeTypes.
func IsNoticeType(typ string) bool { return slices.Contains(NoticeTypes, typ) }

// NoticeOf says whether an event of type typ with data (its JSON) is
// notable, and the notice's type: the event's own, or run.rejected for
// the workspace.state event that rejects a run. The stores call it on
// every AppendEvent.
func NoticeOf(typ string, data []byte) (string, bool) {
	if typ == TransitionEvent {
		var t struct {
			To WorkspaceState `json:"to"`
		}
		if json.Unmarshal(data, &t) == nil && t.To == StateRejected {
			return NoticeRunRejected, true
		}
		return "", false
	}
	if typ == NoticeRunRejected || !IsNoticeType(typ) {
		return "", false
	}
	return typ, true
}

// Notice is one notable event: its place in the outbox (ID, increasing
// in commit order, so that a reader that resumes after the last ID it
// saw misses none), its type, the event it notes (RunID, Seq) with its
// data, and the run's project.
type Notice struct {
	ID      int64           `json:"id"`
	Type    string          `json:"type"`
	RunID   string          `json:"run_id"`
	Seq     int64           `json:"seq"`
	Time    time.Time       `json:"time"`
	Project string          `json:"project"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// WebhookCursor is a webhook's delivery state: the last notice delivered
// (acknowledged with a 2xx), and the lease of the daemon that delivers it
// now (on several nodes, one at a time).
type WebhookCursor struct {
	Name       string    `json:"name"`
	Delivered  int64     `json:"delivered"`
	LeaseOwner string    `json:"lease_owner,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
}

// WebhookAttempt is one delivery attempt of a notice to a webhook.
type WebhookAttempt struct {
	Webhook string    `json:"webhook"`
	Notice  int64     `json:"notice"`
	Attempt int       `json:"attempt"` // 1 for a notice's first attempt at this webhook; the store numbers them
	Time    time.Time `json:"time"`
	Status  int       `json:"status,omitempty"` // the HTTP status, 0 if none came
	Error   string    `json:"error,omitempty"`
	// Delivered: the receiver answered 2xx.
	Delivered bool `json:"delivered"`
}

// WebhookAttemptsKept is how many attempts a store keeps per webhook:
// recording one more drops the oldest.
const WebhookAttemptsKept = 1000

// Webhooks is the webhooks' delivery state in a transaction (Tx.Webhooks).
type Webhooks interface {
	// Lease takes name's delivery lease for owner until until, if it is
	// free, expired at now, or already owner's, and reports whether owner
	// holds it. A webhook without a cursor gets one first, at the last
	// notice there is: it is told of the notices made from then on.
	Lease(ctx context.Context, name, owner string, now, until time.Time) (*WebhookCursor, bool, error)
	// Cursor returns name's cursor; CodeNotFound if it has none.
	Cursor(ctx context.Context, name string) (*WebhookCursor, error)
	// Advance records that the notices up to delivered were delivered.
	// CodeConflict if owner does not hold the lease (another took it).
	// The cursor never moves back.
	Advance(ctx context.Context, name, owner string, delivered int64) error
	// RecordAttempt records an attempt, numbering it (a.Attempt) after
	// the last one of the same notice, and drops the webhook's oldest
	// (by notice, then attempt) beyond WebhookAttemptsKept.
	RecordAttempt(ctx context.Context, a *WebhookAttempt) error
	// Attempts returns up to limit of name's latest attempts, oldest
	// first: by notice, then attempt (the order a webhook makes them in).
	Attempts(ctx context.Context, name string, limit int) ([]*WebhookAttempt, error)
}
