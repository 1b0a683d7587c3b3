package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/broker"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/tools"
)

// Tools lists the working tools a run is offered: those of its access
// mode that its definition (with its grants) declares.
func (br *Broker) Tools(ctx context.Context, id string) ([]*tools.Tool, error) {
	r, err := br.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	grants, err := br.AccessRequests(ctx, id)
	if err != nil {
		return nil, err
	}
	def := definitionOf(r)
	var out []*tools.Tool
	for _, t := range tools.Offered(r.Access) {
		if v := broker.Decide(def, grants, broker.Call{Tool: t.Name}, broker.State{Access: r.Access, Workspace: r.State()}); v.Rule != broker.RuleUndeclared && v.Rule != broker.RuleNoDefinition {
			out = append(out, t)
		}
	}
	return nonNilTools(out), nil
}

func nonNilTools(ts []*tools.Tool) []*tools.Tool {
	if ts == nil {
		return []*tools.Tool{}
	}
	return ts
}

// workspaceFor checks that run r's workspace may be worked in now, and makes
// a ready one active: a tool call is a session at work. r is the run as
// this call read it: an active one is taken as it is, with its project p
// if the call read it too (else p is nil and the project is read here).
func (br *Broker) workspaceFor(ctx context.Context, r *paddock.Run, p *paddock.Project) (*paddock.Run, *paddock.Project, error) {
	id := r.ID
	if r.Workspace != nil && r.Workspace.State == paddock.StateActive {
		if p != nil && p.Name == r.Project {
			return r, p, nil
		}
		p, err := br.Project(ctx, r.Project)
		return r, p, err
	}
	r, p, err := br.runAndProject(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	switch r.Workspace.State {
	case paddock.StateActive:
	case paddock.StateReady:
		// A concurrent call may have made it active first: that conflict is fine.
		if _, err := br.runs.step(ctx, id, paddock.StateActive, "first tool call", nil); err != nil && !paddock.IsCode(err, paddock.CodeConflict) {
			return nil, nil, err
		}
	case paddock.StateCheckpointed:
		if !agentCall(ctx) {
			// A person's call does not resume behind their back: it names
			// the one command that does.
			return nil, nil, paddock.Errorf(paddock.CodeConflict, "run %s is checkpointed; resume it first (paddock resume %s)", id, id)
		}
		// The agent carries on where it was (a daemon restart checkpointed
		// its run): its call resumes the run, and an event says so.
		if _, err := br.runs.resume(ctx, id, "agent"); err != nil && !paddock.IsCode(err, paddock.CodeConflict) {
			return nil, nil, err
		}
		if r, p, err = br.runAndProject(ctx, id); err != nil {
			return nil, nil, err
		}
		if r.Workspace.State != paddock.StateActive {
			return nil, nil, paddock.Errorf(paddock.CodeConflict, "run %s is %s; its workspace takes no more work", id, r.Workspace.State)
		}
	default:
		return nil, nil, paddock.Errorf(paddock.CodeConflict, "run %s is %s; its workspace takes no more work", id, r.Workspace.State)
	}
	return r, p, nil
}

// callTool runs one working tool in a run's workspace; the broker has
// allowed it; p is r's project if the call read it with r (nil: it is
// read here). The outcome is nil when the call never reached the tool.
func (br *Broker) callTool(ctx context.Context, r *paddock.Run, p *paddock.Project, name string, args json.RawMessage) (any, *tools.Outcome, error) {
	t, err := tools.Lookup(r.Access, name)
	if err != nil {
		return nil, &tools.Outcome{Tool: name, Args: json.RawMessage(`{}`), Code: paddock.ErrorCode(err), Rule: rule(err)}, err
	}
	if err := br.checkExpectNow(ctx); err != nil {
		return nil, nil, err
	}
	r, p, err = br.workspaceFor(ctx, r, p)
	if err != nil {
		return nil, nil, err
	}
	pol, err := br.views.policy(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	root, err := br.views.openView(ctx, r, p, pol)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	var res any
	var outcome tools.Outcome
	var callErr error
	br.views.asSandboxUser(r, func() error { res, outcome, callErr = t.Call(ctx, root, args); return nil })
	return res, &outcome, callErr
}

// Redactor masks the run's declared secrets and every credential shape:
// for what the API streams of a run that its answers do not carry.
func (br *Broker) Redactor(ctx context.Context, id string) (*redact.Redactor, error) {
	if red, ok := br.redactors.byID(id); ok {
		return red, nil // the run's names are known: no read of it
	}
	r, err := br.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	return br.redactor(r), nil
}

// redactValue passes a tool's result through the funnel and returns it with
// its own type: encoded, masked, and decoded again only if something was masked.
func redactValue(red *redact.Redactor, v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, internal("encoding a tool result failed", err)
	}
	masked := red.Bytes(raw)
	if bytes.Equal(masked, raw) {
		return v, nil
	}
	out := reflect.New(reflect.TypeOf(v).Elem())
	if err := json.Unmarshal(masked, out.Interface()); err != nil {
		return json.RawMessage(masked), nil
	}
	return out.Interface(), nil
}

func rule(err error) paddock.Rule {
	if pe, ok := err.(*paddock.Error); ok {
		return pe.Rule
	}
	return ""
}

func (br *Broker) recordTool(ctx context.Context, id string, o tools.Outcome) error {
	return br.record(ctx, id, paddock.EventToolCall, o)
}

// Deliver writes an inbound file into the run's .paddock/inbox/ (see
// tools.Deliver for the limits) and records it.
func (br *Broker) Deliver(ctx context.Context, id, name string, body io.Reader, lim tools.InboxLimits) (*paddock.InboxResult, error) {
	r, _, err := br.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.Access == paddock.AccessNone {
		return nil, paddock.Errorf(paddock.CodeForbidden, "run %s has no workspace to deliver into", id)
	}
	if s := r.Workspace.State; s != paddock.StateReady && s != paddock.StateActive && s != paddock.StateCheckpointed {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s is %s; its workspace takes no more files", id, s)
	}
	// The host writes the inbox: the agents' protected-path policy does not
	// apply, the confinement and the .git rule do.
	root, err := br.views.openView(ctx, r, nil, &confine.Policy{})
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var res *paddock.InboxResult
	err = br.views.asSandboxUser(r, func() (err error) { res, err = tools.Deliver(root, name, body, lim); return err })
	if err != nil {
		return nil, err
	}
	// A principal's delivery instructs the agent: it drives the run.
	evs, first := br.driven(ctx, id, paddock.ToolExec, []callEvent{{paddock.EventInbox, res}})
	if err := br.recordEvents(ctx, id, evs); err != nil {
		br.drivers.Delete(first)
		return nil, err
	}
	return res, nil
}
