package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/paddock-dev/paddock"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// encodeProjects stores a principal's projects as JSON, none (every
// project) as NULL.
func encodeProjects(p []string) (sql.NullString, error) {
	if len(p) == 0 {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("projects: %w", err)
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

func encodeUID(uid *int) any {
	if uid == nil {
		return nil
	}
	return *uid
}

// conflict says which of p's unique keys another principal has.
func (s principals) conflict(ctx context.Context, p *paddock.Principal, creating bool) error {
	t := s.t
	if creating {
		var one int
		if t.queryRow(ctx, `SELECT 1 FROM principals WHERE name = ?`, p.Name).Scan(&one) == nil {
			return paddock.Errorf(paddock.CodeConflict, "a principal named %q already exists", p.Name)
		}
	}
	if p.UID != nil {
		var other string
		if t.queryRow(ctx, `SELECT name FROM principals WHERE uid = ? AND name <> ?`, *p.UID, p.Name).Scan(&other) == nil {
			return paddock.Errorf(paddock.CodeConflict, "uid %d already maps to principal %q", *p.UID, other)
		}
	}
	return paddock.Errorf(paddock.CodeConflict, "principal %q conflicts with another", p.Name)
}

// CreatePrincipal inserts p; a taken name, or a uid another principal
// has, is a conflict.
func (s principals) CreatePrincipal(ctx context.Context, p *paddock.Principal) error {
	t := s.t
	projects, err := encodeProjects(p.Projects)
	if err != nil {
		return wrap("encode principal", err)
	}
	_, err = t.exec(ctx, `INSERT INTO principals (name, kind, role, projects, uid, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		p.Name, string(p.Kind), string(p.Role), projects, encodeUID(p.UID), fmtTime(p.CreatedAt), p.CreatedBy)
	if isUnique(err) {
		return s.conflict(ctx, p, true)
	}
	return wrap2("create principal", err)
}

const principalCols = `name, kind, role, projects, uid, created_at, created_by`

func scanPrincipal(row interface{ Scan(...any) error }) (*paddock.Principal, error) {
	var p paddock.Principal
	var kind, role, created string
	var projects sql.NullString
	var uid sql.NullInt64
	if err := row.Scan(&p.Name, &kind, &role, &projects, &uid, &created, &p.CreatedBy); err != nil {
		return nil, err
	}
	p.Kind, p.Role, p.CreatedAt = paddock.PrincipalKind(kind), paddock.Role(role), parseTime(created)
	if projects.Valid {
		if err := json.Unmarshal([]byte(projects.String), &p.Projects); err != nil {
			return nil, fmt.Errorf("projects of %s: %w", p.Name, err)
		}
		if len(p.Projects) == 0 {
			p.Projects = nil
		}
	}
	if uid.Valid {
		n := int(uid.Int64)
		p.UID = &n
	}
	return &p, nil
}

// Principal returns a principal by name.
func (s principals) Principal(ctx context.Context, name string) (*paddock.Principal, error) {
	t := s.t
	p, err := scanPrincipal(t.queryRow(ctx, `SELECT `+principalCols+` FROM principals WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no principal named %q", name)
	}
	if err != nil {
		return nil, wrap("get principal", err)
	}
	return p, nil
}

// PrincipalByUID returns the principal a local uid maps to.
func (s principals) PrincipalByUID(ctx context.Context, uid int) (*paddock.Principal, error) {
	t := s.t
	p, err := scanPrincipal(t.queryRow(ctx, `SELECT `+principalCols+` FROM principals WHERE uid = ?`, uid))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no principal has uid %d", uid)
	}
	if err != nil {
		return nil, wrap("get principal by uid", err)
	}
	return p, nil
}

// List lists the principals, by name.
func (s principals) List(ctx context.Context) ([]*paddock.Principal, error) {
	t := s.t
	rows, err := t.query(ctx, `SELECT `+principalCols+` FROM principals ORDER BY name`)
	if err != nil {
		return nil, wrap("list principals", err)
	}
	defer rows.Close()
	var out []*paddock.Principal
	for rows.Next() {
		p, err := scanPrincipal(rows)
		if err != nil {
			return nil, wrap("list principals", err)
		}
		out = append(out, p)
	}
	return out, wrap2("list principals", rows.Err())
}

// UpdatePrincipal writes p's kind, role, projects and uid; a uid another
// principal has is a conflict.
func (s principals) UpdatePrincipal(ctx context.Context, p *paddock.Principal) error {
	t := s.t
	projects, err := encodeProjects(p.Projects)
	if err != nil {
		return wrap("encode principal", err)
	}
	res, err := t.exec(ctx, `UPDATE principals SET kind = ?, role = ?, projects = ?, uid = ? WHERE name = ?`,
		string(p.Kind), string(p.Role), projects, encodeUID(p.UID), p.Name)
	if isUnique(err) {
		return s.conflict(ctx, p, false)
	}
	if err != nil {
		return wrap("update principal", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no principal named %q", p.Name)
	}
	return nil
}

// DeletePrincipal removes a principal and every token of it.
func (s principals) DeletePrincipal(ctx context.Context, name string) error {
	t := s.t
	// The tokens would go by the foreign key; they are deleted here too,
	// so that their going does not depend on the connection's pragma.
	if _, err := t.exec(ctx, `DELETE FROM tokens WHERE principal = ?`, name); err != nil {
		return wrap("delete principal's tokens", err)
	}
	res, err := t.exec(ctx, `DELETE FROM principals WHERE name = ?`, name)
	if err != nil {
		return wrap("delete principal", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no principal named %q", name)
	}
	return nil
}

// CreateToken inserts t (its hash, never the token); a taken id is a
// conflict, a missing principal not found.
func (s principals) CreateToken(ctx context.Context, tok *paddock.Token) error {
	t := s.t
	_, err := t.exec(ctx, `INSERT INTO tokens (id, principal, hash, created_at, expires_at, revoked_at, last_used_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		tok.ID, tok.Principal, tok.Hash, fmtTime(tok.CreatedAt), fmtOptTime(tok.ExpiresAt), fmtOptTime(tok.RevokedAt), fmtOptTime(tok.LastUsedAt))
	if isUnique(err) {
		return paddock.Errorf(paddock.CodeConflict, "a token with id %q already exists", tok.ID)
	}
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
		return paddock.Errorf(paddock.CodeNotFound, "no principal named %q", tok.Principal)
	}
	return wrap2("create token", err)
}

const tokenCols = `id, principal, hash, created_at, expires_at, revoked_at, last_used_at`

func scanToken(row interface{ Scan(...any) error }) (*paddock.Token, error) {
	var tok paddock.Token
	var created string
	var expires, revoked, used sql.NullString
	if err := row.Scan(&tok.ID, &tok.Principal, &tok.Hash, &created, &expires, &revoked, &used); err != nil {
		return nil, err
	}
	tok.CreatedAt = parseTime(created)
	tok.ExpiresAt, tok.RevokedAt, tok.LastUsedAt = parseOptTime(expires), parseOptTime(revoked), parseOptTime(used)
	return &tok, nil
}

// Token returns a token by id.
func (s principals) Token(ctx context.Context, id string) (*paddock.Token, error) {
	t := s.t
	tok, err := scanToken(t.queryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no token %q", id)
	}
	if err != nil {
		return nil, wrap("get token", err)
	}
	return tok, nil
}

// Tokens lists a principal's tokens (every token if ""), oldest first.
func (s principals) Tokens(ctx context.Context, principal string) ([]*paddock.Token, error) {
	t := s.t
	q := `SELECT ` + tokenCols + ` FROM tokens`
	var args []any
	if principal != "" {
		q += ` WHERE principal = ?`
		args = append(args, principal)
	}
	rows, err := t.query(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, wrap("list tokens", err)
	}
	defer rows.Close()
	var out []*paddock.Token
	for rows.Next() {
		tok, err := scanToken(rows)
		if err != nil {
			return nil, wrap("list tokens", err)
		}
		out = append(out, tok)
	}
	return out, wrap2("list tokens", rows.Err())
}

// UpdateToken writes t's revocation and last use.
func (s principals) UpdateToken(ctx context.Context, tok *paddock.Token) error {
	t := s.t
	res, err := t.exec(ctx, `UPDATE tokens SET revoked_at = ?, last_used_at = ? WHERE id = ?`,
		fmtOptTime(tok.RevokedAt), fmtOptTime(tok.LastUsedAt), tok.ID)
	if err != nil {
		return wrap("update token", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no token %q", tok.ID)
	}
	return nil
}

// Principals is paddock.PrincipalStore on a Tx.
func (t *Tx) Principals() paddock.PrincipalStore { return principals{t} }

// principals is paddock.PrincipalStore on a Tx.
type principals struct{ t *Tx }
