package mcpserver

import (
	"context"
	"io"

	"github.com/paddock-dev/paddock"
)

// The server calls the daemon's services through these, one per concern,
// each holding only the calls it makes. All are paddock.Service's, so
// client.Client (paddock mcp) and the daemon's lifecycle.Manager (the
// /v1/runs/{id}/mcp route) each provide every one of them.

// Runs is the run served and its event log, which keeps the server's
// tools and resources current.
type Runs interface {
	Run(ctx context.Context, id string) (*paddock.Run, error)
	Events(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error)
	// WaitEvents is Events, but waits for the next event until ctx ends.
	WaitEvents(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error)
}

// Broker is what the run may do: its capabilities (the tools listed),
// its requests for more, and its commands.
type Broker interface {
	Capabilities(ctx context.Context, id string) (*paddock.Capabilities, error)
	RequestAccess(ctx context.Context, id string, in paddock.AccessRequestInput) (*paddock.AccessRequest, error)
	// ExecStream runs a command, writing its output as it comes (the
	// exec tool's progress).
	ExecStream(ctx context.Context, id string, req paddock.ExecRequest, stdout, stderr io.Writer) (*paddock.ExecResult, error)
}

// Changes is the run's change set: the diff tool and resources, and
// submit.
type Changes interface {
	ChangeSet(ctx context.Context, id string) (*paddock.ChangeSet, error)
	// SubmitExpecting submits only if the change set's hash is still
	// expect (none: any).
	SubmitExpecting(ctx context.Context, id, expect string) (*paddock.ChangeSet, error)
}

// Verifier runs the project's checks in the run (the verify tool).
type Verifier interface {
	Verify(ctx context.Context, id string, req paddock.VerifyRequest) (*paddock.VerifyResult, error)
}

// Flows takes an event from the run's menu (a menu tool's call).
type Flows interface {
	PickEvent(ctx context.Context, id, event string, req paddock.MenuEventRequest) (*paddock.Flow, error)
}
