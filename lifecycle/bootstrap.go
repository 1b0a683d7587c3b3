package lifecycle

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/agent"
	"github.com/paddock-dev/paddock/internal/durable"
)

// bootstrapRecord is what a bootstrap binds, kept with the run's artifacts.
type bootstrapRecord struct {
	Agent  paddock.AgentDefinition `json:"agent"`
	Task   string                  `json:"task"`
	Inputs []string                `json:"inputs,omitempty"`
}

// TokenHash is how a run's bearer token is stored and looked up.
func TokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// Bootstrap makes a run for an agent: its workspace access, secrets and base
// come from the request; the task and inputs are kept as artifacts; the run
// gets a bearer token that reaches only its own routes.
func (js *Jobs) Bootstrap(ctx context.Context, req paddock.BootstrapRequest) (*paddock.BootstrapResult, error) {
	var def *paddock.AgentDefinition
	switch {
	case req.AgentName != "" && req.Agent.Name != "":
		return nil, paddock.Errorf(paddock.CodeBadRequest, "a bootstrap names its agent (agent_name) or defines it (agent), not both")
	case req.AgentName != "":
		rec, err := js.projects.Agent(ctx, req.AgentName)
		if err != nil {
			return nil, err
		}
		def = &rec.Definition
		req.Agent = rec.Definition
	default:
		if err := paddock.ValidateName(req.Agent.Name); err != nil {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "agent name: %s", paddock.ErrorMessage(err))
		}
		def = agent.Complete(&req.Agent)
		if err := agent.Validate(def); err != nil {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "agent %s: %s", req.Agent.Name, paddock.ErrorMessage(err))
		}
	}
	if strings.TrimSpace(req.Task) == "" {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "a bootstrap needs the task")
	}
	for _, in := range req.Inputs {
		clean := path.Clean(in)
		if in == "" || path.IsAbs(in) || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "input %q must be a path inside the project", in)
		}
	}
	r, err := js.runs.create(ctx, newRun{req: paddock.CreateRunRequest{Project: req.Project, Kind: req.Kind, Base: req.Base}, def: def})
	if err != nil {
		return nil, err
	}
	b, _ := json.MarshalIndent(bootstrapRecord{Agent: req.Agent, Task: req.Task, Inputs: req.Inputs}, "", "  ")
	if err := durable.WriteFile(filepath.Join(js.runDir(r.ID), "bootstrap.json"), b); err != nil {
		return nil, internal("saving the bootstrap failed", err)
	}
	var raw [32]byte
	rand.Read(raw[:])
	token := "pdk_run_" + hex.EncodeToString(raw[:])
	err = js.update(ctx, func(tx paddock.Tx) error {
		if err := tx.SetRunToken(ctx, r.ID, TokenHash(token)); err != nil {
			return err
		}
		_, err := tx.AppendEvent(ctx, r.ID, paddock.EventBootstrapped, bootstrapped(ctx, req))
		return err
	})
	if err != nil {
		return nil, err
	}
	r, err = js.Run(ctx, r.ID)
	return &paddock.BootstrapResult{Run: r, Token: token}, err
}

// RunForToken returns the run a bearer token belongs to.
func (js *Jobs) RunForToken(ctx context.Context, token string) (id string, err error) {
	err = js.Store.View(ctx, func(tx paddock.Tx) error {
		id, err = tx.RunByToken(ctx, TokenHash(token))
		return err
	})
	return id, err
}

// Artifact returns one of a run's artifacts: task, plan, events, changeset,
// diff, summary, result, logs.
func (js *Jobs) Artifact(ctx context.Context, id, kind string) (*paddock.Artifact, error) {
	if _, err := js.Run(ctx, id); err != nil {
		return nil, err
	}
	a := &paddock.Artifact{Kind: kind}
	switch kind {
	case "task":
		rec, err := js.bootstrap(id)
		if err != nil {
			return nil, err
		}
		a.Content = map[string]any{"task": rec.Task, "inputs": rec.Inputs, "agent": rec.Agent}
	case "events":
		evs, err := js.runs.Events(ctx, id, 0, 1<<30)
		if err != nil {
			return nil, err
		}
		a.Content = evs
	case "changeset", "diff":
		s, err := js.submission(id)
		if err != nil {
			return nil, err
		}
		cs, err := js.frozen(id, s.Hash)
		if err != nil {
			return nil, internal("reading the frozen change set failed", err)
		}
		if kind == "diff" {
			if cs.DiffOmitted {
				return nil, paddock.Errorf(paddock.CodeTooLarge, "the diff is %d bytes, more than an answer carries; stream it from GET /v1/runs/%s/changeset/diff?hash=%s (paddock diff %s --patch)",
					cs.DiffSize, id, s.Hash, id)
			}
			a.Content = cs.Diff
		} else {
			a.Content = cs
		}
	case "plan":
		plan, err := js.plans.read(id)
		if err != nil {
			return nil, err
		}
		a.Content = plan
	case "summary":
		jobs, err := js.Jobs(ctx, id)
		if err != nil {
			return nil, err
		}
		a.Content = jobs
	case "result", "logs":
		jobs, err := js.Jobs(ctx, id)
		if err != nil {
			return nil, err
		}
		if len(jobs) == 0 {
			return nil, paddock.Errorf(paddock.CodeConflict, "run %s has run no job yet", id)
		}
		last := jobs[len(jobs)-1]
		name := last.ID + ".log"
		if kind == "result" {
			name = last.ID + ".result.json"
		}
		b, err := os.ReadFile(filepath.Join(js.runDir(id), "jobs", name))
		if err != nil {
			return nil, paddock.Errorf(paddock.CodeConflict, "job %s has no %s yet (it is %s)", last.ID, kind, last.State)
		}
		if kind == "result" {
			a.Content = json.RawMessage(b)
		} else {
			a.Content = string(b)
		}
	default:
		return nil, paddock.Errorf(paddock.CodeBadRequest, "unknown artifact %q (task, plan, events, changeset, diff, summary, result, logs)", kind)
	}
	return a, nil
}

// bootstrapped is the run.bootstrapped event's data: the agent, how many
// inputs, and the principal that bound them, if one did.
func bootstrapped(ctx context.Context, req paddock.BootstrapRequest) map[string]any {
	ev := map[string]any{"agent": req.Agent.Name, "inputs": len(req.Inputs)}
	if p := paddock.PrincipalOf(ctx); p != "" {
		ev["principal"] = p
	}
	return ev
}
