package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strings"

	"github.com/paddock-dev/paddock"
)

// Every write the client makes (POST, PUT, PATCH, DELETE with a body it
// holds in memory, keyable) carries an idempotency key (paddock.IdempotencyHeader), the
// same on each attempt: the node that serves it makes it once, and answers
// an attempt made again with the first one's answer. So a write whose
// answer was lost — the connection broke after it was sent, or a node
// stopped answering the node that forwarded it (details.delivered) — is
// made again like one that was never made, and done once.

type keyCtx struct{}

// WithIdempotencyKey returns ctx whose write carries key instead of a key
// of the client's own: a caller that keeps the key (an orchestrator that
// may itself restart) makes the call again with it, and gets the first
// call's answer if it was done. A key is 1 to paddock.MaxIdempotencyKey
// printable ASCII characters; one key names one call.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}

// callKey is the key a write sends: ctx's, or a new random one.
func callKey(ctx context.Context) string {
	if k, ok := ctx.Value(keyCtx{}).(string); ok && k != "" {
		return k
	}
	return rand.Text()
}

// readTools are the tools whose calls read (broker.ReadTools, and diff and
// capabilities): they take no key, which would cost the call two
// transactions more, and are made again as they are when their answer
// was lost, since they change nothing but their run's event log.
var readTools = []string{"glob", "grep", "list", "read", "stat", "diff", "capabilities"}

type readCtx struct{}

// asRead marks ctx as a call that reads (readTools).
func asRead(ctx context.Context) context.Context { return context.WithValue(ctx, readCtx{}, true) }

func isRead(ctx context.Context) bool { v, _ := ctx.Value(readCtx{}).(bool); return v }

// keyable says whether a write with body carries a key: none, or one held
// in memory and at most paddock.MaxKeyedBody (the node reads a keyed body
// whole); a file (a bundle to import) is sent without one.
func keyable(body io.Reader) bool {
	switch b := body.(type) {
	case nil:
		return true
	case *bytes.Reader:
		return b.Len() <= paddock.MaxKeyedBody
	case *strings.Reader:
		return b.Len() <= paddock.MaxKeyedBody
	}
	return false
}

// keyedMethod says whether a call of method carries a key.
func keyedMethod(method string) bool {
	switch method {
	case "POST", "PUT", "PATCH", "DELETE": // not net/http's names: the CLI links no net/http
		return true
	}
	return false
}

// retryable says whether a call that failed with err is made again: one
// that did nothing (paddock.Undone), and, when it carries a key (or reads),
// one that may have been done (a forward whose answer was lost), or is
// still being made (the node says so): its key makes it once.
func retryable(err error, keyed bool) bool {
	if paddock.Undone(err) {
		return true
	}
	if !keyed {
		return false
	}
	var e *paddock.Error
	if !errors.As(err, &e) {
		return false
	}
	delivered, _ := e.Details["delivered"].(bool)
	inProgress, _ := e.Details["in_progress"].(bool)
	return delivered || inProgress
}
