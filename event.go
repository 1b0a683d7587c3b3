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
	EventRunCreated = "run.created"
	EventRunRemoved = "run.removed"
	// EventBundled: a signed bundle of the run's submitted change set was
	// written (paddock bundle); EventImported: the run was restored from
	// one (paddock import), with where it came from and who signed it.
	EventBundled  = "run.bundled"
	EventImported = "run.imported"
	// The merge queue's steps, recorded on the queued run (paddock queue).
	EventQueueAdded       = "queue.added"
	EventQueueTesting     = "queue.testing"
	EventQueueReturned    = "queue.returned"
	EventQueueLanded      = "queue.landed"
	EventQueueRemoved     = "queue.removed"
	EventQueueUndone      = "queue.undone"
	EventLockAcquired     = "lock.acquired"
	EventLockReleased     = "lock.released"
	EventLockForceRelease = "lock.force_released"
	// EventProjectSettings is recorded on the live runs of a project whose
	// settings changed: what their agents may write, or submit, changed.
	EventProjectSettings = "project.settings_changed"
	EventCheckpoint      = "workspace.checkpoint"
	EventResumed         = "workspace.resumed"
	// EventProgress reports how far a long preparation (an overlay's base
	// snapshot, a clone's checkout) has gone.
	EventProgress = "workspace.progress"
	// EventRunForked is recorded on a run forked (paddock fork): its frozen
	// layer and the runs made on it, each of whose run.created says
	// forked_from.
	EventRunForked = "run.forked"
	// EventBootstrapped records the binding of a run to its agent and task.
	EventBootstrapped = "run.bootstrapped"
	// EventRunDriven: a principal (paddock.Caller) drove the run's agent
	// for the first time on this node, with a tool call or a command; with
	// run.created's and run.bootstrapped's principal, an approval policy
	// reads who may not approve the run's work.
	EventRunDriven = "run.driven"
	// EventToolCall is recorded for every tool call, allowed or refused.
	EventToolCall = "tool.call"
	// EventInbox is recorded for every file delivered into a run's inbox.
	EventInbox = "inbox.delivered"
	// EventAccessRequested, EventAccessGranted and EventAccessDenied record
	// an agent's request for more than its definition grants, and the
	// decision on it: a grant is an event.
	EventAccessRequested = "access.requested"
	EventAccessGranted   = "access.granted"
	EventAccessDenied    = "access.denied"
	// EventVerified records a verify: the checks run, their results and
	// the change-set hash they ran against.
	EventVerified = "verify.finished"
	// EventPlanned records the plan an agent gave with the plan tool, each
	// time it gives one (the plan artifact is the latest).
	EventPlanned = "plan.recorded"
)

// Events recorded for a confined command.
const (
	EventExec            = "exec"
	EventSandboxEnforced = "sandbox.enforced"
	EventNetwork         = "network.connection"
)

// Events of a job: one bounded phase of a run.
const (
	EventJobStarted     = "job.started"
	EventJobFinished    = "job.finished"
	EventJobInterrupted = "job.interrupted"
	// EventJobAdopted: an interrupted job of a lost node's run was taken
	// over by the node that adopted the run, and runs again there from
	// the run's checkpoint.
	EventJobAdopted = "job.adopted"
)

// Events of a run on several nodes (a shared store, package postgres).
const (
	// EventNodeLost: the node that held the run's workspace stopped
	// renewing its lease; another node marked it lost.
	EventNodeLost = "run.node_lost"
	// EventAdopted: the run was restored on another node from its
	// checkpoint in the shared store.
	EventAdopted = "run.adopted"
	// EventAdoptionFailed: an adoption could not make the run's workspace;
	// the run went back to the node it came from, adoptable again.
	EventAdoptionFailed = "run.adoption_failed"
	// EventClusterCheckpoint: the run's change set was stored in the
	// shared store, for an adoption should its node be lost.
	EventClusterCheckpoint = "run.checkpoint_stored"
)

// Events of the approval flow.
const (
	EventSubmitted = "changeset.submitted"
	// EventReviewStarted: a review run of the submitted change set was
	// made (Manager.Review); data names it and the hash it holds.
	EventReviewStarted = "review.started"
	// EventFlowState: the run's flow moved (a state entered or left); its
	// menu changed.
	EventFlowState = "flow.state"
	EventApproved  = "changeset.approved"
	EventApplied   = "changeset.applied"
	EventUndone    = "changeset.undone"
	// EventApplyFailed records an apply into the working tree that did not
	// leave the tree it was approved to leave, and was rolled back.
	EventApplyFailed = "changeset.apply_failed"
)
