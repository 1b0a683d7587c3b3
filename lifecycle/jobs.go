package lifecycle

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/broker"
	"github.com/paddock-dev/paddock/internal/durable"
)

// Jobs runs a run's agent as a job: bootstrap, start, cancel, and the job's lease and end.
type Jobs struct {
	*kernel
	// the services it calls
	broker   *Broker
	executor *executor
	flows    *Flows
	nodes    *Nodes
	projects *Projects
	runs     *Runs
	verifier *Verifier
	views    *views

	// runner runs this instance's jobs; instanceID names the instance as
	// the jobs' owner.
	runner     *jobRunner
	instanceID string
}

func newJobID() string {
	var b [5]byte
	rand.Read(b[:])
	return "j-" + strings.ToLower(base32.StdEncoding.EncodeToString(b[:]))
}

// StartJob starts one bounded phase of a run: the bootstrapped agent's
// command, or one command, in the sandbox. A second job while one runs is
// refused with busy, as is any job once Close has begun (ErrClosed). The
// job runs in the background, on the Manager's job runner; its output goes
// to the run's logs artifact, masked, and its result to the result artifact.
func (js *Jobs) StartJob(ctx context.Context, id string, req paddock.StartJobRequest) (*paddock.Job, error) {
	if err := js.checkOpen(); err != nil {
		return nil, err
	}
	body, raw, err := js.planJob(ctx, id, req)
	if err != nil {
		return nil, err
	}
	// With nodes, the run's state as the job starts is what another node
	// resumes the job from, should this one be lost.
	js.nodes.storeCheckpoint(ctx, id, "job start")
	t := now()
	j := &paddock.Job{ID: newJobID(), RunID: id, Kind: req.Kind, State: paddock.JobRunning, Owner: js.instance(),
		LeaseUntil: t.Add(leaseTerm), Request: raw, CreatedAt: t}
	if err := js.update(ctx, func(tx paddock.Tx) error {
		if err := tx.CreateJob(ctx, j); err != nil {
			return err
		}
		_, err := tx.AppendEvent(ctx, id, paddock.EventJobStarted, map[string]any{"job": j.ID, "kind": j.Kind})
		return err
	}); err != nil {
		return nil, err
	}
	if err := js.runner.start(ctx, j, func(ctx context.Context) { js.runJob(ctx, j, body) }); err != nil {
		// Close began since the check above: the job never runs.
		j.State, j.Reason, j.EndedAt, j.LeaseUntil = paddock.JobFailed, "the daemon is shutting down", now(), time.Time{}
		js.recordJobEnd(j)
		return nil, err
	}
	return j, nil
}

// planJob checks a job's request and makes what runs it: its body, and
// the request as the job's record keeps it. A checkpointed run resumes.
func (js *Jobs) planJob(ctx context.Context, id string, req paddock.StartJobRequest) (jobBody, json.RawMessage, error) {
	r, err := js.Run(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	var exec paddock.ExecRequest
	var call broker.Call
	var body jobBody
	switch req.Kind {
	case paddock.JobExec:
		if req.Exec == nil || len(req.Exec.Argv) == 0 {
			return nil, nil, paddock.Errorf(paddock.CodeBadRequest, "an exec job needs exec.argv")
		}
		if len(req.Exec.Stdin) > 0 {
			// A job's request is kept in state, and stdin is not.
			return nil, nil, paddock.Errorf(paddock.CodeBadRequest, "an exec job takes no stdin; put its input in the workspace, or use exec")
		}
		if req.Exec.Terminal != nil {
			return nil, nil, paddock.Errorf(paddock.CodeBadRequest, "an exec job runs on no terminal; attach to a command for one (exec/attach)")
		}
		exec = *req.Exec
		if err := js.broker.agentExec(ctx, id, &exec); err != nil {
			return nil, nil, err
		}
		call = execCall(ctx, exec)
		body = func(ctx context.Context, logw io.Writer) (any, *int, error) {
			res, err := js.broker.ExecStream(ctx, id, exec, logw, logw)
			return exitOf(res, err)
		}
	case paddock.JobAgent:
		rec, err := js.bootstrap(id)
		if err != nil {
			return nil, nil, err
		}
		if len(rec.Agent.Command) == 0 {
			return nil, nil, paddock.Errorf(paddock.CodeBadRequest, "agent %s has no command for paddock to start", rec.Agent.Name)
		}
		exec = paddock.ExecRequest{Argv: rec.Agent.Command, Net: rec.Agent.Net, Env: rec.Agent.Env, Session: true}
		call = execCall(ctx, exec)
		call.Start = true
		body = func(ctx context.Context, logw io.Writer) (any, *int, error) {
			if r.Access == paddock.AccessNone {
				defer js.endInstance(id) // the instance sandbox lives as long as the agent (instance.go)
			}
			res, err := js.broker.execBrokered(ctx, id, call, exec, paddock.ExecIO{Stdout: logw, Stderr: logw})
			return exitOf(res, err)
		}
	case paddock.JobVerify:
		call = broker.Call{Tool: paddock.ToolVerify}
		if _, err := js.verifier.verifyPlan(ctx, r, nil); err != nil {
			return nil, nil, err
		}
		body = func(ctx context.Context, logw io.Writer) (any, *int, error) {
			res, err := js.verifier.verify(ctx, id, paddock.VerifyRequest{}, logw)
			if err != nil {
				return nil, nil, err
			}
			code := 0
			if !res.Passed {
				code = 1
				for _, c := range res.Checks {
					if !c.Passed && c.Skipped == "" {
						code = c.ExitCode
						break
					}
				}
			}
			return res, &code, nil
		}
	default:
		return nil, nil, paddock.Errorf(paddock.CodeBadRequest, "unknown job kind %q (agent, exec, verify)", req.Kind)
	}
	if r.Access == paddock.AccessNone && req.Kind != paddock.JobAgent {
		// Only its agent's own command runs, on an instance sandbox.
		return nil, nil, paddock.Errorf(paddock.CodeForbidden, "run %s has no workspace to run a job in; only its agent's command runs (on a sandbox of its own)", id).WithRule(paddock.RuleAccessNone)
	}
	// Decided now, so that the caller hears of a refusal; the job's call
	// passes through the broker again when it runs.
	if err := js.broker.precheck(ctx, r, call); err != nil {
		return nil, nil, err
	}
	// A run checkpointed by a restart (its last job interrupted) resumes
	// when the client starts the next job; drift since is recorded.
	if r.State() == paddock.StateCheckpointed {
		if _, err := js.runs.Resume(ctx, id); err != nil {
			return nil, nil, err
		}
	}
	raw, _ := json.Marshal(exec)
	if req.Kind == paddock.JobVerify {
		raw, _ = json.Marshal(paddock.VerifyRequest{})
	}
	return body, raw, nil
}

// jobBody runs a job's call with its output in logw; it returns the result
// to save and the exit code.
type jobBody func(ctx context.Context, logw io.Writer) (res any, exit *int, err error)

func exitOf(res *paddock.ExecResult, err error) (any, *int, error) {
	if res == nil {
		return nil, nil, err
	}
	return res, &res.ExitCode, err
}

// execCall is the broker's view of an exec request. The network an agent
// (or a principal other than an admin: paddock.HeldToCeiling) asks for is
// held to its definition's ceiling and grants; the operator's is the
// operator's to choose (it is who sets ceilings), and recorded with the
// command.
func execCall(ctx context.Context, req paddock.ExecRequest) broker.Call {
	c := broker.Call{Tool: paddock.ToolExec, Argv: req.Argv, Dir: req.Dir, Net: req.Net, Env: req.Env,
		Limits: paddock.LimitsOf(req.Timeout, req.Limits)}
	if !paddock.HeldToCeiling(ctx) {
		c.Net = ""
	}
	return c
}

// runJob runs a started job to its end, on the runner, which renews its
// lease meanwhile and then records how it ended (recordJobEnd): runJob
// says how in j and saves the result.
func (js *Jobs) runJob(ctx context.Context, j *paddock.Job, body jobBody) {
	res, exit, err := js.runJobBody(ctx, j, body)
	j.EndedAt, j.LeaseUntil = now(), time.Time{}
	switch {
	case ctx.Err() != nil:
		j.State, j.Reason = paddock.JobFailed, "canceled"
		j.ExitCode = exit
	case errors.Is(err, errJobLog):
		j.State, j.Reason = paddock.JobFailed, errJobLog.Error()+" (the daemon's log says why); nothing ran"
	case err != nil:
		j.State, j.Reason = paddock.JobFailed, paddock.ErrorMessage(err)
	case exit != nil && *exit == 0:
		j.State, j.ExitCode = paddock.JobSucceeded, exit
	default:
		j.State, j.ExitCode, j.Reason = paddock.JobFailed, exit, "the command failed"
	}
	if res != nil {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := durable.WriteFile(filepath.Join(js.runDir(j.RunID), "jobs", j.ID+".result.json"), b); err != nil {
			js.log().Error("cannot save a job's result", "run", j.RunID, "job", j.ID, "err", err)
		}
	}
}

// runJobBody runs the job's call with its output in the job's log. A job
// whose log cannot be made does not run: its output would go nowhere.
func (js *Jobs) runJobBody(ctx context.Context, j *paddock.Job, body jobBody) (any, *int, error) {
	logPath := filepath.Join(js.runDir(j.RunID), "jobs", j.ID+".log")
	logf, err := createLog(logPath)
	if err != nil {
		js.log().Error("cannot create a job's log; the job does not run", "run", j.RunID, "job", j.ID, "err", err)
		return nil, nil, errJobLog
	}
	defer func() {
		if err := logf.Close(); err != nil {
			js.log().Error("cannot write a job's log", "run", j.RunID, "job", j.ID, "err", err)
		}
	}()
	return body(ctx, logf)
}

var errJobLog = errors.New("the job's log could not be created")

func createLog(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
}

// Job timing; tests shorten them.
var (
	leaseTerm  = 30 * time.Second
	leaseRenew = 10 * time.Second
	// A job's end is recorded with retries for this long; past it, the job
	// stays running in the records until the next start marks it interrupted.
	endRetryFor   = time.Minute
	endRetryFirst = 50 * time.Millisecond
)

// renewLease extends a running job's lease by leaseTerm; the runner calls
// it every leaseRenew while the job runs.
func (js *Jobs) renewLease(ctx context.Context, j *paddock.Job) error {
	return js.update(ctx, func(tx paddock.Tx) error {
		cur, err := tx.Job(ctx, j.ID)
		if err != nil || cur.State != paddock.JobRunning {
			return err
		}
		cur.LeaseUntil = now().Add(leaseTerm)
		return tx.UpdateJob(ctx, cur)
	})
}

// recordJobEnd writes the job's end and its event, retrying a failed write:
// a job whose end is lost stays "running" and its run refuses the next one.
func (js *Jobs) recordJobEnd(j *paddock.Job) {
	ctx := context.Background()
	delay, deadline := endRetryFirst, time.Now().Add(endRetryFor)
	for attempt := 1; ; attempt++ {
		err := js.update(ctx, func(tx paddock.Tx) error {
			if err := tx.UpdateJob(ctx, j); err != nil {
				return err
			}
			_, err := tx.AppendEvent(ctx, j.RunID, paddock.EventJobFinished,
				map[string]any{"job": j.ID, "state": j.State, "exit_code": j.ExitCode, "reason": j.Reason})
			return err
		})
		switch {
		case err == nil:
			// A flow's review run whose review is over is given back once
			// its agent's command ends.
			js.flows.giveBackReview(ctx, j.RunID)
			js.nodes.storeCheckpoint(ctx, j.RunID, "job end")
			return
		case paddock.IsCode(err, paddock.CodeNotFound):
			js.log().Warn("a job ended whose record is gone", "run", j.RunID, "job", j.ID, "err", err)
			return
		case errors.Is(err, paddock.ErrFenced):
			// This node lost its lease: the node that marked it lost
			// interrupted the job already, and no retry can write.
			js.log().Warn("a job ended on a node that lost its lease; its end is not recorded (the job was interrupted when the node was marked lost)",
				"run", j.RunID, "job", j.ID, "state", j.State)
			return
		case time.Now().After(deadline):
			js.log().Error("cannot record a job's end; it stays running until the next start marks it interrupted",
				"run", j.RunID, "job", j.ID, "state", j.State, "attempts", attempt, "err", err)
			return
		}
		js.log().Warn("cannot record a job's end; retrying", "run", j.RunID, "job", j.ID, "attempt", attempt, "err", err)
		time.Sleep(delay)
		delay = min(2*delay, 5*time.Second)
	}
}

// Jobs lists a run's jobs.
func (js *Jobs) Jobs(ctx context.Context, id string) (out []*paddock.Job, err error) {
	err = js.Store.View(ctx, func(tx paddock.Tx) error {
		if _, err := tx.Run(ctx, id); err != nil {
			return err
		}
		out, err = tx.Jobs(ctx, id, "")
		return err
	})
	return out, err
}

// JobStatus says where a run's jobs stand (seed 004's status): idle
// before its first job, else its latest job and that job's state.
func (js *Jobs) JobStatus(ctx context.Context, id string) (*paddock.JobStatus, error) {
	jobs, err := js.Jobs(ctx, id)
	if err != nil {
		return nil, err
	}
	return statusOf(jobs), nil
}

// statusOf is the status of a run whose jobs are jobs, oldest first: at
// most one runs, and it is the latest.
func statusOf(jobs []*paddock.Job) *paddock.JobStatus {
	if len(jobs) == 0 {
		return &paddock.JobStatus{State: paddock.JobIdle}
	}
	last := jobs[len(jobs)-1]
	for _, j := range jobs {
		if j.State == paddock.JobRunning {
			last = j
		}
	}
	return &paddock.JobStatus{State: last.State, Job: last}
}

// Job returns one of a run's jobs.
func (js *Jobs) Job(ctx context.Context, id, jobID string) (j *paddock.Job, err error) {
	err = js.Store.View(ctx, func(tx paddock.Tx) error {
		j, err = tx.Job(ctx, jobID)
		return err
	})
	if err == nil && j.RunID != id {
		return nil, paddock.Errorf(paddock.CodeNotFound, "run %s has no job %s", id, jobID)
	}
	return j, err
}

// CancelJob stops a running job: its sandbox is killed, whatever it started
// with it. The job ends failed, with reason canceled.
func (js *Jobs) CancelJob(ctx context.Context, id, jobID string) (*paddock.Job, error) {
	j, err := js.Job(ctx, id, jobID)
	if err != nil {
		return nil, err
	}
	if j.State != paddock.JobRunning {
		return nil, paddock.Errorf(paddock.CodeConflict, "job %s is %s", jobID, j.State)
	}
	if !js.runner.cancelJob(jobID) {
		return nil, paddock.Errorf(paddock.CodeConflict, "job %s is run by another daemon (%s)", jobID, j.Owner)
	}
	// Wait for the job to record its end, woken by every write, as long as
	// the caller waits and at most cancelWait.
	timeout := time.NewTimer(cancelWait)
	defer timeout.Stop()
	for {
		changed := js.waitChan()
		if j, err = js.Job(ctx, id, jobID); err != nil || j.State != paddock.JobRunning {
			return j, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for job %s to end: %w", jobID, ctx.Err())
		case <-timeout.C:
			return j, nil
		case <-changed:
		}
	}
}

// cancelWait bounds how long CancelJob waits for a cancelled job to end; a
// job still running then is answered as it is.
var cancelWait = 30 * time.Second

// adoptJobs takes over the jobs a dead owner left running. A job's sandbox
// dies with the daemon that started it, so there is nothing to re-attach
// to: the job becomes interrupted, for the client to start again.
func (js *Jobs) adoptJobs(ctx context.Context) []paddock.Finding {
	var out []paddock.Finding
	var running []*paddock.Job
	if err := js.Store.View(ctx, func(tx paddock.Tx) (err error) {
		running, err = tx.Jobs(ctx, "", paddock.JobRunning)
		return err
	}); err != nil {
		js.log().Error("cannot list running jobs; those a stopped daemon left stay running", "err", err)
		return []paddock.Finding{{Issue: "the running jobs could not be listed", Action: paddock.ActionFailed}}
	}
	for _, j := range running {
		if j.Owner == js.instance() {
			continue
		}
		err := js.update(ctx, func(tx paddock.Tx) error {
			cur, err := tx.Job(ctx, j.ID)
			if err != nil || cur.State != paddock.JobRunning || cur.Owner == js.instance() {
				return err
			}
			cur.State, cur.Reason, cur.EndedAt, cur.LeaseUntil = paddock.JobInterrupted, "its daemon ("+cur.Owner+") stopped", now(), time.Time{}
			cur.Owner = js.instance()
			if err := tx.UpdateJob(ctx, cur); err != nil {
				return err
			}
			_, err = tx.AppendEvent(ctx, cur.RunID, paddock.EventJobInterrupted, map[string]string{"job": cur.ID, "previous_owner": j.Owner})
			return err
		})
		f := paddock.Finding{RunID: j.RunID, Issue: "job " + j.ID + " was running when its daemon stopped", Action: "interrupted"}
		if err != nil {
			js.log().Error("cannot mark a stopped daemon's job interrupted", "run", j.RunID, "job", j.ID, "err", err)
			f.Action = paddock.ActionFailed
		}
		out = append(out, f)
	}
	return out
}

// instance is this daemon's owner id for jobs.
func (js *Jobs) instance() string { return js.instanceID }

// newInstanceID names a Manager as the owner of the jobs it runs: the host
// and a random part, new at each start.
func newInstanceID() string {
	var b [6]byte
	rand.Read(b[:])
	host, _ := os.Hostname()
	return host + "/" + strings.ToLower(base32.StdEncoding.EncodeToString(b[:]))[:8]
}

func (js *Jobs) bootstrap(id string) (*bootstrapRecord, error) {
	b, err := os.ReadFile(filepath.Join(js.runDir(id), "bootstrap.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, paddock.Errorf(paddock.CodeNotBootstrapped, "run %s was never bootstrapped: it has no agent to start", id)
	}
	if err != nil {
		return nil, internal("reading the bootstrap failed", err)
	}
	var rec bootstrapRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, internal("reading the bootstrap failed", err)
	}
	return &rec, nil
}

// refuseWhileJobRuns is for actions that would pull a workspace from under a
// running job. It fails closed: when the jobs cannot be read, it refuses.
func (js *Jobs) refuseWhileJobRuns(ctx context.Context, id string) error {
	var running []*paddock.Job
	if err := js.Store.View(ctx, func(tx paddock.Tx) (err error) {
		running, err = tx.Jobs(ctx, id, paddock.JobRunning)
		return err
	}); err != nil {
		// Not knowing is no answer: the action waits for one.
		var pe *paddock.Error
		if errors.As(err, &pe) {
			return err
		}
		return internal("checking for a running job failed", err)
	}
	if len(running) > 0 {
		return paddock.Errorf(paddock.CodeBusy, "job %s is running in run %s; cancel it first", running[0].ID, id)
	}
	return nil
}
