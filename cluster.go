package paddock

import (
	"context"
	"errors"
	"time"
)

// NodeState is the state of a node: one daemon of several that share a
// store (package postgres).
type NodeState string

const (
	NodeAlive NodeState = "alive" // renewing its lease
	NodeLost  NodeState = "lost"  // its lease ran out; another node marked it lost
	NodeLeft  NodeState = "left"  // it stopped cleanly
)

// ValidNodeID reports whether id can name a node: 1 to 63 letters, digits,
// dots, underscores and dashes, a letter or digit first. paddockd takes no
// other; the store writes such an id into a statement with no quoting.
func ValidNodeID(id string) bool {
	if id == "" || len(id) > 63 || !isAlnum(id[0]) {
		return false
	}
	for _, c := range []byte(id) {
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Node is one paddock daemon among those that share a store. Each holds
// the workspaces of its runs on its own disk and serves the API for all:
// a call for a run on another node is forwarded to it.
type Node struct {
	ID string `json:"id"`
	// Epoch is the node's fencing token: a new one each time the node
	// joins. A write by an older epoch, or by a node that lost its lease,
	// is refused by the store (ErrFenced).
	Epoch int64 `json:"epoch"`
	// Address is where other nodes forward calls to (http://HOST:PORT).
	Address  string    `json:"address"`
	Capacity int       `json:"capacity"`
	State    NodeState `json:"state"`
	// LiveRuns is how many runs with a live workspace the node holds.
	LiveRuns    int       `json:"live_runs"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	LeaseUntil  time.Time `json:"lease_until"`
}

// ErrFenced is in the chain of a write refused because its node lost its
// lease (or joined again since): another node may have taken its runs.
var ErrFenced = errors.New("its writes are refused")

// ErrStoreUnreachable is in the chain of an error that says the shared
// store could not be reached (down, restarting, its connection lost): the
// same call may succeed once it is back. Work that can wait (a run's
// checkpoint due) is tried again later.
var ErrStoreUnreachable = errors.New("the shared store could not be reached")

// RunCheckpoint is what a run's adoption restores from: its change set
// against its base, stored in the shared store.
type RunCheckpoint struct {
	RunID        string    `json:"run_id"`
	Node         string    `json:"node"`
	BaseRevision string    `json:"base_revision"`
	Hash         string    `json:"hash"` // the change set's hash
	Entries      int       `json:"entries"`
	TakenAt      time.Time `json:"taken_at"`
	// Content is the change set's files: a tar of every added or
	// modified file (its mode and content) and of the run's records
	// that travel, with a list of the deleted paths.
	Content []byte `json:"-"`
}

// Cluster is what the lifecycle manager needs of a store that several
// nodes share. A daemon of its own has none.
type Cluster interface {
	// Self is this node.
	Self() Node
	// SaveCheckpoint stores a run's checkpoint, replacing its last one.
	SaveCheckpoint(ctx context.Context, cp *RunCheckpoint) error
	// LoadCheckpoint returns a run's last checkpoint; CodeNotFound if none.
	LoadCheckpoint(ctx context.Context, runID string) (*RunCheckpoint, error)
	// TakeRun moves a run to this node, if the node holding it is not
	// alive, and runs fn in the same transaction; it returns the node it
	// came from. CodeConflict if the run's node is alive or this one.
	TakeRun(ctx context.Context, runID string, fn func(Tx) error) (from string, err error)
	// ReleaseRun gives a run this node took back to node to (an adoption
	// that failed), running fn in the same transaction.
	ReleaseRun(ctx context.Context, runID, to string, fn func(Tx) error) error
	// Nodes lists the nodes, alive or not.
	Nodes(ctx context.Context) ([]Node, error)
}

// AdoptResult is what an adoption did: the run restored on this node from
// its checkpoint, and the job it took over.
type AdoptResult struct {
	Run      *Run   `json:"run"`
	FromNode string `json:"from_node"`
	// Checkpoint is the change set's hash the run was restored to, and
	// TakenAt when that checkpoint was taken: what the lost node did after
	// it is lost with the node.
	Checkpoint string    `json:"checkpoint"`
	TakenAt    time.Time `json:"taken_at"`
	Entries    int       `json:"entries"`
	// Job is the interrupted job taken over, running again here; empty
	// if the run had none.
	Job string `json:"job,omitempty"`
}
