package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/paddock-dev/paddock"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// CreateFlow records a new flow.
func (t *Tx) CreateFlow(ctx context.Context, f *paddock.Flow) error {
	f.Version = 1
	b, err := json.Marshal(f)
	if err != nil {
		return wrap("encode flow", err)
	}
	_, err = t.exec(ctx, `INSERT INTO flows (id, project, version, doc, created_at) VALUES (?, ?, ?, ?, ?)`,
		f.ID, f.Project, f.Version, string(b), fmtTime(f.CreatedAt))
	if isUnique(err) {
		return paddock.Errorf(paddock.CodeConflict, "a flow with id %q already exists", f.ID)
	}
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
		return paddock.Errorf(paddock.CodeNotFound, "no project named %q", f.Project)
	}
	return wrap2("create flow", err)
}

// Flow returns a flow by id.
func (t *Tx) Flow(ctx context.Context, id string) (*paddock.Flow, error) {
	var doc string
	err := t.queryRow(ctx, `SELECT doc FROM flows WHERE id = ?`, id).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no flow %q", id)
	}
	if err != nil {
		return nil, wrap("read flow", err)
	}
	return decodeFlow(doc)
}

// Flows lists flows, oldest first.
func (t *Tx) Flows(ctx context.Context, project string) ([]*paddock.Flow, error) {
	rows, err := t.query(ctx, `SELECT doc FROM flows WHERE ? = '' OR project = ? ORDER BY created_at, id`, project, project)
	if err != nil {
		return nil, wrap("list flows", err)
	}
	defer rows.Close()
	var out []*paddock.Flow
	for rows.Next() {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return nil, wrap("list flows", err)
		}
		f, err := decodeFlow(doc)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, wrap2("list flows", rows.Err())
}

// UpdateFlow writes f if the stored version is the one before f.Version.
func (t *Tx) UpdateFlow(ctx context.Context, f *paddock.Flow) error {
	b, err := json.Marshal(f)
	if err != nil {
		return wrap("encode flow", err)
	}
	res, err := t.exec(ctx, `UPDATE flows SET doc = ?, version = ? WHERE id = ? AND version = ?`, string(b), f.Version, f.ID, f.Version-1)
	if err != nil {
		return wrap("update flow", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := t.Flow(ctx, f.ID); err != nil {
			return err
		}
		return paddock.Errorf(paddock.CodeConflict, "flow %s moved on meanwhile", f.ID)
	}
	return nil
}

func decodeFlow(doc string) (*paddock.Flow, error) {
	f := new(paddock.Flow)
	if err := json.Unmarshal([]byte(doc), f); err != nil {
		return nil, wrap("decode flow", err)
	}
	return f, nil
}
