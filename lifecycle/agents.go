package lifecycle

import (
	"cmp"
	"context"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/agent"
)

// AddAgent stores a definition read from TOML (src), replacing one of the
// same name; a built-in's name is refused. Runs made with an earlier
// version keep their copies.
func (ps *Projects) AddAgent(ctx context.Context, req paddock.AddAgentRequest) (*paddock.AgentRecord, error) {
	src := []byte(req.Source)
	def, err := agent.Parse(cmp.Or(req.File, "agent.toml"), src)
	if err != nil {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "%s", err.Error())
	}
	if _, ok := agent.Builtin(def.Name); ok {
		return nil, paddock.Errorf(paddock.CodeConflict, "%s is a built-in agent; give yours another name", def.Name)
	}
	rec := &paddock.AgentRecord{Definition: *def, Hash: def.Hash(), Source: string(src), UpdatedAt: now()}
	if err := ps.update(ctx, func(tx paddock.Tx) error { return tx.PutAgent(ctx, rec) }); err != nil {
		return nil, err
	}
	return rec, nil
}

// Agents lists the built-in definitions and the stored ones.
func (ps *Projects) Agents(ctx context.Context) ([]*paddock.AgentRecord, error) {
	var out []*paddock.AgentRecord
	for _, d := range agent.Builtins() {
		out = append(out, &paddock.AgentRecord{Definition: *d, Hash: d.Hash(), Builtin: true})
	}
	err := ps.Store.View(ctx, func(tx paddock.Tx) error {
		stored, err := tx.Agents(ctx)
		out = append(out, stored...)
		return err
	})
	return out, err
}

// Agent returns a definition by name: built in, or stored.
func (ps *Projects) Agent(ctx context.Context, name string) (*paddock.AgentRecord, error) {
	if d, ok := agent.Builtin(name); ok {
		return &paddock.AgentRecord{Definition: *d, Hash: d.Hash(), Builtin: true}, nil
	}
	var rec *paddock.AgentRecord
	err := ps.Store.View(ctx, func(tx paddock.Tx) (err error) {
		rec, err = tx.Agent(ctx, name)
		return err
	})
	return rec, err
}

// RemoveAgent deletes a stored definition; runs made with it keep theirs.
func (ps *Projects) RemoveAgent(ctx context.Context, name string) error {
	if _, ok := agent.Builtin(name); ok {
		return paddock.Errorf(paddock.CodeConflict, "%s is a built-in agent and cannot be removed", name)
	}
	return ps.update(ctx, func(tx paddock.Tx) error { return tx.DeleteAgent(ctx, name) })
}
