package postgres

import (
	"context"
	"encoding/json"

	"github.com/paddock-dev/paddock"
)

// CreateFlow records a new flow.
func (t *Tx) CreateFlow(ctx context.Context, f *paddock.Flow) error {
	f.Version = 1
	b, err := json.Marshal(f)
	if err != nil {
		return wrap("encode flow", err)
	}
	tag, err := t.tx.Exec(ctx, `INSERT INTO flows (id, project, version, doc, created_at)
		SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM projects WHERE name = $2) ON CONFLICT DO NOTHING`,
		f.ID, f.Project, f.Version, string(b), f.CreatedAt.UTC())
	if sqlState(err) == foreignKeyViolation {
		return paddock.Errorf(paddock.CodeNotFound, "no project named %q", f.Project)
	}
	if err != nil {
		return wrap("create flow", err)
	}
	if tag.RowsAffected() == 0 {
		ok, err := exists(ctx, t, `SELECT 1 FROM projects WHERE name = $1`, f.Project)
		if err != nil {
			return wrap("create flow", err)
		}
		if !ok {
			return paddock.Errorf(paddock.CodeNotFound, "no project named %q", f.Project)
		}
		return paddock.Errorf(paddock.CodeConflict, "a flow with id %q already exists", f.ID)
	}
	return nil
}

// Flow returns a flow by id.
func (t *Tx) Flow(ctx context.Context, id string) (*paddock.Flow, error) {
	fs, err := t.flows(ctx, `SELECT doc FROM flows WHERE id = $1`, id)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no flow %q", id)
	}
	return fs[0], nil
}

// Flows lists flows, oldest first.
func (t *Tx) Flows(ctx context.Context, project string) ([]*paddock.Flow, error) {
	return t.flows(ctx, `SELECT doc FROM flows WHERE $1 = '' OR project = $1 ORDER BY created_at, id`, project)
}

func (t *Tx) flows(ctx context.Context, q string, args ...any) ([]*paddock.Flow, error) {
	return collect(ctx, t, "list flows", false, func(row scanner) (*paddock.Flow, error) {
		var doc string
		if err := row.Scan(&doc); err != nil {
			return nil, err
		}
		f := new(paddock.Flow)
		if err := json.Unmarshal([]byte(doc), f); err != nil {
			return nil, err
		}
		return f, nil
	}, q, args...)
}

// UpdateFlow writes f if the stored version is the one before f.Version.
func (t *Tx) UpdateFlow(ctx context.Context, f *paddock.Flow) error {
	b, err := json.Marshal(f)
	if err != nil {
		return wrap("encode flow", err)
	}
	tag, err := t.tx.Exec(ctx, `UPDATE flows SET doc = $1, version = $2 WHERE id = $3 AND version = $4`, string(b), f.Version, f.ID, f.Version-1)
	if err != nil {
		return wrap("update flow", err)
	}
	if tag.RowsAffected() == 0 {
		if _, err := t.Flow(ctx, f.ID); err != nil {
			return err
		}
		return paddock.Errorf(paddock.CodeConflict, "flow %s moved on meanwhile", f.ID)
	}
	return nil
}
