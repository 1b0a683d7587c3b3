package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/paddock-dev/paddock"
)

// encodeUID stores a principal's uid, none as NULL.
func encodeUID(uid *int) any {
	if uid == nil {
		return nil
	}
	return int64(*uid)
}

// conflict says which of p's unique keys another principal has.
func (s principals) conflict(ctx context.Context, p *paddock.Principal, creating bool) error {
	t := s.t
	if creating {
		taken, err := exists(ctx, t, `SELECT 1 FROM principals WHERE name = $1`, p.Name)
		if err != nil {
			return wrap("create principal", err)
		}
		if taken {
			return paddock.Errorf(paddock.CodeConflict, "a principal named %q already exists", p.Name)
		}
	}
	if p.UID != nil {
		var other string
		err := t.tx.QueryRow(ctx, `SELECT name FROM principals WHERE uid = $1 AND name <> $2`, int64(*p.UID), p.Name).Scan(&other)
		if err == nil {
			return paddock.Errorf(paddock.CodeConflict, "uid %d already maps to principal %q", *p.UID, other)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return wrap("find principal by uid", err)
		}
	}
	return paddock.Errorf(paddock.CodeConflict, "principal %q conflicts with another", p.Name)
}

// CreatePrincipal inserts p; a taken name, or a uid another principal
// has, is a conflict.
func (s principals) CreatePrincipal(ctx context.Context, p *paddock.Principal) error {
	t := s.t
	projects, err := jsonText(p.Projects, len(p.Projects) == 0)
	if err != nil {
		return wrap("encode principal", err)
	}
	tag, err := t.tx.Exec(ctx, `INSERT INTO principals (name, kind, role, projects, uid, created_at, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		p.Name, string(p.Kind), string(p.Role), projects, encodeUID(p.UID), p.CreatedAt.UTC(), p.CreatedBy)
	if err != nil {
		return wrap("create principal", err)
	}
	if tag.RowsAffected() == 0 {
		return s.conflict(ctx, p, true)
	}
	return nil
}

const principalCols = `name, kind, role, projects, uid, created_at, created_by`

func scanPrincipal(row scanner) (*paddock.Principal, error) {
	var p paddock.Principal
	var kind, role string
	var projects *string
	var uid *int64
	if err := row.Scan(&p.Name, &kind, &role, &projects, &uid, &p.CreatedAt, &p.CreatedBy); err != nil {
		return nil, err
	}
	p.Kind, p.Role, p.CreatedAt = paddock.PrincipalKind(kind), paddock.Role(role), p.CreatedAt.UTC()
	if err := unmarshalOpt(projects, &p.Projects); err != nil {
		return nil, fmt.Errorf("projects of %s: %w", p.Name, err)
	}
	if len(p.Projects) == 0 {
		p.Projects = nil
	}
	if uid != nil {
		n := int(*uid)
		p.UID = &n
	}
	return &p, nil
}

// Principal returns a principal by name.
func (s principals) Principal(ctx context.Context, name string) (*paddock.Principal, error) {
	t := s.t
	p, err := scanPrincipal(t.tx.QueryRow(ctx, `SELECT `+principalCols+` FROM principals WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
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
	p, err := scanPrincipal(t.tx.QueryRow(ctx, `SELECT `+principalCols+` FROM principals WHERE uid = $1`, int64(uid)))
	if errors.Is(err, pgx.ErrNoRows) {
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
	return collect(ctx, t, "list principals", false, scanPrincipal, `SELECT `+principalCols+` FROM principals ORDER BY name`)
}

// UpdatePrincipal writes p's kind, role, projects and uid; a uid another
// principal has is a conflict. With a uid the statement runs in a
// savepoint, so that the answer leaves the transaction usable.
func (s principals) UpdatePrincipal(ctx context.Context, p *paddock.Principal) error {
	t := s.t
	projects, err := jsonText(p.Projects, len(p.Projects) == 0)
	if err != nil {
		return wrap("encode principal", err)
	}
	q := `UPDATE principals SET kind = $1, role = $2, projects = $3, uid = $4 WHERE name = $5`
	args := []any{string(p.Kind), string(p.Role), projects, encodeUID(p.UID), p.Name}
	var n int64
	if p.UID != nil {
		tag, err := t.inSavepoint(ctx, q, args...)
		if sqlState(err) == uniqueViolation {
			return s.conflict(ctx, p, false)
		}
		if err != nil {
			return wrap("update principal", err)
		}
		n = tag.RowsAffected()
	} else {
		tag, err := t.tx.Exec(ctx, q, args...)
		if err != nil {
			return wrap("update principal", err)
		}
		n = tag.RowsAffected()
	}
	if n == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no principal named %q", p.Name)
	}
	return nil
}

// DeletePrincipal removes a principal and every token of it (by the
// foreign key).
func (s principals) DeletePrincipal(ctx context.Context, name string) error {
	t := s.t
	tag, err := t.tx.Exec(ctx, `DELETE FROM principals WHERE name = $1`, name)
	if err != nil {
		return wrap("delete principal", err)
	}
	if tag.RowsAffected() == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no principal named %q", name)
	}
	return nil
}

// CreateToken inserts tok (its hash, never the token); a taken id is a
// conflict, a missing principal not found.
func (s principals) CreateToken(ctx context.Context, tok *paddock.Token) error {
	t := s.t
	tag, err := t.tx.Exec(ctx, `INSERT INTO tokens (id, principal, hash, created_at, expires_at, revoked_at, last_used_at)
		SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM principals WHERE name = $2)
		ON CONFLICT DO NOTHING`,
		tok.ID, tok.Principal, tok.Hash, tok.CreatedAt.UTC(), optTime(tok.ExpiresAt), optTime(tok.RevokedAt), optTime(tok.LastUsedAt))
	if sqlState(err) == foreignKeyViolation {
		return paddock.Errorf(paddock.CodeNotFound, "no principal named %q", tok.Principal)
	}
	if err != nil {
		return wrap("create token", err)
	}
	if tag.RowsAffected() == 0 {
		taken, err := exists(ctx, t, `SELECT 1 FROM tokens WHERE id = $1`, tok.ID)
		if err != nil {
			return wrap("create token", err)
		}
		if taken {
			return paddock.Errorf(paddock.CodeConflict, "a token with id %q already exists", tok.ID)
		}
		return paddock.Errorf(paddock.CodeNotFound, "no principal named %q", tok.Principal)
	}
	return nil
}

const tokenCols = `id, principal, hash, created_at, expires_at, revoked_at, last_used_at`

func scanToken(row scanner) (*paddock.Token, error) {
	var tok paddock.Token
	var expires, revoked, used *time.Time
	if err := row.Scan(&tok.ID, &tok.Principal, &tok.Hash, &tok.CreatedAt, &expires, &revoked, &used); err != nil {
		return nil, err
	}
	tok.CreatedAt = tok.CreatedAt.UTC()
	tok.ExpiresAt, tok.RevokedAt, tok.LastUsedAt = fromOptTime(expires), fromOptTime(revoked), fromOptTime(used)
	return &tok, nil
}

// Token returns a token by id.
func (s principals) Token(ctx context.Context, id string) (*paddock.Token, error) {
	t := s.t
	tok, err := scanToken(t.tx.QueryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
		q += ` WHERE principal = $1`
		args = append(args, principal)
	}
	return collect(ctx, t, "list tokens", false, scanToken, q+` ORDER BY created_at, id`, args...)
}

// UpdateToken writes tok's revocation and last use.
func (s principals) UpdateToken(ctx context.Context, tok *paddock.Token) error {
	t := s.t
	tag, err := t.tx.Exec(ctx, `UPDATE tokens SET revoked_at = $1, last_used_at = $2 WHERE id = $3`,
		optTime(tok.RevokedAt), optTime(tok.LastUsedAt), tok.ID)
	if err != nil {
		return wrap("update token", err)
	}
	if tag.RowsAffected() == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no token %q", tok.ID)
	}
	return nil
}

// Principals is paddock.PrincipalStore on a Tx.
func (t *Tx) Principals() paddock.PrincipalStore { return principals{t} }

// principals is paddock.PrincipalStore on a Tx.
type principals struct{ t *Tx }
