package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
)

// The fates a run's life ends in, drawn per run from the seed.
const (
	fateBranch   = "apply-branch"   // submitted, approved, applied to a new branch (and sometimes checkpointed and removed)
	fateWorktree = "apply-worktree" // submitted, approved, applied into the project's working tree
	fateReject   = "reject"         // rejected
	fateSubmit   = "submit"         // submitted, left for review
	fateApprove  = "approve"        // submitted and approved, not applied
	fateActive   = "active"         // left active
)

func drawFate(rng *rand.Rand) string {
	switch p := rng.Float64(); {
	case p < 0.45:
		return fateBranch
	case p < 0.57:
		return fateWorktree
	case p < 0.72:
		return fateReject
	case p < 0.82:
		return fateSubmit
	case p < 0.90:
		return fateApprove
	}
	return fateActive
}

// runRec is what the soak's client did with one run, and what it was told.
type runRec struct {
	i    int
	tag  string // r0042: the run's own directory in the project, w/r0042
	fate string
	id   string

	writes   []string // paths of the writes acknowledged (one write per path)
	modified []string // tracked files the run rewrote (apply-branch only)
	execs    []string // tokens of the commands acknowledged (each in its argv)
	// cs is the change set the client last submitted, as the answer gave
	// it; approved its hash once approved; applied the answer to the apply.
	cs       *paddock.ChangeSet
	approved string
	applied  *paddock.Submission
	rejected bool
	removed  bool
	// reconciled counts calls whose answer was lost and whose effect the
	// client found in the run's events instead of making them again.
	reconciled int
	// ended says how the life ended: "" when it went as drawn, else the
	// step and the error it gave up on.
	ended string
}

// callRec is one call a client made: the operation, how long it took and
// its error's code ("" when acknowledged).
type callRec struct {
	op   string
	took time.Duration
	code string
}

// recorder gathers the clients' calls.
type recorder struct {
	mu    sync.Mutex
	calls []callRec
}

func (r *recorder) add(c callRec) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

// callBudget bounds how long a client keeps retrying one step (a node
// killed and its runs adopted, PostgreSQL down and back, are all within
// it); after that it gives up on the run, as an orchestrator would
// report it.
const callBudget = 2 * time.Minute

// outcome is what a client makes of an error.
type outcome int

const (
	acked   outcome = iota // done
	retry                  // not done: make the call again
	unknown                // it may or may not have been done: look before making it again
	failed                 // refused: it will not be done
)

// classify reads an error as an orchestrator must: nothing sent
// (unreachable), node_lost with delivered false and busy are safe to
// retry; node_lost that may have reached the run's node, a store that
// could not be reached mid-write, a connection cut after the request was
// sent or a call that hung may have been done; anything else is an answer.
func classify(err error) outcome {
	var pe *paddock.Error
	switch {
	case err == nil:
		return acked
	case client.Unreachable(err):
		return retry
	case !errors.As(err, &pe):
		return unknown // the transport failed after the request left
	case pe.Code == paddock.CodeNodeLost:
		if d, ok := pe.Details["delivered"].(bool); ok && !d {
			return retry
		}
		return unknown
	case pe.Code == paddock.CodeBusy:
		return retry
	case pe.Code == paddock.CodeInternal:
		return unknown
	}
	return failed
}

// codeOf names an error for the tables.
func codeOf(err error) string {
	var pe *paddock.Error
	switch {
	case err == nil:
		return ""
	case client.Unreachable(err):
		return "unreachable"
	case errors.Is(err, context.DeadlineExceeded):
		return "hung"
	case !errors.As(err, &pe):
		return "transport"
	case pe.Code == paddock.CodeNodeLost:
		if d, ok := pe.Details["delivered"].(bool); ok {
			return fmt.Sprintf("node_lost(delivered=%v)", d)
		}
	}
	return string(paddock.ErrorCode(err))
}

// worker is one client: it walks runs through their lives, one at a time.
type worker struct {
	s   *soak
	rng *rand.Rand
}

// client is a node's client for the next call: any node, as a load
// balancer in front of the cluster would pick one; the call is forwarded
// to the run's node when it is another.
func (w *worker) client() *client.Client {
	return w.s.nodes[w.rng.Intn(len(w.s.nodes))].c
}

// step makes one call (op) through some node, retrying as its error says,
// for up to callBudget. When the answer is lost, look (if not nil) says
// from the run's events whether the call was done. It returns nil when
// the call was acknowledged or found done (found: true), the error of a
// refusal, or the last error when the budget ran out.
//
// A run its node checkpointed (a restarted node checkpoints the active runs
// it held) refuses an operator's call until resumed: the client resumes it
// (run id) and makes the call again, as `paddock resume` would. The
// agent's own calls (tool calls, commands: ForAgent, as paddock mcp makes
// them) resume it by themselves.
func (w *worker) step(ctx context.Context, id, op string, call func(ctx context.Context, c *client.Client) error,
	look func(ctx context.Context, c *client.Client) (bool, error)) (found bool, err error) {
	deadline := time.Now().Add(callBudget)
	backoff := 200 * time.Millisecond
	resumes := 0
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		t0 := time.Now()
		err = call(cctx, w.client())
		cancel()
		w.s.rec.add(callRec{op: op, took: time.Since(t0), code: codeOf(err)})
		o := classify(err)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			o = unknown
		}
		if o == failed && id != "" && resumes < 3 && paddock.IsCode(err, paddock.CodeConflict) && strings.Contains(err.Error(), "resume it first") {
			resumes++
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			t0 := time.Now()
			_, rerr := w.client().Resume(rctx, id)
			cancel()
			w.s.rec.add(callRec{op: "resume", took: time.Since(t0), code: codeOf(rerr)})
			continue
		}
		switch {
		case o == acked:
			return false, nil
		case o == failed || ctx.Err() != nil:
			return false, err
		case time.Now().After(deadline):
			return false, fmt.Errorf("gave up after %s: %w", callBudget, err)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 3*time.Second)
		if o == unknown && look != nil {
			for time.Now().Before(deadline) {
				lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				done, lerr := look(lctx, w.client())
				cancel()
				if lerr == nil {
					if done {
						return true, nil
					}
					break
				}
				time.Sleep(backoff)
			}
		}
	}
}

// eventsHave looks in run id's events for one of type typ whose data
// holds every one of marks.
func eventsHave(ctx context.Context, c *client.Client, id, typ string, marks ...string) (bool, error) {
	evs, err := c.Events(ctx, id, 0, 1<<20)
	if err != nil {
		return false, err
	}
	for _, e := range evs {
		if e.Type != typ {
			continue
		}
		all := true
		for _, m := range marks {
			all = all && strings.Contains(string(e.Data), m)
		}
		if all {
			return true, nil
		}
	}
	return false, nil
}

// live walks run r through its life: made, written to, commands run in
// it, and its fate.
func (w *worker) live(ctx context.Context, r *runRec) {
	s := w.s
	pause := func() { time.Sleep(time.Duration(50+w.rng.Intn(350)) * time.Millisecond) }
	giveUp := func(what string, err error) { r.ended = what + ": " + err.Error() }

	// Made: a create whose answer was lost may have made a run the client
	// never learns of (the checks read every run in the store, that one too).
	var run *paddock.Run
	if _, err := w.step(ctx, "", "create", func(ctx context.Context, c *client.Client) (err error) {
		run, err = c.Create(ctx, paddock.CreateRunRequest{Project: "app", Kind: string(paddock.KindOverlay)})
		return err
	}, nil); err != nil {
		giveUp("create", err)
		return
	}
	r.id = run.ID
	s.setID(r)

	// Files written: each under the run's own directory, a few rewrites
	// of tracked files for the runs whose change set goes to a branch.
	// Each path once per run: an event records a write's path, not its
	// content, so the path is what finds it among the events.
	nw := 2 + w.rng.Intn(6)
	tracked := w.rng.Perm(s.tracked)
	for k := range nw {
		pause()
		token := fmt.Sprintf("soak-%s-w%d-%08x", r.tag, k, w.rng.Uint32())
		path := fmt.Sprintf("w/%s/f%d.txt", r.tag, k)
		if r.fate == fateBranch && w.rng.Intn(4) == 0 {
			path = fmt.Sprintf("src/f%d.txt", tracked[k])
			r.modified = append(r.modified, path)
		}
		found, err := w.step(ctx, r.id, "tool.write", func(ctx context.Context, c *client.Client) error {
			_, err := c.ForAgent().CallTool(ctx, r.id, "write", map[string]string{"path": path, "content": token + "\n"})
			return err
		}, func(ctx context.Context, c *client.Client) (bool, error) {
			return eventsHave(ctx, c, r.id, paddock.EventToolCall, `"path":"`+path+`"`, `"ok":true`)
		})
		if err != nil {
			giveUp("write", err)
			return
		}
		if found {
			r.reconciled++
		}
		r.writes = append(r.writes, path)
	}
	for k := range w.rng.Intn(3) {
		pause()
		token := fmt.Sprintf("soak-%s-x%d-%08x", r.tag, k, w.rng.Uint32())
		argv := []string{"sh", "-c", fmt.Sprintf("mkdir -p w/%s && echo %s > w/%s/x%d.out", r.tag, token, r.tag, k)}
		found, err := w.step(ctx, r.id, "exec", func(ctx context.Context, c *client.Client) error {
			res, err := c.ForAgent().Exec(ctx, r.id, paddock.ExecRequest{Argv: argv, Timeout: "30s"})
			if err == nil && res.ExitCode != 0 {
				return fmt.Errorf("exec %q exited %d", argv, res.ExitCode)
			}
			return err
		}, func(ctx context.Context, c *client.Client) (bool, error) {
			return eventsHave(ctx, c, r.id, paddock.EventExec, token)
		})
		if err != nil {
			giveUp("exec", err)
			return
		}
		if found {
			r.reconciled++
		}
		r.execs = append(r.execs, token)
	}
	pause()
	switch r.fate {
	case fateActive:
		return
	case fateReject:
		found, err := w.step(ctx, r.id, "reject", func(ctx context.Context, c *client.Client) error {
			_, err := c.Reject(ctx, r.id)
			return err
		}, func(ctx context.Context, c *client.Client) (bool, error) {
			return eventsHave(ctx, c, r.id, paddock.TransitionEvent, `"to":"rejected"`)
		})
		if err != nil {
			giveUp("reject", err)
			return
		}
		r.rejected = true
		if found {
			r.reconciled++
		}
		return
	}
	// Submitted, approved, applied: an adoption does not carry an approval
	// (the submission stays on the lost node), and may not carry the
	// submission: the client submits and approves again when told the
	// run has none, up to three times.
	for attempt := 0; ; attempt++ {
		err := w.review(ctx, r)
		if err == nil {
			return
		}
		if attempt == 2 || !paddock.IsCode(err, paddock.CodeConflict) && !paddock.IsCode(err, paddock.CodeNotFound) {
			giveUp(r.ended, err)
			return
		}
		pause()
	}
}

// review submits, approves and applies r as its fate says. On an error
// r.ended names the step.
func (w *worker) review(ctx context.Context, r *runRec) error {
	r.ended = "submit"
	var cs *paddock.ChangeSet
	if _, err := w.step(ctx, r.id, "submit", func(ctx context.Context, c *client.Client) (err error) {
		cs, err = c.Submit(ctx, r.id)
		return err
	}, nil); err != nil {
		return err
	}
	r.cs = cs
	if r.fate == fateSubmit {
		r.ended = ""
		return nil
	}
	w.pauseReview()
	r.ended = "approve"
	found, err := w.step(ctx, r.id, "approve", func(ctx context.Context, c *client.Client) error {
		_, err := c.Approve(ctx, r.id, cs.Hash)
		return err
	}, func(ctx context.Context, c *client.Client) (bool, error) {
		return eventsHave(ctx, c, r.id, paddock.EventApproved, cs.Hash)
	})
	if err != nil {
		return err
	}
	if found {
		r.reconciled++
	}
	r.approved = cs.Hash
	if r.fate == fateApprove {
		r.ended = ""
		return nil
	}
	r.ended = "apply"
	req := paddock.ApplyRequest{To: "branch", Branch: "soak/" + r.tag}
	mark := `"branch":"soak/` + r.tag + `"`
	if r.fate == fateWorktree {
		req = paddock.ApplyRequest{To: "worktree"}
		mark = `"worktree"`
	}
	var sub *paddock.Submission
	found, err = w.step(ctx, r.id, "apply", func(ctx context.Context, c *client.Client) (err error) {
		sub, err = c.Apply(ctx, r.id, req)
		return err
	}, func(ctx context.Context, c *client.Client) (bool, error) {
		return eventsHave(ctx, c, r.id, paddock.EventApplied, cs.Hash, mark)
	})
	if err != nil {
		return err
	}
	if found {
		r.reconciled++
		sub = &paddock.Submission{RunID: r.id, Hash: cs.Hash}
	}
	r.applied = sub
	r.ended = ""
	if r.fate == fateBranch && w.rng.Intn(3) == 0 {
		// Done with: its session detached and the run removed (its
		// workspace cleaned, its record and events kept).
		if _, err := w.step(ctx, r.id, "checkpoint", func(ctx context.Context, c *client.Client) error {
			_, err := c.Checkpoint(ctx, r.id, "soak: done with")
			return err
		}, func(ctx context.Context, c *client.Client) (bool, error) {
			return eventsHave(ctx, c, r.id, paddock.TransitionEvent, `"to":"checkpointed"`)
		}); err != nil {
			r.ended = "checkpoint: " + err.Error()
			return nil
		}
		if _, err := w.step(ctx, r.id, "remove", func(ctx context.Context, c *client.Client) error {
			_, err := c.Remove(ctx, r.id)
			return err
		}, func(ctx context.Context, c *client.Client) (bool, error) {
			return eventsHave(ctx, c, r.id, paddock.EventRunRemoved)
		}); err != nil {
			r.ended = "remove: " + err.Error()
			return nil
		}
		r.removed = true
	}
	return nil
}

func (w *worker) pauseReview() { time.Sleep(time.Duration(100+w.rng.Intn(900)) * time.Millisecond) }
