// Package identity keeps who may call paddock besides the operator and
// the runs' agents: named people and services (principals), each with a
// role scoped to projects, and their bearer tokens. The store holds them,
// so every node of a cluster sees a principal removed or a token revoked
// at its next call.
//
// A token is pdk_tok_ID_SECRET. It is shown once, when made; the store
// keeps its id and the SHA-256 of the whole token, which a presented
// token's is compared with in constant time. No error, log line or
// event carries a token.
package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/internal/lazyre"
)

// TokenPrefix starts every principal's token.
const TokenPrefix = "pdk_tok_"

// MaxTokenLife is the longest a token may be made to last.
const MaxTokenLife = 366 * 24 * time.Hour

// lastUseStep is how stale a token's recorded last use may be: a call
// writes it only when it is older, so calls do not each write.
const lastUseStep = time.Minute

// Service keeps the principals and their tokens in the store.
type Service struct {
	Store  paddock.Store
	Logger *slog.Logger
	// Now is the clock; time.Now if nil.
	Now func() time.Time

	mu      sync.Mutex
	lastUse map[string]time.Time // token id → last use written
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Service) log() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

var nameRE = lazyre.New(`^[a-z0-9][a-z0-9._@-]{0,63}$`)

// ValidName reports whether name may name a principal: lower-case
// letters, digits and . _ @ -, at most 64, starting with a letter or a
// digit (an e-mail address or a service's name).
func ValidName(name string) bool { return nameRE.MatchString(name) }

func check(req *paddock.PrincipalRequest) error {
	if !ValidName(req.Name) {
		return paddock.Errorf(paddock.CodeBadRequest, "%q cannot name a principal: use lower-case letters, digits and . _ @ -, at most 64", req.Name)
	}
	if req.Kind == "" {
		req.Kind = paddock.PrincipalPerson
	}
	if req.Kind != paddock.PrincipalPerson && req.Kind != paddock.PrincipalService {
		return paddock.Errorf(paddock.CodeBadRequest, "kind %q is neither person nor service", req.Kind)
	}
	if !req.Role.Valid() {
		return paddock.Errorf(paddock.CodeBadRequest, "role %q is none of admin, orchestrator, reviewer, viewer", req.Role)
	}
	switch {
	case req.UID != nil && *req.UID < 0:
		return paddock.Errorf(paddock.CodeBadRequest, "uid %d is not a user id", *req.UID)
	case req.UID != nil && (*req.UID == 0 || *req.UID == os.Geteuid()):
		// Mapped, the operator would be that principal on its own socket,
		// and could undo it only with the token file.
		return paddock.Errorf(paddock.CodeBadRequest, "uid %d is root's or the daemon's own: the operator, whom no principal stands for", *req.UID)
	}
	for _, p := range req.Projects {
		if strings.TrimSpace(p) == "" {
			return paddock.Errorf(paddock.CodeBadRequest, "an empty project name scopes nothing")
		}
	}
	return nil
}

// projectsExist refuses a scope that names an unknown project: a typo
// would scope a principal to nothing, silently.
func projectsExist(ctx context.Context, tx paddock.Tx, names []string) error {
	for _, n := range names {
		if _, err := tx.Project(ctx, n); err != nil {
			return fmt.Errorf("principal's projects: %w", err)
		}
	}
	return nil
}

// AddPrincipal adds a principal; by is who asked (logged).
func (s *Service) AddPrincipal(ctx context.Context, req paddock.PrincipalRequest, by string) (*paddock.Principal, error) {
	if err := check(&req); err != nil {
		return nil, err
	}
	p := &paddock.Principal{Name: req.Name, Kind: req.Kind, Role: req.Role, Projects: slices.Compact(slices.Sorted(slices.Values(req.Projects))),
		UID: req.UID, CreatedAt: s.now(), CreatedBy: by}
	if len(p.Projects) == 0 {
		p.Projects = nil
	}
	err := s.Store.Update(ctx, func(tx paddock.Tx) error {
		if err := projectsExist(ctx, tx, p.Projects); err != nil {
			return err
		}
		return tx.Principals().CreatePrincipal(ctx, p)
	})
	if err != nil {
		return nil, err
	}
	s.log().Info("principal added", "principal", p.Name, "role", p.Role, "projects", p.Projects, "by", by)
	return p, nil
}

// SetPrincipal changes a principal's kind, role, projects and uid (the
// whole of them, as req gives them); its tokens stay.
func (s *Service) SetPrincipal(ctx context.Context, name string, req paddock.PrincipalRequest, by string) (*paddock.Principal, error) {
	if req.Name == "" {
		req.Name = name
	}
	if req.Name != name {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "a principal keeps its name (%s); add another and remove this one", name)
	}
	if err := check(&req); err != nil {
		return nil, err
	}
	var p *paddock.Principal
	err := s.Store.Update(ctx, func(tx paddock.Tx) error {
		var err error
		if p, err = tx.Principals().Principal(ctx, name); err != nil {
			return err
		}
		if err := projectsExist(ctx, tx, req.Projects); err != nil {
			return err
		}
		p.Kind, p.Role, p.UID = req.Kind, req.Role, req.UID
		p.Projects = slices.Compact(slices.Sorted(slices.Values(req.Projects)))
		if len(p.Projects) == 0 {
			p.Projects = nil
		}
		return tx.Principals().UpdatePrincipal(ctx, p)
	})
	if err != nil {
		return nil, err
	}
	s.log().Info("principal changed", "principal", p.Name, "role", p.Role, "projects", p.Projects, "by", by)
	return p, nil
}

// Principals lists the principals.
func (s *Service) Principals(ctx context.Context) (ps []*paddock.Principal, err error) {
	err = s.Store.View(ctx, func(tx paddock.Tx) error {
		ps, err = tx.Principals().List(ctx)
		return err
	})
	return ps, err
}

// Principal returns one principal.
func (s *Service) Principal(ctx context.Context, name string) (p *paddock.Principal, err error) {
	err = s.Store.View(ctx, func(tx paddock.Tx) error {
		p, err = tx.Principals().Principal(ctx, name)
		return err
	})
	return p, err
}

// RemovePrincipal removes a principal and its tokens: its calls are
// refused from the next one on, on every node.
func (s *Service) RemovePrincipal(ctx context.Context, name, by string) (*paddock.Principal, error) {
	var p *paddock.Principal
	err := s.Store.Update(ctx, func(tx paddock.Tx) error {
		var err error
		if p, err = tx.Principals().Principal(ctx, name); err != nil {
			return err
		}
		return tx.Principals().DeletePrincipal(ctx, name)
	})
	if err != nil {
		return nil, err
	}
	s.log().Info("principal removed", "principal", name, "by", by)
	return p, nil
}

// CreateToken makes a token for a principal. The answer holds the token
// itself, which is never shown again.
func (s *Service) CreateToken(ctx context.Context, req paddock.TokenRequest, by string) (*paddock.NewToken, error) {
	var life time.Duration
	if req.Expires != "" {
		d, err := parseLife(req.Expires)
		if err != nil {
			return nil, err
		}
		life = d
	}
	id, secret := random(10), random(32)
	full := TokenPrefix + id + "_" + secret
	t := &paddock.Token{ID: id, Principal: req.Principal, Hash: Hash(full), CreatedAt: s.now()}
	if life > 0 {
		t.ExpiresAt = t.CreatedAt.Add(life)
	}
	err := s.Store.Update(ctx, func(tx paddock.Tx) error {
		if _, err := tx.Principals().Principal(ctx, req.Principal); err != nil {
			return err
		}
		return tx.Principals().CreateToken(ctx, t)
	})
	if err != nil {
		return nil, err
	}
	s.log().Info("token made", "principal", t.Principal, "token_id", t.ID, "expires", t.ExpiresAt, "by", by)
	return &paddock.NewToken{Token: *t, Secret: full}, nil
}

// parseLife reads a token's life: a Go duration, or a number of days
// ("30d").
func parseLife(v string) (time.Duration, error) {
	var d time.Duration
	var err error
	if n, ok := strings.CutSuffix(v, "d"); ok {
		var days int
		if _, err = fmt.Sscanf(n, "%d", &days); err == nil && fmt.Sprint(days) == n {
			d = time.Duration(days) * 24 * time.Hour
		} else {
			err = fmt.Errorf("not a number of days")
		}
	} else {
		d, err = time.ParseDuration(v)
	}
	if err != nil || d <= 0 || d > MaxTokenLife {
		return 0, paddock.Errorf(paddock.CodeBadRequest, "expires %q is no life for a token: give a duration (720h, 30d) of at most 366 days", v)
	}
	return d, nil
}

// Tokens lists a principal's tokens (every token if principal is "").
func (s *Service) Tokens(ctx context.Context, principal string) (ts []*paddock.Token, err error) {
	err = s.Store.View(ctx, func(tx paddock.Tx) error {
		if principal != "" {
			if _, err := tx.Principals().Principal(ctx, principal); err != nil {
				return err
			}
		}
		ts, err = tx.Principals().Tokens(ctx, principal)
		return err
	})
	return ts, err
}

// RevokeToken revokes a token by its id: refused from the next call on,
// on every node. Revoking one revoked already changes nothing.
func (s *Service) RevokeToken(ctx context.Context, id, by string) (*paddock.Token, error) {
	var t *paddock.Token
	err := s.Store.Update(ctx, func(tx paddock.Tx) error {
		var err error
		if t, err = tx.Principals().Token(ctx, id); err != nil {
			return err
		}
		if !t.RevokedAt.IsZero() {
			return nil
		}
		t.RevokedAt = s.now()
		return tx.Principals().UpdateToken(ctx, t)
	})
	if err != nil {
		return nil, err
	}
	s.log().Info("token revoked", "principal", t.Principal, "token_id", t.ID, "by", by)
	return t, nil
}

// errUnknown is the one answer to a token that does not admit: it says
// no more than that, whatever the reason, and never the token.
func errUnknown() error {
	return paddock.Errorf(paddock.CodeUnauthorized, "unknown token: neither the daemon's (the token file in its state directory), a live principal's, nor a live run's")
}

// Authenticate returns the caller a principal's token admits: it must be
// one the store knows, neither revoked nor expired, of a principal that
// still exists. The store is read at every call, so a revocation holds at
// once on every node.
func (s *Service) Authenticate(ctx context.Context, token string) (*paddock.Caller, error) {
	rest, ok := strings.CutPrefix(token, TokenPrefix)
	id, _, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || id == "" {
		return nil, errUnknown()
	}
	now := s.now()
	var c *paddock.Caller
	var t *paddock.Token
	err := s.Store.View(ctx, func(tx paddock.Tx) error {
		var err error
		if t, err = tx.Principals().Token(ctx, id); err != nil {
			return err
		}
		got := Hash(token)
		if subtle.ConstantTimeCompare([]byte(got), []byte(t.Hash)) != 1 || !t.Live(now) {
			return errUnknown()
		}
		p, err := tx.Principals().Principal(ctx, t.Principal)
		if err != nil {
			return err
		}
		c = callerOf(p)
		c.Token = t.ID
		return nil
	})
	if err != nil {
		if paddock.IsCode(err, paddock.CodeNotFound) || paddock.IsCode(err, paddock.CodeUnauthorized) {
			return nil, errUnknown()
		}
		return nil, fmt.Errorf("reading a token: %w", err)
	}
	s.used(ctx, t, now)
	return c, nil
}

// used records a token's last use, at most once per lastUseStep.
func (s *Service) used(ctx context.Context, t *paddock.Token, now time.Time) {
	s.mu.Lock()
	if s.lastUse == nil {
		s.lastUse = map[string]time.Time{}
	}
	last := s.lastUse[t.ID]
	if last.IsZero() {
		last = t.LastUsedAt
	}
	due := now.Sub(last) >= lastUseStep
	if due {
		s.lastUse[t.ID] = now // claimed: other calls meanwhile do not write
	}
	s.mu.Unlock()
	if !due {
		return
	}
	// A call its client gave up on still records that it came.
	ctx = context.WithoutCancel(ctx)
	err := s.Store.Update(ctx, func(tx paddock.Tx) error {
		cur, err := tx.Principals().Token(ctx, t.ID)
		if err != nil {
			return err
		}
		cur.LastUsedAt = now
		return tx.Principals().UpdateToken(ctx, cur)
	})
	if err != nil && !paddock.IsCode(err, paddock.CodeNotFound) {
		// Only the record of use is lost; the call goes on, and the next
		// one tries again.
		s.mu.Lock()
		delete(s.lastUse, t.ID)
		s.mu.Unlock()
		s.log().Warn("recording a token's last use failed", "token_id", t.ID, "err", err)
	}
}

// CallerByUID returns the principal a local uid maps to, or nil.
func (s *Service) CallerByUID(ctx context.Context, uid int) (*paddock.Caller, error) {
	var p *paddock.Principal
	err := s.Store.View(ctx, func(tx paddock.Tx) (err error) {
		p, err = tx.Principals().PrincipalByUID(ctx, uid)
		return err
	})
	if paddock.IsCode(err, paddock.CodeNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the principal of uid %d: %w", uid, err)
	}
	return callerOf(p), nil
}

func callerOf(p *paddock.Principal) *paddock.Caller {
	return &paddock.Caller{Principal: p.Name, Role: p.Role, Projects: p.Projects, Name: p.Name, Since: p.CreatedAt}
}

// Recheck is c again, now, for what outlives the call that admitted it (a
// stream, a review page session): its principal's role and projects as
// they are now, refused if the principal is gone or was made again since,
// or if the token that admitted it was revoked or expired.
func (s *Service) Recheck(ctx context.Context, c *paddock.Caller) (*paddock.Caller, error) {
	now := s.now()
	var out *paddock.Caller
	err := s.Store.View(ctx, func(tx paddock.Tx) error {
		p, err := tx.Principals().Principal(ctx, c.Principal)
		if err != nil {
			return err
		}
		if !c.Since.IsZero() && !p.CreatedAt.Equal(c.Since) {
			return errGone(c.Principal)
		}
		if c.Token != "" {
			t, err := tx.Principals().Token(ctx, c.Token)
			if err != nil {
				return err
			}
			if !t.Live(now) {
				return errGone(c.Principal)
			}
		}
		out = callerOf(p)
		out.Token = c.Token
		return nil
	})
	if paddock.IsCode(err, paddock.CodeNotFound) {
		return nil, errGone(c.Principal)
	}
	if err != nil && !paddock.IsCode(err, paddock.CodeUnauthorized) {
		return nil, fmt.Errorf("checking principal %s again: %w", c.Principal, err)
	}
	return out, err
}

func errGone(name string) error {
	return paddock.Errorf(paddock.CodeUnauthorized, "principal %s's credential (its token, or the principal itself) is no longer live", name)
}

// Hash is the hex SHA-256 of a token, as the store keeps it.
func Hash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

var enc = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// random is n random bytes in lower-case base32.
func random(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return enc.EncodeToString(b)
}
