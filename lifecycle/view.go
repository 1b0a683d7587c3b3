package lifecycle

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/sandbox"
	"github.com/paddock-dev/paddock/workspace"
	"golang.org/x/sys/unix"
)

// views is what a run's sandbox sees: the view of its workspace, its home, its binds and its own API socket, and the project's hooks.
type views struct {
	*kernel
	// the services it calls
	reviews *Reviews

	overlayProbe overlayProbe
	repoMu       sync.Mutex
	repos        map[string]cachedRepo
	hooks        hooksCache
	layers       layerMatches
}

// layerMatches remembers what the protected patterns match in the layers
// of overlay views that never change (a base's snapshot, a fork's frozen
// layers): every command's view is checked against its protected paths,
// and globbing "**" patterns over a base's whole checkout cost each exec a
// walk of it. A run's own upper layer is read every time.
type layerMatches struct {
	mu sync.Mutex
	m  map[string][]string // layer and patterns → the paths they match
}

// maxLayerMatches bounds the layers remembered; past it they start over.
const maxLayerMatches = 256

func (lm *layerMatches) in(dir string, patterns []string) []string {
	key := dir + "\x00" + strings.Join(patterns, "\x00")
	lm.mu.Lock()
	m, ok := lm.m[key]
	lm.mu.Unlock()
	if ok {
		return m
	}
	m = protectedIn(dir, patterns)
	lm.mu.Lock()
	if lm.m == nil || len(lm.m) >= maxLayerMatches {
		lm.m = map[string][]string{}
	}
	lm.m[key] = m
	lm.mu.Unlock()
	return m
}

// sandboxSpec is what every command of run r shares: its workspace, its
// access, the protected paths made read-only, the uid, an overlay's layers.
func (vw *views) sandboxSpec(ctx context.Context, r *paddock.Run, p *paddock.Project) (sandbox.Spec, error) {
	read := r.Access == paddock.AccessRead
	pol, err := vw.policy(ctx, p)
	if err != nil {
		return sandbox.Spec{}, err
	}
	// The hooks directories are paths, protected ahead whole (the top's
	// hooks by their names).
	patterns := append(append([]string{}, pol.Protected...), pol.HookPaths()...)
	spec := sandbox.Spec{Workspace: r.Workspace.Root, ReadOnly: read, Scratch: read, UID: vw.SandboxUID, GID: vw.SandboxUID,
		OperatorDir: r.Workspace.Kind == paddock.KindOperatorDir}
	binds, err := vw.runBinds(ctx, r, p)
	if err != nil {
		return spec, err
	}
	spec.Binds = binds
	var matched [][]string
	if r.Workspace.Kind != paddock.KindOverlay {
		matched = append(matched, protectedIn(r.Workspace.Root, patterns))
	} else {
		ov, ok := vw.overlayProvider()
		if !ok {
			return spec, paddock.Errorf(paddock.CodeUnsupported, "this daemon makes no overlay workspaces")
		}
		l, err := ov.LayersWithStack(r.Project, r.Workspace)
		if err != nil {
			return spec, internal("reading the run's layers failed", err)
		}
		spec.Overlay = &sandbox.Overlay{Lower: l.Lower, Upper: l.Upper, Work: l.Work, Frozen: l.Frozen}
		// The protected paths of the base and those the run added (paddock's
		// staged recipes among them), read from the layers on the host: a
		// new one gives the run a new harness, whose view protects it. The
		// base's and the frozen layers' never change.
		for _, dir := range append([]string{l.Lower}, l.Frozen...) {
			matched = append(matched, vw.layers.in(dir, patterns))
		}
		matched = append(matched, protectedIn(l.Upper, patterns))
	}
	spec.Protected, spec.Unprotected = protectedSpec(patterns, matched...)
	// The run's own .git (an overlay's, a clone's) is the agent's git to
	// write; a worktree's .git file, which points at its git, stays
	// read-only, as does an operator's directory's.
	if r.Workspace.Kind == paddock.KindOverlay || r.Workspace.Kind == paddock.KindClone {
		spec.Protected = slices.DeleteFunc(spec.Protected, func(p string) bool { return p == ".git" })
	}
	return spec, nil
}

// viewDir is where the daemon reads and writes run r's workspace as its
// commands see it: the workspace itself, or for an overlay run its merged
// view inside the run's harness (it exists nowhere else).
func (vw *views) viewDir(ctx context.Context, r *paddock.Run, p *paddock.Project) (string, error) {
	if r.Workspace.Kind != paddock.KindOverlay {
		return r.Workspace.Root, nil
	}
	if vw.Harnesses == nil {
		return "", paddock.Errorf(paddock.CodeUnsupported, "an overlay workspace needs resident sandboxes, which this daemon does not keep")
	}
	if p == nil {
		var err error
		if p, err = vw.Project(ctx, r.Project); err != nil {
			return "", err
		}
	}
	spec, err := vw.sandboxSpec(ctx, r, p)
	if err != nil {
		return "", err
	}
	return vw.Harnesses.View(ctx, r.ID, spec)
}

// openView opens run r's workspace as its commands see it (viewDir),
// confined by policy, for the daemon's own reads and writes.
func (vw *views) openView(ctx context.Context, r *paddock.Run, p *paddock.Project, policy *confine.Policy) (*confine.Root, error) {
	dir, err := vw.viewDir(ctx, r, p)
	if err != nil {
		return nil, err
	}
	root, err := confine.Open(dir, policy)
	if err != nil {
		return nil, internal("opening the workspace failed", err)
	}
	return root, nil
}

// overlayUpper reads what an overlay run's upper layer holds, without what
// paddock stages under .paddock.
func (vw *views) overlayUpper(r *paddock.Run) (*workspace.Upper, error) {
	ov, ok := vw.overlayProvider()
	if !ok {
		return nil, paddock.Errorf(paddock.CodeUnsupported, "this daemon makes no overlay workspaces")
	}
	l, err := ov.LayersWithStack(r.Project, r.Workspace)
	if err != nil {
		return nil, err
	}
	// A forked run's frozen layers' changes are its own too: its change
	// set is against the base.
	u, err := workspace.ReadLayers(l)
	if err != nil {
		return nil, err
	}
	kept := u.Paths[:0]
	for _, p := range u.Paths {
		if p != ".paddock" && !strings.HasPrefix(p, ".paddock/") {
			kept = append(kept, p)
		}
	}
	u.Paths = kept
	return u, nil
}

// resolveKind turns auto into the kind this machine can make: overlay
// where a sandbox can mount one (probed once), clone elsewhere.
func (vw *views) resolveKind(ctx context.Context, k paddock.WorkspaceKind) (paddock.WorkspaceKind, string) {
	if k != paddock.KindAuto {
		return k, ""
	}
	if err := vw.overlayWorks(ctx); err != nil {
		return paddock.KindClone, "auto: clone (" + paddock.ErrorMessage(err) + ")"
	}
	return paddock.KindOverlay, "auto: overlay"
}

// overlayWorks says whether this daemon can make overlay workspaces here:
// it needs resident sandboxes, and a sandbox must mount one for real
// (probed once).
func (vw *views) overlayWorks(ctx context.Context) error {
	if _, ok := vw.overlayProvider(); !ok || vw.Harnesses == nil || vw.Harnesses.PerExec {
		return paddock.Errorf(paddock.CodeUnsupported, "an overlay workspace needs resident sandboxes (sandbox_mode = resident); use kind clone")
	}
	vw.overlayProbe.mu.Lock()
	defer vw.overlayProbe.mu.Unlock()
	if !vw.overlayProbe.done {
		// What the machine cannot do is remembered; a probe that failed
		// otherwise (a busy machine: the sandbox's uid out of processes
		// for a moment) is tried again, now and at the next run.
		err := sandbox.ProbeOverlay(ctx, vw.WorkspacesDir, vw.SandboxUID)
		for wait := 100 * time.Millisecond; err != nil && !paddock.IsCode(err, paddock.CodeUnsupported) && wait < time.Second && ctx.Err() == nil; wait *= 3 {
			vw.log().Warn("probing overlay workspaces failed; trying again", "err", err)
			time.Sleep(wait)
			err = sandbox.ProbeOverlay(ctx, vw.WorkspacesDir, vw.SandboxUID)
		}
		if err != nil && !paddock.IsCode(err, paddock.CodeUnsupported) {
			return paddock.Errorf(paddock.CodeUnsupported, "overlay workspaces could not be tried here now (%s); use kind clone", paddock.ErrorMessage(err))
		}
		vw.overlayProbe.done, vw.overlayProbe.err = true, err
	}
	if err := vw.overlayProbe.err; err != nil {
		return paddock.Errorf(paddock.CodeUnsupported, "overlay workspaces do not work here (%s); use kind clone", paddock.ErrorMessage(err))
	}
	return nil
}

// overlayProbe remembers whether this machine can mount an overlay
// workspace in a sandbox.
type overlayProbe struct {
	mu   sync.Mutex
	done bool
	err  error
}

// asSandboxUser runs fn on a thread whose file-system uid and gid are the
// sandbox's, so that the run's tools act on its workspace as its commands
// do: one identity, what one writes the other can change (a root daemon's
// file would be root's, which the run's shell could not edit). In an
// overlay mounted in the sandbox's user namespace it is also the only
// way: a file the daemon makes there must belong to an id that namespace
// maps (root is not; the kernel refuses with EOVERFLOW). An operator's
// own directory keeps the daemon's identity (its files are the
// operator's), as does a daemon whose commands run as itself. fn reaches
// the workspace through descriptors opened before (the state directory
// above it is closed to the sandbox's uid), and must not hand its writes
// to other goroutines.
func (vw *views) asSandboxUser(r *paddock.Run, fn func() error) error {
	uid := vw.SandboxUID
	if r.Workspace == nil || r.Workspace.Kind == paddock.KindOperatorDir || uid == 0 || uid == os.Getuid() {
		return fn()
	}
	runtime.LockOSThread()
	unix.Setfsgid(uid)
	unix.Setfsuid(uid)
	err := fn()
	unix.Setfsuid(os.Getuid())
	unix.Setfsgid(os.Getgid())
	if cur, _ := unix.SetfsuidRetUid(-1); cur == os.Getuid() {
		runtime.UnlockOSThread() // restored; otherwise the thread dies with the goroutine
	}
	return err
}

// repoOf is gitx.Inspect of p's repository, remembered while its git
// directory is the same one (same inode): a change set asks on every
// call, and git answers in milliseconds, which an overlay's change set of
// a few files would otherwise mostly be.
func (vw *views) repoOf(ctx context.Context, p *paddock.Project) (*gitx.Repo, error) {
	vw.repoMu.Lock()
	c, ok := vw.repos[p.Root]
	vw.repoMu.Unlock()
	if ok {
		if fi, err := os.Stat(c.repo.CommonDir); err == nil && os.SameFile(fi, c.dir) {
			return c.repo, nil
		}
	}
	repo, err := vw.Git.Inspect(ctx, p.Root)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(repo.CommonDir)
	if err != nil {
		return repo, nil
	}
	vw.repoMu.Lock()
	if vw.repos == nil {
		vw.repos = map[string]cachedRepo{}
	}
	vw.repos[p.Root] = cachedRepo{repo, fi}
	vw.repoMu.Unlock()
	return repo, nil
}

type cachedRepo struct {
	repo *gitx.Repo
	dir  os.FileInfo
}
