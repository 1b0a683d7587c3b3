package paddock

import (
	"encoding/json"
	"time"
)

// JobState is a job's state.
type JobState string

const (
	// JobIdle is no job's state but a run's: it has started none yet
	// (JobStatus).
	JobIdle        JobState = "idle"
	JobRunning     JobState = "running"
	JobSucceeded   JobState = "succeeded"
	JobFailed      JobState = "failed"
	JobInterrupted JobState = "interrupted" // its owner died; the client restarts it
)

// JobKind is what a job does.
type JobKind string

const (
	JobAgent  JobKind = "agent"  // the bootstrapped agent definition's command, in the sandbox
	JobExec   JobKind = "exec"   // one command, in the sandbox
	JobVerify JobKind = "verify" // the project manifest's verification commands
)

// Job is one bounded execution inside a run. At most one runs per run; the
// daemon instance that runs it owns it and renews its lease.
type Job struct {
	ID         string          `json:"id"`
	RunID      string          `json:"run_id"`
	Kind       JobKind         `json:"kind"`
	State      JobState        `json:"state"`
	Owner      string          `json:"owner"`
	LeaseUntil time.Time       `json:"lease_until,omitzero"`
	Request    json.RawMessage `json:"request"`
	CreatedAt  time.Time       `json:"created_at"`
	EndedAt    time.Time       `json:"ended_at,omitzero"`
	ExitCode   *int            `json:"exit_code,omitempty"`
	Reason     string          `json:"reason,omitempty"`
}

// StartJobRequest starts a job.
type StartJobRequest struct {
	Kind JobKind      `json:"kind"`
	Exec *ExecRequest `json:"exec,omitempty"` // for kind exec
}

// JobStatus is where a run's jobs stand: idle before its first job, else
// the state of its latest (running while one runs), with that job.
type JobStatus struct {
	State JobState `json:"state"`
	Job   *Job     `json:"job,omitempty"`
}
