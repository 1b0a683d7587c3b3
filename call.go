package paddock

import "context"

// What a call says of itself beyond its arguments travels in its context:
// the API puts it there from the request, the workspace manager reads it.

type agentKey struct{}

// WithAgent marks ctx as a call from the run's own agent (its run token,
// or an MCP session serving it): a checkpointed run it calls is resumed
// for it, instead of stranding the agent after a daemon restart.
func WithAgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, agentKey{}, true)
}

// WithoutAgent unmarks ctx: what a call does on its own behalf (a flow
// submitting the change set its agent said was done) is not the agent's.
func WithoutAgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, agentKey{}, false)
}

// AgentCall reports whether ctx is marked by WithAgent.
func AgentCall(ctx context.Context) bool {
	v, _ := ctx.Value(agentKey{}).(bool)
	return v
}

// Expectation is the seq rule's optimistic check: a client that acts on
// what it saw of a run may say so with the last seq it saw; if the run
// moved on since, the action is refused with conflict and changes nothing.
type Expectation struct {
	Run string
	Seq int64
	// Checked is set once the expectation held, by the first check: later
	// writes under the same call are the call's own.
	Checked bool
}

type expectKey struct{}

// WithExpectSeq returns ctx carrying the expectation that run's last event
// is seq. The first transaction that writes under ctx checks it, atomically
// with its write; tool calls and commands check it before they start.
func WithExpectSeq(ctx context.Context, run string, seq int64) context.Context {
	return context.WithValue(ctx, expectKey{}, &Expectation{Run: run, Seq: seq})
}

// ExpectedSeq returns ctx's expectation, or nil.
func ExpectedSeq(ctx context.Context) *Expectation {
	e, _ := ctx.Value(expectKey{}).(*Expectation)
	return e
}
