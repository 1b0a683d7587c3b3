package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/approval"
	"github.com/paddock-dev/paddock/attribution"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/gitx"
)

// Projects declares projects and agent definitions: their registration, their repositories' checks and the project lock.
type Projects struct {
	*kernel
	// the services it calls
	nodes *Nodes
}

// AddProject declares the repository at req.Path as a project. An empty name
// is derived from the directory's name.
func (ps *Projects) AddProject(ctx context.Context, req paddock.AddProjectRequest) (*paddock.Project, error) {
	path, name := req.Path, req.Name
	if path == "" {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "a project needs a path")
	}
	if !filepath.IsAbs(path) {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "project path %q must be absolute", path)
	}
	repo, err := ps.Git.Inspect(ctx, path)
	if err != nil {
		return nil, err
	}
	if name == "" {
		if name = paddock.SlugName(filepath.Base(repo.Root)); name == "" {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "cannot derive a name from %s; give one with --name", repo.Root)
		}
	} else if err := paddock.ValidateName(name); err != nil {
		return nil, err
	}
	if inside(ps.WorkspacesDir, repo.Root) {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "%s is a paddock workspace, not a project", path)
	}
	fp, err := ps.Git.Fingerprints().Fingerprint(ctx, repo)
	if err != nil {
		return nil, internal("reading the repository's fingerprint failed", err)
	}
	p := &paddock.Project{Name: name, Root: repo.Root, Fingerprint: fp, CreatedAt: now()}
	if p.Protected, err = protectedList(req.Protect, req.NoDefaultProtect); err != nil {
		return nil, err
	}
	if err := checkRules(req.AllowAttribution); err != nil {
		return nil, err
	}
	p.AttributionAllow = req.AllowAttribution
	if p.Caches, err = parseCaches(req.Caches); err != nil {
		return nil, err
	}
	if err := ps.update(ctx, func(tx paddock.Tx) error { return tx.CreateProject(ctx, p) }); err != nil {
		return nil, err
	}
	// With nodes, the declaring node's own fingerprint of its copy is the
	// declared one: its .git replaced later is refused, as on a daemon of
	// its own, not taken for a new copy.
	if err := ps.nodes.keepNodeFingerprint(p, fp); err != nil {
		ps.log().Warn("cannot keep this node's fingerprint of the project", "project", name, "err", err)
	}
	ps.log().Info("project added", "project", name, "root", repo.Root)
	return p, nil
}

// protectedList is the protected-path list a project stores: nil for the
// default list, the default list plus protect, or protect alone.
func protectedList(protect []string, noDefault bool) ([]string, error) {
	var out []string
	switch {
	case noDefault:
		out = append([]string{}, protect...)
	case len(protect) > 0:
		out = append(append([]string{}, confine.DefaultProtected...), protect...)
	default:
		return nil, nil
	}
	if err := (&confine.Policy{Protected: out}).Validate(); err != nil {
		return nil, err
	}
	return out, nil
}

func checkRules(rules []string) error {
	for _, rule := range rules {
		if !slices.Contains(attribution.Names(), rule) {
			return paddock.Errorf(paddock.CodeBadRequest, "unknown attribution rule %q (rules: %s)", rule, strings.Join(attribution.Names(), ", "))
		}
	}
	return nil
}

// SetProject changes a project's settings (see paddock.SetProjectRequest).
// It is allowed while runs exist: a run's tool calls and its next command
// follow the new protected paths, its next submission the new rules. The
// change is logged with who made it and recorded on every live run of the
// project. An approval policy holds from the next approval, apply or
// landing on: what was approved under the old one is decided again.
func (ps *Projects) SetProject(ctx context.Context, name, by string, req paddock.SetProjectRequest) (*paddock.Project, error) {
	setProtect := len(req.Protect) > 0 || req.NoDefaultProtect
	switch {
	case req.DefaultProtect && setProtect:
		return nil, paddock.Errorf(paddock.CodeBadRequest, "--default-protect goes back to the default list; it takes no --protect or --no-default-protect")
	case !setProtect && !req.DefaultProtect && req.AllowAttribution == nil && req.Caches == nil && len(req.AddCaches) == 0 && len(req.RemoveCaches) == 0 && req.Checks == nil && req.ApprovalPolicy == nil && !req.DefaultPolicy:
		return nil, paddock.Errorf(paddock.CodeBadRequest, "nothing to set: give --protect, --no-default-protect, --default-protect, --allow-attribution, --cache, --check or --policy")
	}
	if err := checkPolicy(req); err != nil {
		return nil, err
	}
	var checks []paddock.CheckOverride
	if req.Checks != nil {
		var err error
		if checks, err = paddock.ParseCheckOverrides(*req.Checks); err != nil {
			return nil, err
		}
	}
	var caches []paddock.Cache
	if req.Caches != nil {
		var err error
		if caches, err = parseCaches(*req.Caches); err != nil {
			return nil, err
		}
	}
	addCaches, err := parseCaches(req.AddCaches)
	if err != nil {
		return nil, err
	}
	for _, name := range req.RemoveCaches {
		if err := paddock.CheckCacheName(name); err != nil {
			return nil, err
		}
	}
	setCaches := req.Caches != nil || len(addCaches) > 0 || len(req.RemoveCaches) > 0
	protected, err := protectedList(req.Protect, req.NoDefaultProtect)
	if err != nil {
		return nil, err
	}
	if req.AllowAttribution != nil {
		if err := checkRules(*req.AllowAttribution); err != nil {
			return nil, err
		}
	}
	if by == "" {
		by = "unknown"
	}
	var p *paddock.Project
	change := map[string]any{"by": by}
	err = ps.update(ctx, func(tx paddock.Tx) error {
		var err error
		if p, err = tx.Project(ctx, name); err != nil {
			return err
		}
		if setProtect || req.DefaultProtect {
			p.Protected = protected
			change["protected"] = protectedOf(p)
		}
		if req.AllowAttribution != nil {
			p.AttributionAllow = append([]string{}, *req.AllowAttribution...)
			change["attribution_allow"] = p.AttributionAllow
		}
		if setCaches {
			if req.Caches != nil {
				p.Caches = caches
			}
			p.Caches = changeCaches(p.Caches, req.RemoveCaches, addCaches)
			change["caches"] = p.Caches
		}
		if req.Checks != nil {
			p.Checks = checks
			change["checks"] = checks
		}
		if req.ApprovalPolicy != nil || req.DefaultPolicy {
			p.Policy = req.ApprovalPolicy // nil: the default
			change["approval_policy"], change["default_policy"] = approval.Or(p.Policy), p.Policy == nil
		}
		if err := tx.UpdateProject(ctx, p); err != nil {
			return err
		}
		runs, err := tx.Runs(ctx, paddock.RunFilter{Project: name})
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.Workspace == nil || !live(r.Workspace.State) {
				continue
			}
			if _, err := tx.AppendEvent(ctx, r.ID, paddock.EventProjectSettings, change); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	args := []any{"project", name, "by", by}
	if v, ok := change["protected"]; ok {
		args = append(args, "protected", v)
	}
	if v, ok := change["attribution_allow"]; ok {
		args = append(args, "attribution_allow", v)
	}
	if v, ok := change["caches"]; ok {
		args = append(args, "caches", v)
	}
	if v, ok := change["approval_policy"]; ok {
		args = append(args, "approval_policy", approval.Describe(v.(*paddock.ApprovalPolicy)))
	}
	ps.log().Info("project settings changed", args...)
	return p, nil
}

// checkPolicy refuses a request that sets a policy and goes back to the
// default at once, or sets one that is not well formed.
func checkPolicy(req paddock.SetProjectRequest) error {
	if req.ApprovalPolicy != nil && req.DefaultPolicy {
		return paddock.Errorf(paddock.CodeBadRequest, "default_policy goes back to the default approval policy; it takes no approval_policy")
	}
	return approval.Validate(req.ApprovalPolicy)
}

func inside(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// Projects lists the projects.
func (ps *Projects) Projects(ctx context.Context) (out []*paddock.Project, err error) {
	err = ps.Store.View(ctx, func(tx paddock.Tx) error {
		out, err = tx.Projects(ctx)
		return err
	})
	return out, err
}

// CheckoutTimeout bounds the git status ProjectCheckout runs: a create
// asks beside itself, for a note, and a checkout too large to read in that
// time is not worth holding the request (or a git process) for.
const CheckoutTimeout = 10 * time.Second

// ProjectCheckout counts the uncommitted changes in the project's checkout,
// which a new run, made at a revision, does not have. It only reads
// (gitx.Uncommitted, under the hardened runner). A checkout that cannot be
// read (gone, no longer a repository) or not within CheckoutTimeout is a
// conflict: the project's state, not a fault of paddock's.
func (ps *Projects) ProjectCheckout(ctx context.Context, name string) (*paddock.CheckoutStatus, error) {
	p, err := ps.Project(ctx, name)
	if err != nil {
		return nil, err
	}
	g := *ps.Git
	if g.Timeout <= 0 || g.Timeout > CheckoutTimeout {
		g.Timeout = CheckoutTimeout
	}
	n, err := g.Uncommitted(ctx, p.Root)
	switch {
	case err == nil:
		return &paddock.CheckoutStatus{Root: p.Root, Uncommitted: n}, nil
	case errors.Is(err, gitx.ErrTimeout):
		return nil, &paddock.Error{Code: paddock.CodeConflict, Err: err,
			Message: fmt.Sprintf("the status of project %s's checkout %s takes longer than %s; its changes were not counted", p.Name, p.Root, g.Timeout)}
	default:
		return nil, &paddock.Error{Code: paddock.CodeConflict, Err: err,
			Message: fmt.Sprintf("cannot read the status of project %s's checkout %s (is it still a git repository?)", p.Name, p.Root)}
	}
}

// RemoveProject forgets a project and the records of its runs. It refuses
// while any of its runs still has a workspace on disk or holds its lock; the
// repository itself is never touched.
func (ps *Projects) RemoveProject(ctx context.Context, name string) error {
	return ps.update(ctx, func(tx paddock.Tx) error {
		if _, err := tx.Project(ctx, name); err != nil {
			return err
		}
		runs, err := tx.Runs(ctx, paddock.RunFilter{Project: name, Removed: true})
		if err != nil {
			return err
		}
		var open []string
		for _, r := range runs {
			if r.Workspace != nil && r.Workspace.State != paddock.StateCleaned {
				open = append(open, r.ID+" ("+string(r.Workspace.State)+")")
			}
		}
		if len(open) > 0 {
			return paddock.Errorf(paddock.CodeConflict, "project %q still has workspaces: %s; remove them first (retained ones stay until an operator deletes them)",
				name, strings.Join(open, ", ")).WithDetail("runs", open)
		}
		return tx.DeleteProject(ctx, name)
	})
}

// Unlock force-releases the project lock and records who did it on the run
// that held it. Without force it refuses: taking a lock from a live run is a
// decision, not a default. It returns the lock that was released, or nil.
func (ps *Projects) Unlock(ctx context.Context, name, by string, force bool) (*paddock.Lock, error) {
	if !force {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "releasing a project lock another run holds needs --force")
	}
	if by == "" {
		by = "unknown"
	}
	var released *paddock.Lock
	err := ps.update(ctx, func(tx paddock.Tx) error {
		if _, err := tx.Project(ctx, name); err != nil {
			return err
		}
		l, err := tx.Lock(ctx, name)
		if err != nil || l == nil {
			return err
		}
		if _, err := tx.ReleaseLock(ctx, name, l.RunID); err != nil {
			return err
		}
		released = l
		_, err = tx.AppendEvent(ctx, l.RunID, paddock.EventLockForceRelease, map[string]string{"project": name, "by": by})
		return err
	})
	if err != nil {
		return nil, err
	}
	if released != nil {
		ps.log().Warn("project lock force-released", "project", name, "run", released.RunID, "by", by)
	}
	return released, nil
}

// checkRepo verifies that the project root still holds the repository it was
// declared with. It runs before every run is made, in constant time
// whatever the project's history (gitx.CheckFingerprint).
func (ps *Projects) checkRepo(ctx context.Context, p *paddock.Project) (*gitx.Repo, error) {
	repo, err := ps.Git.Inspect(ctx, p.Root)
	if err != nil {
		var pe *paddock.Error
		if errors.As(err, &pe) {
			return nil, paddock.Errorf(paddock.CodeConflict, "project %q: %s", p.Name, pe.Message)
		}
		return nil, err
	}
	fp, err := ps.nodes.nodeFingerprint(ctx, repo, p)
	if err != nil {
		return nil, err
	}
	same, err := ps.Git.Fingerprints().CheckFingerprint(ctx, repo, fp)
	if err != nil {
		return nil, internal("checking the project's repository failed", err)
	}
	if !same {
		return nil, paddock.Errorf(paddock.CodeConflict,
			"project %q: %s now holds a different repository than when it was declared (its .git was replaced, or its first commit is gone)", p.Name, p.Root)
	}
	return repo, nil
}

// protectedOf is the project's protected patterns as its policy has them
// (its own list, or the default one).
func protectedOf(p *paddock.Project) []string {
	if p.Protected != nil {
		return p.Protected
	}
	return confine.DefaultPolicy().Protected
}

// changeCaches is list without the caches named in remove, with each of
// add in place of the cache of its name (at the end if it had none).
func changeCaches(list []paddock.Cache, remove []string, add []paddock.Cache) []paddock.Cache {
	out := slices.DeleteFunc(slices.Clone(list), func(c paddock.Cache) bool { return slices.Contains(remove, c.Name) })
	for _, a := range add {
		if i := slices.IndexFunc(out, func(c paddock.Cache) bool { return c.Name == a.Name }); i >= 0 {
			out[i] = a
		} else {
			out = append(out, a)
		}
	}
	return out
}

// parseCaches reads project add's --cache values; a name given twice is refused.
func parseCaches(specs []string) ([]paddock.Cache, error) {
	var out []paddock.Cache
	seen := map[string]bool{}
	for _, spec := range specs {
		c, err := paddock.ParseCache(spec)
		if err != nil {
			return nil, err
		}
		if seen[c.Name] {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "cache %q given twice", c.Name)
		}
		seen[c.Name] = true
		out = append(out, c)
	}
	return out, nil
}
