// Package fakeagent is a scripted client of paddock's action protocol: it
// plays an agent and its orchestrator from a JSON script of steps, checks
// each step's outcome (success, or the error code the script expects), and
// reports the first step that did not go as written. The contract tests run
// it against a real daemon; a platform team can run their own scripts with
// `paddock fake-agent SCRIPT`.
//
// A script is a JSON array of steps:
//
//	{"do": "bootstrap", "project": "app", "agent": {...}, "task": "…"}   binds a run; later steps act on it
//	{"do": "tool", "name": "write", "args": {…}}
//	{"do": "exec", "argv": ["go", "test", "./..."]}
//	{"do": "start", "kind": "agent"}  |  {"do": "wait"}  |  {"do": "cancel"}
//	{"do": "status"}  |  {"do": "events"}  |  {"do": "artifact", "kind": "logs"}
//	{"do": "job_status", "state": "idle"}   where the run's jobs stand (checked against state if given)
//	{"do": "tool", "name": "plan", "args": {"steps": [...]}}  |  {"do": "artifact", "kind": "plan"}
//	{"do": "changeset"}  |  {"do": "diff"}   the change set as it is now, and its whole diff
//	{"do": "submit"}  |  {"do": "approve"}  |  {"do": "apply", "to": "branch"}  |  {"do": "reject"}
//	{"do": "submit", "hash": "last"}   freeze only the change set the last changeset step saw
//	{"do": "create", "project": "app"}   a run made by the operator without a bootstrap
//	{"do": "tools"}  |  {"do": "jobs"}   what the run offers, the jobs it ran
//	{"do": "exec_stream", "argv": [...]}   a command whose output streams back
//	{"do": "follow", "kind": "exec"}   the event stream, until an event of that type
//	{"do": "inbox", "name": "brief.txt", "body": "…"}   a file into .paddock/inbox/
//	{"do": "checkpoint", "reason": "…"}  |  {"do": "resume"}  |  {"do": "retain"}  |  {"do": "rm"}
//	{"do": "review"}   the review run of the submitted change set (the operator's)
//	{"do": "undo"}   reverse an apply into the working tree
//
// and the operator's own actions, on no run:
//
//	{"do": "health"}  |  {"do": "daemon"}  |  {"do": "doctor"}  |  {"do": "openapi"}
//	{"do": "projects"}  |  {"do": "project", "project": "app"}  |  {"do": "runs", "project": "app", "all": true}
//	{"do": "project_set", "project": "app", "set": {...}}  |  {"do": "project_rm", "project": "spare"}
//	{"do": "unlock", "project": "app", "force": true}  |  {"do": "gc", "dry_run": true}
//	{"do": "agent_add", "name": "tester.toml", "body": "<TOML>"}  |  {"do": "agents"}
//	{"do": "agent", "name": "tester"}  |  {"do": "agent_rm", "name": "tester"}
//	{"do": "manifest", "project": "app"}  |  {"do": "checkout", "project": "app"}
//
// and the agent's control tools and the decisions on them:
//
//	{"do": "capabilities"}  |  {"do": "verify", "checks": ["test"]}
//	{"do": "request_access", "access": {"kind": "command", "command": ["ls"], "reason": "…"}}
//	{"do": "requests"}  |  {"do": "grant", "as": "operator"}  |  {"do": "deny", "as": "operator"}
//	(grant and deny decide the latest request; a bootstrap with "name"
//	and no "agent" makes the run with that stored definition)
//
// and workflows:
//
//	{"do": "flow_start", "project": "app", "name": "task-with-review", "task": "…"}
//	(the flow's first run is acted on next, as its agent)
//	{"do": "pick", "name": "done"}  |  {"do": "pick", "name": "approve", "hash": "head"}
//	(an event from the run's menu; "head" is the hash under review; the
//	next state's run is acted on next)  |  {"do": "flows"}  |  {"do": "flow"}
//
// Each step may say "as": "operator" (the daemon's credential), "agent"
// (the run's own token, the default once a run is bootstrapped) or
// "stranger" (a token no run has, as a stale or forged one), "run":
// "other" to aim at the previous run instead, and "expect": an error code
// such as "busy"; a step that expects nothing must succeed.
package fakeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
)

// Step is one action of a script.
type Step struct {
	Do      string                   `json:"do"`
	As      string                   `json:"as,omitempty"`
	Run     string                   `json:"run,omitempty"`
	Expect  paddock.Code             `json:"expect,omitempty"`
	Project string                   `json:"project,omitempty"`
	Agent   *paddock.AgentDefinition `json:"agent,omitempty"`
	Task    string                   `json:"task,omitempty"`
	Name    string                   `json:"name,omitempty"`
	Args    json.RawMessage          `json:"args,omitempty"`
	Argv    []string                 `json:"argv,omitempty"`
	Kind    string                   `json:"kind,omitempty"`
	To      string                   `json:"to,omitempty"`
	Hash    string                   `json:"hash,omitempty"`
	// Fill makes a tool's "content" argument this many bytes long.
	Fill int `json:"fill,omitempty"`
	// Body is what an inbox step delivers.
	Body string `json:"body,omitempty"`
	// Reason is a checkpoint's reason.
	Reason string `json:"reason,omitempty"`
	// Force releases a project lock another run holds (unlock).
	Force bool `json:"force,omitempty"`
	// DryRun makes gc report without removing.
	DryRun bool `json:"dry_run,omitempty"`
	// All lists finished runs too (runs).
	All bool `json:"all,omitempty"`
	// Set is a project_set step's change.
	Set *paddock.SetProjectRequest `json:"set,omitempty"`
	// Access is what a request_access step asks for.
	Access *paddock.AccessRequestInput `json:"access,omitempty"`
	// Checks are what a verify step runs.
	Checks []string `json:"checks,omitempty"`
	// State is the job state a job_status step expects.
	State paddock.JobState `json:"state,omitempty"`
	// Findings are what a pick step carries (an event with findings).
	Findings []string `json:"findings,omitempty"`
}

// Runner runs scripts against one daemon.
type Runner struct {
	Operator *client.Client
	Log      io.Writer
	// Answers, if not nil, gets every answer the daemon gave, one JSON
	// value (a diff: its text) a line: what a client saw, for checks such
	// as that no secret was in any of them.
	Answers io.Writer

	runs    []string // bootstrapped runs, newest last
	tokens  map[string]string
	lastJob string
	lastReq string // the latest access request
	hash    string // of the latest submission
	seen    string // of the latest change set computed
	flow    string // the latest flow started
}

// Run plays a script and returns the first step that failed, if any.
func (r *Runner) Run(ctx context.Context, steps []Step) error {
	if r.tokens == nil {
		r.tokens = map[string]string{}
	}
	for i, s := range steps {
		err := r.step(ctx, s)
		got := paddock.Code("")
		if err != nil {
			got = paddock.ErrorCode(err)
		}
		if r.Log != nil {
			fmt.Fprintf(r.Log, "step %d %-9s expect %-16s got %s\n", i+1, s.Do, orOK(s.Expect), orOK(got))
		}
		if got != s.Expect {
			return fmt.Errorf("step %d (%s): expected %s, got %s (%v)", i+1, s.Do, orOK(s.Expect), orOK(got), err)
		}
	}
	return nil
}

func orOK(c paddock.Code) string {
	if c == "" {
		return "ok"
	}
	return string(c)
}

// target returns the run a step acts on and the client to act with.
func (r *Runner) target(s Step) (string, *client.Client, error) {
	if len(r.runs) == 0 {
		return "", nil, fmt.Errorf("no run bootstrapped yet")
	}
	run := r.runs[len(r.runs)-1]
	if s.Run == "other" {
		if len(r.runs) < 2 {
			return "", nil, fmt.Errorf("no other run")
		}
		run = r.runs[len(r.runs)-2]
	}
	c := r.Operator
	if s.As == "stranger" {
		return run, r.Operator.WithToken("pdk_run_stranger"), nil
	}
	if s.As != "operator" {
		if tok := r.tokens[r.runs[len(r.runs)-1]]; tok != "" {
			c = r.Operator.WithToken(tok)
		} else {
			c = r.Operator.ForAgent() // a flow's run: driven by an orchestrator, as its agent
		}
	}
	return run, c, nil
}

// step plays one step: the ones that bind a run, then, with their answers
// recorded, the operator's and those that act on the run.
func (r *Runner) step(ctx context.Context, s Step) (err error) {
	switch s.Do {
	case "bootstrap":
		return r.bootstrap(ctx, s)
	case "flow_start": // a flow; its first state's run is the one acted on next
		f, err := r.Operator.StartFlow(ctx, paddock.StartFlowRequest{Workflow: s.Name, Project: s.Project, Task: s.Task})
		if err == nil {
			r.flow = f.ID
			r.runs = append(r.runs, f.Runs[f.State])
		}
		return err
	case "create": // a run made without a bootstrap, by the operator
		res, err := r.Operator.Create(ctx, paddock.CreateRunRequest{Project: s.Project})
		if err == nil {
			r.runs = append(r.runs, res.ID)
		}
		return err
	}
	var answer any
	defer func() {
		if err != nil {
			answer = map[string]any{"error": err.Error(), "as_sent": err} // an error is an answer too
		}
		if r.Answers != nil && answer != nil {
			b, _ := json.Marshal(answer)
			fmt.Fprintf(r.Answers, "%s\n", b)
		}
	}()
	if done, err := r.operatorStep(ctx, s, &answer); done {
		return err
	}
	run, c, err := r.target(s)
	if err != nil {
		return err
	}
	return r.runStep(ctx, s, c, run, &answer)
}

// bootstrap binds a run to the agent the step names (a fake one by
// default) and keeps its token for the steps that follow.
func (r *Runner) bootstrap(ctx context.Context, s Step) error {
	agent := paddock.AgentDefinition{Name: "fake-agent"}
	if s.Agent != nil {
		agent = *s.Agent
	}
	req := paddock.BootstrapRequest{Project: s.Project, Agent: agent, Task: s.Task}
	if s.Agent == nil && s.Name != "" {
		req.Agent, req.AgentName = paddock.AgentDefinition{}, s.Name
	}
	res, err := r.Operator.Bootstrap(ctx, req)
	if err != nil {
		return err
	}
	r.runs = append(r.runs, res.Run.ID)
	r.tokens[res.Run.ID] = res.Token
	return nil
}

// runStep plays the steps that act on run through c. A step that takes
// more than a call has a method of its own.
func (r *Runner) runStep(ctx context.Context, s Step, c *client.Client, run string, answer *any) (err error) {
	switch s.Do {
	case "tool":
		*answer, err = toolStep(ctx, c, run, s)
	case "exec":
		*answer, err = execStep(ctx, c, run, s)
	case "start":
		var j *paddock.Job
		req := paddock.StartJobRequest{Kind: paddock.JobKind(s.Kind)}
		if len(s.Argv) > 0 {
			req.Exec = &paddock.ExecRequest{Argv: s.Argv}
		}
		if j, err = c.StartJob(ctx, run, req); err == nil {
			r.lastJob = j.ID
		}
	case "wait":
		*answer, err = r.waitJob(ctx, c, run)
	case "cancel":
		*answer, err = c.CancelJob(ctx, run, r.lastJob)
	case "pick": // an event from the run's menu; hash "head" is the one under review
		*answer, err = r.pick(ctx, c, run, s)
	case "status":
		*answer, err = c.Run(ctx, run)
	case "job_status":
		*answer, err = jobStatusStep(ctx, c, run, s)
	case "events":
		*answer, err = c.Events(ctx, run, 0, 0)
	case "artifact":
		*answer, err = c.Artifact(ctx, run, s.Kind)
	case "changeset":
		var cs *paddock.ChangeSet
		if cs, err = c.ChangeSet(ctx, run); err == nil {
			*answer, r.seen = cs, cs.Hash
		}
	case "diff":
		var b strings.Builder
		if _, err = c.CopyDiff(ctx, run, "", &b); err == nil {
			*answer = b.String()
		}
	case "submit":
		*answer, err = r.submit(ctx, c, run, s)
	case "approve":
		hash := r.hash
		if s.Hash != "" {
			hash = s.Hash
		}
		*answer, err = c.Approve(ctx, run, hash)
	case "apply":
		*answer, err = c.Apply(ctx, run, paddock.ApplyRequest{To: s.To})
	case "reject":
		*answer, err = c.Reject(ctx, run)
	case "tools":
		*answer, err = c.Tools(ctx, run)
	case "jobs":
		*answer, err = c.Jobs(ctx, run)
	case "exec_stream":
		*answer, err = execStreamStep(ctx, c, run, s)
	case "follow":
		*answer, err = r.follow(ctx, c, run, s.Kind)
	case "inbox":
		*answer, err = c.Deliver(ctx, run, s.Name, strings.NewReader(s.Body))
	case "checkpoint":
		*answer, err = c.Checkpoint(ctx, run, s.Reason)
	case "resume":
		*answer, err = c.Resume(ctx, run)
	case "retain":
		*answer, err = c.Retain(ctx, run)
	case "review":
		*answer, err = c.Review(ctx, run, "")
	case "rm":
		*answer, err = c.Remove(ctx, run)
	case "undo":
		*answer, err = c.Undo(ctx, run)
	case "capabilities":
		*answer, err = c.Capabilities(ctx, run)
	case "verify":
		*answer, err = verifyStep(ctx, c, run, s)
	case "request_access":
		*answer, err = r.requestAccess(ctx, c, run, s)
	case "requests":
		*answer, err = c.AccessRequests(ctx, run)
	case "grant":
		*answer, err = c.Grant(ctx, run, r.lastReq, s.Reason)
	case "deny":
		*answer, err = c.Deny(ctx, run, r.lastReq, s.Reason)
	default:
		return paddock.Errorf(paddock.CodeBadRequest, "unknown step %q", s.Do)
	}
	return err
}

// toolStep calls the tool s names with its arguments, and a "content" of
// s.Fill bytes when it asks for one.
func toolStep(ctx context.Context, c *client.Client, run string, s Step) (any, error) {
	args := map[string]any{}
	if len(s.Args) > 0 {
		if err := json.Unmarshal(s.Args, &args); err != nil {
			return nil, fmt.Errorf("step args: %w", err)
		}
	}
	if s.Fill > 0 {
		args["content"] = strings.Repeat("a", s.Fill)
	}
	return c.CallTool(ctx, run, s.Name, args)
}

// execStep runs a command; one that exits non-zero is an error.
func execStep(ctx context.Context, c *client.Client, run string, s Step) (any, error) {
	res, err := c.Exec(ctx, run, paddock.ExecRequest{Argv: s.Argv})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	return res, err
}

// execStreamStep runs a command whose output streams back; one that exits
// non-zero is an error.
func execStreamStep(ctx context.Context, c *client.Client, run string, s Step) (any, error) {
	var out, errOut strings.Builder
	res, err := c.ExecStream(ctx, run, paddock.ExecRequest{Argv: s.Argv}, &out, &errOut)
	answer := map[string]any{"result": res, "stdout": out.String(), "stderr": errOut.String()}
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, errOut.String())
	}
	return answer, err
}

// waitJob waits, up to a minute, for the last job started to end; one
// that did not succeed is an error.
func (r *Runner) waitJob(ctx context.Context, c *client.Client, run string) (any, error) {
	for deadline := time.Now().Add(60 * time.Second); ; {
		j, err := c.Job(ctx, run, r.lastJob)
		if err != nil || j.State != paddock.JobRunning {
			if err == nil && j.State != paddock.JobSucceeded {
				err = fmt.Errorf("job %s is %s: %s", j.ID, j.State, j.Reason)
			}
			return j, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("job %s did not end", r.lastJob)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pick picks an event from the run's menu. The flow's next state's run,
// if any, is the one acted on next.
func (r *Runner) pick(ctx context.Context, c *client.Client, run string, s Step) (any, error) {
	req := paddock.MenuEventRequest{Head: s.Hash, Findings: s.Findings}
	if s.Hash == "head" {
		f, err := r.Operator.Flow(ctx, r.flow)
		if err != nil {
			return nil, err
		}
		req.Head = f.Head
	}
	f, err := c.PickEvent(ctx, run, s.Name, req)
	if err != nil {
		return nil, err
	}
	if next := f.Runs[f.State]; next != "" && next != run && f.Ended.IsZero() {
		r.runs = append(r.runs, next)
	}
	return f, nil
}

// jobStatusStep is where the run's jobs stand, checked against s.State if
// the step gives one.
func jobStatusStep(ctx context.Context, c *client.Client, run string, s Step) (any, error) {
	st, err := c.JobStatus(ctx, run)
	if err != nil {
		return nil, err
	}
	if s.State != "" && st.State != s.State {
		return st, fmt.Errorf("the run's jobs are %s, not %s", st.State, s.State)
	}
	return st, nil
}

// submit freezes the change set: as it is, as the last changeset step saw
// it (hash "last") or as s.Hash; its hash is the one approve approves.
func (r *Runner) submit(ctx context.Context, c *client.Client, run string, s Step) (any, error) {
	var cs *paddock.ChangeSet
	var err error
	switch s.Hash {
	case "":
		cs, err = c.Submit(ctx, run)
	case "last":
		cs, err = c.SubmitExpecting(ctx, run, r.seen)
	default:
		cs, err = c.SubmitExpecting(ctx, run, s.Hash)
	}
	if err != nil {
		return nil, err
	}
	r.hash = cs.Hash
	return cs, nil
}

// verifyStep runs the run's checks; failing ones are an error.
func verifyStep(ctx context.Context, c *client.Client, run string, s Step) (any, error) {
	res, err := c.Verify(ctx, run, paddock.VerifyRequest{Checks: s.Checks})
	if err == nil && !res.Passed {
		err = fmt.Errorf("verify failed: %+v", res.Checks)
	}
	return res, err
}

// requestAccess asks for the access s names; grant and deny answer it.
func (r *Runner) requestAccess(ctx context.Context, c *client.Client, run string, s Step) (any, error) {
	if s.Access == nil {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "request_access needs \"access\"")
	}
	q, err := c.RequestAccess(ctx, run, *s.Access)
	if err != nil {
		return nil, err
	}
	r.lastReq = q.ID
	return q, nil
}

// operatorStep plays the steps that act on no run, with the operator's
// credential; done is false for a step it does not know.
func (r *Runner) operatorStep(ctx context.Context, s Step, answer *any) (done bool, err error) {
	c := r.Operator
	switch s.Do {
	case "flows":
		*answer, err = c.Flows(ctx, s.Project)
	case "flow":
		*answer, err = c.Flow(ctx, r.flow)
	case "health":
		err = c.Health(ctx)
	case "daemon":
		*answer, err = c.Status(ctx)
	case "doctor":
		*answer, err = c.Doctor(ctx)
	case "openapi":
		var doc []byte
		if doc, err = c.OpenAPI(ctx); err == nil && !json.Valid(doc) {
			err = fmt.Errorf("the OpenAPI document is not JSON")
		}
	case "projects":
		*answer, err = c.Projects(ctx)
	case "project":
		*answer, err = c.Project(ctx, s.Project)
	case "project_set":
		if s.Set == nil {
			return true, paddock.Errorf(paddock.CodeBadRequest, "project_set needs \"set\"")
		}
		*answer, err = c.SetProject(ctx, s.Project, *s.Set)
	case "project_rm":
		err = c.RemoveProject(ctx, s.Project)
	case "unlock":
		*answer, err = c.Unlock(ctx, s.Project, s.Force)
	case "gc":
		*answer, err = c.GC(ctx, s.DryRun)
	case "runs":
		*answer, err = c.Runs(ctx, paddock.RunFilter{Project: s.Project, Removed: s.All})
	case "agent_add":
		*answer, err = c.AddAgent(ctx, paddock.AddAgentRequest{File: s.Name, Source: s.Body})
	case "agents":
		*answer, err = c.Agents(ctx)
	case "agent":
		*answer, err = c.Agent(ctx, s.Name)
	case "agent_rm":
		err = c.RemoveAgent(ctx, s.Name)
	case "manifest":
		*answer, err = c.ProjectManifest(ctx, s.Project)
	case "checkout":
		*answer, err = c.ProjectCheckout(ctx, s.Project)
	default:
		return false, nil
	}
	return true, err
}

// follow reads the run's event stream from its start until an event of
// type kind, within 30 seconds, and returns the events it read.
func (r *Runner) follow(ctx context.Context, c *client.Client, run, kind string) ([]*paddock.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var seen []*paddock.Event
	found := errors.New("found")
	err := c.Follow(ctx, run, 0, func(e *paddock.Event) error {
		seen = append(seen, e)
		if e.Type == kind {
			return found
		}
		return nil
	})
	if errors.Is(err, found) {
		return seen, nil
	}
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no %s event in the stream after %d events", kind, len(seen))
	}
	return seen, err
}
