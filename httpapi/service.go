package httpapi

import (
	"context"
	"encoding/json"
	"io"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/tools"
)

// Service is what the API serves: paddock's protocol (paddock.Service,
// which client.Client speaks too) and what only the daemon decides. The
// daemon gives it its lifecycle.Manager; the tests give it a fake.
type Service interface {
	paddock.Service

	// The caller is named by the daemon (by: the connection's actor), not
	// by the request.
	SetProject(ctx context.Context, name, by string, req paddock.SetProjectRequest) (*paddock.Project, error)
	Unlock(ctx context.Context, name, by string, force bool) (*paddock.Lock, error)
	Approve(ctx context.Context, id, hash, by string) (*paddock.Submission, error)
	// ApproveHunks approves only some hunks of the submitted change set
	// hash; Blame says which calls wrote each hunk.
	ApproveHunks(ctx context.Context, id, hash string, hunks []int, by string) (*paddock.Submission, error)
	Blame(ctx context.Context, id, hash string) (*paddock.Blame, error)
	// DecideAccess grants or denies a run's pending access request: only
	// an operator's route reaches it (a run token never grants).
	DecideAccess(ctx context.Context, id, reqID string, grant bool, by, note string) (*paddock.AccessRequest, error)

	// Apply commits the approved change set to a new branch, as who.
	Apply(ctx context.Context, id, branch string, who gitx.Identity) (*paddock.Submission, error)
	// ApplyToWorktree writes the approved change set into the project's
	// working tree.
	ApplyToWorktree(ctx context.Context, id string, threeWay bool) (*paddock.Submission, error)

	// Tools lists the working tools a run is offered; CallTool runs one
	// with its arguments (one JSON object, read strictly already).
	Tools(ctx context.Context, id string) ([]*tools.Tool, error)
	CallTool(ctx context.Context, id, name string, args json.RawMessage) (any, error)
	// Deliver writes body into a run's inbox, within the daemon's limits.
	Deliver(ctx context.Context, id, name string, body io.Reader, lim tools.InboxLimits) (*paddock.InboxResult, error)

	// Redactor masks a run's declared secrets (and credential shapes).
	Redactor(ctx context.Context, id string) (*redact.Redactor, error)
	// RunForToken names the run a run token was issued for.
	RunForToken(ctx context.Context, token string) (string, error)

	// Bundle writes a run's submitted change set as a signed bundle;
	// BundleKey is the public key it is signed with; Import restores a run
	// from a bundle read from body (see package bundle).
	Bundle(ctx context.Context, id string, w io.Writer) error
	BundleKey(ctx context.Context) (*paddock.BundleKey, error)
	Import(ctx context.Context, req paddock.ImportRequest, body io.Reader) (*paddock.ImportResult, error)

	// The merge queue: QueueAdd puts an approved run in it, Queue lists
	// it (of a project, finished entries too if all), QueueEntry is a
	// run's newest entry, QueueRemove takes one out, QueueUndo moves the
	// branch a landed one moved back.
	QueueAdd(ctx context.Context, id string, req paddock.QueueAddRequest, by string) (*paddock.QueueEntry, error)
	Queue(ctx context.Context, project string, all bool) ([]*paddock.QueueEntry, error)
	QueueEntry(ctx context.Context, id string) (*paddock.QueueEntry, error)
	QueueRemove(ctx context.Context, id, by string) (*paddock.QueueEntry, error)
	QueueUndo(ctx context.Context, id, by string) (*paddock.QueueEntry, error)
}
