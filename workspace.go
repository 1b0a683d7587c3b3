package paddock

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// WorkspaceKind says how a run's workspace is made.
type WorkspaceKind string

const (
	// KindClone is `git clone --shared` of the project at the base revision,
	// with its own .git, in the state directory.
	KindClone WorkspaceKind = "clone"
	// KindWorktree is `git worktree add --detach` at the base revision. It
	// writes .git/worktrees/NAME in the project; cleanup removes it.
	KindWorktree WorkspaceKind = "worktree"
	// KindOperatorDir is a directory an operator hands over. paddock never
	// deletes it, and the run holds the exclusive project lock for its life.
	KindOperatorDir WorkspaceKind = "operator_dir"
	// KindOverlay is copy-on-write: an overlay whose lower layer is a
	// read-only snapshot of the base revision, shared by every run at that
	// base, and whose upper layer is the run's own. The merged view exists
	// only inside the run's harness (its mount namespace); making one at a
	// snapshotted base costs the same whatever the repository's size.
	KindOverlay WorkspaceKind = "overlay"
	// KindAuto asks for overlay where this machine can make one, and clone
	// elsewhere; the run records the kind it got.
	KindAuto WorkspaceKind = "auto"
)

// Kinds lists the kinds this build knows.
var Kinds = []WorkspaceKind{KindClone, KindWorktree, KindOperatorDir, KindOverlay, KindAuto}

// ParseKind validates a kind name.
func ParseKind(s string) (WorkspaceKind, error) {
	k := WorkspaceKind(s)
	if slices.Contains(Kinds, k) {
		return k, nil
	}
	return "", Errorf(CodeBadRequest, "unknown workspace kind %q (kinds: auto, overlay, clone, worktree, operator_dir)", s)
}

// WorkspaceState is a state of the workspace lifecycle (the workspace-manager
// record): requested → preparing → ready → active → checkpointed →
// retained | rejected → cleanup_pending → cleaned, and orphaned.
type WorkspaceState string

const (
	StateRequested      WorkspaceState = "requested"       // recorded; nothing on disk yet
	StatePreparing      WorkspaceState = "preparing"       // being made; a crash here is rolled back
	StateReady          WorkspaceState = "ready"           // made, no session attached
	StateActive         WorkspaceState = "active"          // a session works in it
	StateCheckpointed   WorkspaceState = "checkpointed"    // session detached; state recorded so it can resume or be explained
	StateRetained       WorkspaceState = "retained"        // an operator kept it: nothing ever deletes it
	StateRejected       WorkspaceState = "rejected"        // discarded by decision; cleanup follows
	StateCleanupPending WorkspaceState = "cleanup_pending" // being removed; a crash here is finished on restart
	StateCleaned        WorkspaceState = "cleaned"         // gone from disk; the record stays for the audit trail
	StateOrphaned       WorkspaceState = "orphaned"        // the record and the disk disagree; reported by gc
)

// transitions is the one table of legal workspace transitions. Every state
// change goes through Transition, which consults it.
var transitions = map[WorkspaceState][]WorkspaceState{
	StateRequested:      {StatePreparing, StateCleanupPending, StateOrphaned},
	StatePreparing:      {StateReady, StateCleanupPending, StateOrphaned},
	StateReady:          {StateActive, StateCheckpointed, StateRetained, StateRejected, StateOrphaned},
	StateActive:         {StateCheckpointed, StateRetained, StateRejected, StateOrphaned},
	StateCheckpointed:   {StateActive, StateRetained, StateRejected, StateOrphaned},
	StateRetained:       {StateOrphaned},
	StateRejected:       {StateCleanupPending, StateOrphaned},
	StateCleanupPending: {StateCleaned},
	StateCleaned:        {},
	StateOrphaned:       {StateCleanupPending},
}

// States lists every state in lifecycle order.
var States = []WorkspaceState{StateRequested, StatePreparing, StateReady, StateActive,
	StateCheckpointed, StateRetained, StateRejected, StateCleanupPending, StateCleaned, StateOrphaned}

// CanTransition reports whether from → to is in the table.
func CanTransition(from, to WorkspaceState) bool {
	return slices.Contains(transitions[from], to)
}

// Terminal reports whether no transition leaves s.
func (s WorkspaceState) Terminal() bool { return len(transitions[s]) == 0 }

// CleanupPolicy says when a workspace's files are removed.
type CleanupPolicy string

const (
	// CleanupOnReject removes the files as soon as the run is rejected (the default).
	CleanupOnReject CleanupPolicy = "on_reject"
	// CleanupManual keeps a rejected workspace's files until `paddock rm` or `paddock gc`.
	CleanupManual CleanupPolicy = "manual"
)

// ParseCleanupPolicy validates a policy name; "" means the default.
func ParseCleanupPolicy(s string) (CleanupPolicy, error) {
	switch CleanupPolicy(s) {
	case "", CleanupOnReject:
		return CleanupOnReject, nil
	case CleanupManual:
		return CleanupManual, nil
	}
	return "", Errorf(CodeBadRequest, "unknown cleanup policy %q (policies: on_reject, manual)", s)
}

// Workspace is the directory a run works in, and its lifecycle record.
type Workspace struct {
	ID            string         `json:"id"`
	RunID         string         `json:"run_id"`
	Kind          WorkspaceKind  `json:"kind"`
	Root          string         `json:"root"`
	Fingerprint   string         `json:"repository_fingerprint"`
	BaseRef       string         `json:"base_ref"`
	BaseRevision  string         `json:"base_revision"`
	Branch        string         `json:"branch,omitempty"`
	State         WorkspaceState `json:"state"`
	CleanupPolicy CleanupPolicy  `json:"cleanup_policy"`
	// Reason explains the latest transition (a failure, a recovery).
	Reason     string    `json:"reason,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	RetainedAt time.Time `json:"retained_at,omitzero"`
	// Checkpoint is the latest checkpoint, if any.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// OverlayLayers, for an overlay workspace, are the host directories it
	// is made of. Its Root is where the run sees the merged view, inside
	// its sandbox only: on the host that directory holds just the upper
	// and work layers. The daemon's answers fill it in; it is not stored.
	OverlayLayers *OverlayLayers `json:"overlay_layers,omitempty"`
}

// OverlayLayers are the host directories of an overlay workspace.
type OverlayLayers struct {
	Lower string `json:"lower"` // the base's snapshot, read-only, shared by the runs at that base
	Upper string `json:"upper"` // the run's own changes
	Work  string `json:"work"`  // overlayfs's scratch directory
	// Frozen are the frozen layers between Upper and Lower, topmost
	// first: a forked run's (and its forks').
	Frozen []string `json:"frozen,omitempty"`
}

// Checkpoint is what paddock records when a session detaches, so that the
// workspace can be resumed, or its later drift explained.
type Checkpoint struct {
	At     time.Time `json:"at"`
	Head   string    `json:"head,omitempty"`   // HEAD of the workspace's repository, if it has one
	Digest string    `json:"digest"`           // sha256 over the tree's paths, modes and contents, .git excluded
	Files  int       `json:"files"`            // files counted into the digest
	Reason string    `json:"reason,omitempty"` // why it was taken (an operator, a daemon shutdown, a restart)
}

// TransitionEvent is the event type recorded for every state change.
const TransitionEvent = "workspace.state"

// TransitionData is the payload of a TransitionEvent.
type TransitionData struct {
	Workspace string         `json:"workspace"`
	From      WorkspaceState `json:"from"`
	To        WorkspaceState `json:"to"`
	Reason    string         `json:"reason,omitempty"`
	// By is who asked for it (paddock.Caller's name; with Principal, the
	// principal), when a caller did: a reject, a retain, an rm.
	By        string `json:"by,omitempty"`
	Principal string `json:"principal,omitempty"`
}

// Transition moves w to state to inside tx and records the event in the same
// transaction. It is the only way a workspace changes state. It refuses a move
// that is not in the table, and any move towards cleanup of a workspace that
// was ever retained: retention is a hard stop, whatever path asks.
func Transition(ctx context.Context, tx Tx, w *Workspace, to WorkspaceState, reason string) error {
	if !CanTransition(w.State, to) || (to == StateCleanupPending && !w.RetainedAt.IsZero()) {
		msg := fmt.Sprintf("workspace of run %s is %s; it cannot become %s", w.RunID, w.State, to)
		if !w.RetainedAt.IsZero() {
			msg = fmt.Sprintf("workspace of run %s is retained; nothing may remove it", w.RunID)
		}
		return Errorf(CodeConflict, "%s", msg).
			WithDetail("reason", "illegal_transition").
			WithDetail("from", string(w.State)).
			WithDetail("to", string(to))
	}
	from := w.State
	w.State = to
	w.Reason = reason
	now := time.Now().UTC()
	w.UpdatedAt = now
	if to == StateRetained {
		w.RetainedAt = now
	}
	if err := tx.UpdateWorkspace(ctx, w); err != nil {
		return err
	}
	_, err := tx.AppendEvent(ctx, w.RunID, TransitionEvent, transitionData(ctx, w, from, to, reason))
	return err
}

// transitionData is a transition's event's data: with its caller's
// name, if a caller asked for it.
func transitionData(ctx context.Context, w *Workspace, from, to WorkspaceState, reason string) TransitionData {
	d := TransitionData{Workspace: w.ID, From: from, To: to, Reason: reason}
	if c := CallerOf(ctx); c != nil {
		d.By, d.Principal = c.Name, c.Principal
	}
	return d
}
