package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/broker"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/manifest"
)

// Verifier runs a project's declared checks on a run's change set, in a sandbox of their own.
type Verifier struct {
	*kernel
	// the services it calls
	broker   *Broker
	changes  *Changes
	executor *executor
	reviews  *Reviews
	runs     *Runs
	views    *views
	policies *Policies

	manifests manifestCache
}

// checkNames are the checks verify knows.
var checkNames = []string{manifest.CheckBuild, manifest.CheckTest, manifest.CheckLint, manifest.CheckFormatCheck}

// checks are the commands of the project's manifest at the run's base
// revision: verification runs these and no others (record 002: a model may
// not propose the command that decides whether its own work passed).
func (vf *Verifier) checks(ctx context.Context, r *paddock.Run) ([]manifest.Check, error) {
	mf, err := vf.manifestOf(ctx, r)
	if err != nil {
		return nil, err
	}
	p, err := vf.Project(ctx, r.Project)
	if err != nil {
		return nil, err
	}
	return effectiveChecks(mf, p.Checks), nil
}

// effectiveChecks are the manifest's checks with the operator's overrides
// (from the project's registration) in place of those they name.
func effectiveChecks(mf *manifest.Manifest, overrides []paddock.CheckOverride) []manifest.Check {
	var all []manifest.Check
	for _, n := range checkNames {
		i := slices.IndexFunc(overrides, func(o paddock.CheckOverride) bool { return o.Name == n })
		if i < 0 {
			all = append(all, mf.Checks(n)...)
			continue
		}
		if cmd := overrides[i].Command; cmd != "" {
			all = append(all, manifest.Check{Name: n, Argv: []string{"sh", "-c", cmd}, Adapter: "operator",
				Why: "the project's registration overrides this check (paddock project set --check)"})
		}
	}
	return all
}

// ProjectManifest is what verify runs in a new run of the project: the
// manifest detected at its HEAD, the operator's overrides, and the checks
// that result (paddock manifest PROJECT).
func (vf *Verifier) ProjectManifest(ctx context.Context, name string) (json.RawMessage, error) {
	p, err := vf.Project(ctx, name)
	if err != nil {
		return nil, err
	}
	head, err := vf.Git.Resolve(ctx, p.Root, "HEAD")
	if err != nil {
		return nil, err
	}
	mf, err := vf.ProjectManifestAt(ctx, p, head.SHA)
	if err != nil {
		return nil, err
	}
	checks := effectiveChecks(mf, p.Checks)
	if checks == nil {
		checks = []manifest.Check{}
	}
	return json.Marshal(map[string]any{"project": p.Name, "revision": head.SHA, "manifest": mf,
		"overrides": p.Checks, "checks": checks})
}

// manifestOf reads the project's manifest at the run's base revision, from
// git's objects (never the workspace).
func (vf *Verifier) manifestOf(ctx context.Context, r *paddock.Run) (*manifest.Manifest, error) {
	if r.Workspace == nil {
		return nil, paddock.Errorf(paddock.CodeForbidden, "run %s has no workspace to verify", r.ID).WithRule(paddock.RuleAccessNone)
	}
	p, err := vf.Project(ctx, r.Project)
	if err != nil {
		return nil, err
	}
	rev := r.Workspace.BaseRevision
	if r.ReviewOf != nil {
		// A review or check run's base is the commit it holds: its checks
		// are the reviewed run's base's (a merge queue's: the branch's
		// tip), never the change set's own recipes.
		base, err := vf.reviewedBase(ctx, r)
		if err != nil {
			return nil, err
		}
		rev = base
	}
	return vf.ProjectManifestAt(vf.reviews.objectsCtx(ctx, r), p, rev)
}

// reviewedBase is the base revision of the run review run r reviews.
func (vf *Verifier) reviewedBase(ctx context.Context, r *paddock.Run) (string, error) {
	if r.ReviewOf.Base != "" {
		return r.ReviewOf.Base, nil
	}
	coder, err := vf.Run(ctx, r.ReviewOf.Run)
	if err != nil || coder.Workspace == nil {
		return "", paddock.Errorf(paddock.CodeConflict, "review run %s: the base of run %s, where its checks are read, is unknown (%v)", r.ID, r.ReviewOf.Run, err)
	}
	return coder.Workspace.BaseRevision, nil
}

// manifestCache keeps the manifests detected lately, by repository and
// revision: a revision's tree never changes, and listing a large one (git
// ls-tree) is what detection costs; capabilities and each verify ask.
type manifestCache struct {
	mu sync.Mutex
	m  map[string]*manifest.Manifest
}

const manifestCacheSize = 64

func (c *manifestCache) get(key string) *manifest.Manifest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

func (c *manifestCache) put(key string, mf *manifest.Manifest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= manifestCacheSize {
		c.m = map[string]*manifest.Manifest{}
	}
	c.m[key] = mf
}

// ProjectManifestAt detects a project's manifest at a revision.
func (vf *Verifier) ProjectManifestAt(ctx context.Context, p *paddock.Project, rev string) (*manifest.Manifest, error) {
	repo, err := vf.Git.Inspect(ctx, p.Root)
	if err != nil {
		return nil, err
	}
	key := repo.CommonDir + "\x00" + rev
	if mf := vf.manifests.get(key); mf != nil {
		return mf, nil
	}
	files, err := vf.Git.FilesAt(ctx, repo.CommonDir, rev)
	if err != nil {
		return nil, err
	}
	mf := manifest.DetectTree(gitTree{ctx: ctx, m: vf, gitDir: repo.CommonDir, rev: rev, files: files})
	vf.manifests.put(key, mf)
	return mf, nil
}

// gitTree is a revision's tree as manifest reads it: from git's objects.
type gitTree struct {
	ctx         context.Context
	m           *Verifier
	gitDir, rev string
	files       []string
}

func (t gitTree) Files() []string { return t.files }
func (t gitTree) ReadFile(p string) ([]byte, bool) {
	b, err := t.m.Git.FileAt(t.ctx, t.gitDir, t.rev, p)
	return b, err == nil
}

// verifyPlan is the checks a verify runs: those named (build, lint and
// test if none: manifest.VerifyOrder), refused if the manifest declares
// none of them.
func (vf *Verifier) verifyPlan(ctx context.Context, r *paddock.Run, names []string) ([]manifest.Check, error) {
	for _, n := range names {
		if !slices.Contains(checkNames, n) {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "unknown check %q (%s)", n, strings.Join(checkNames, ", "))
		}
	}
	all, err := vf.checks(ctx, r)
	if err != nil {
		return nil, err
	}
	want := names
	if len(want) == 0 {
		want = manifest.VerifyOrder
	}
	var plan []manifest.Check
	// In the order that makes sense whatever the order asked: a build
	// before the tests that need it.
	for _, n := range []string{manifest.CheckBuild, manifest.CheckLint, manifest.CheckTest, manifest.CheckFormatCheck} {
		if !slices.Contains(want, n) {
			continue
		}
		for _, c := range all {
			if c.Name == n {
				plan = append(plan, c)
			}
		}
	}
	if len(plan) == 0 {
		var have []string
		for _, c := range all {
			if !slices.Contains(have, c.Name) {
				have = append(have, c.Name)
			}
		}
		return nil, paddock.Errorf(paddock.CodeUnsupported, "the project's manifest declares no %s check (it declares: %s)",
			strings.Join(want, " or "), cmpList(have)).WithRule("no_check")
	}
	return plan, nil
}

func cmpList(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	return strings.Join(ss, ", ")
}

// Verify runs the project's checks in the run's workspace, in its sandbox:
// the verify tool. The agent picks checks by name, never a command line.
func (vf *Verifier) Verify(ctx context.Context, id string, req paddock.VerifyRequest) (*paddock.VerifyResult, error) {
	return vf.verify(ctx, id, req, nil)
}

// verify is Verify with the commands' output also in logw (a job's log).
func (vf *Verifier) verify(ctx context.Context, id string, req paddock.VerifyRequest, logw io.Writer) (_ *paddock.VerifyResult, err error) {
	ctx, end := vf.span(ctx, "verify", nil, attrRun.String(id))
	defer func() { end(err) }()
	if err := vf.checkOpen(); err != nil {
		return nil, err
	}
	res, err := vf.broker.broker(ctx, id, brokered{call: broker.Call{Tool: paddock.ToolVerify}, args: mustJSON(req),
		run: func(ctx context.Context, c *callContext) (any, []callEvent, error) {
			c.masked = true
			return vf.runChecks(ctx, c, req.Checks, logw)
		}})
	if err != nil {
		return nil, err
	}
	out := res.(*paddock.VerifyResult)
	// A pass on the submitted hash is what a project's automatic
	// approval waits for.
	vf.policies.afterVerify(ctx, id, out)
	return out, nil
}

// runChecks runs the planned checks one after the other, network off, until
// one fails, and ties the result to the change set's hash.
func (vf *Verifier) runChecks(ctx context.Context, c *callContext, names []string, logw io.Writer) (*paddock.VerifyResult, []callEvent, error) {
	plan, err := vf.verifyPlan(ctx, c.run, names)
	if err != nil {
		return nil, nil, err
	}
	// The checks and their recipes are the verified run's (its base's);
	// they run in a check run (checkrun.go), unless this is one.
	mf, err := vf.manifestOf(ctx, c.run)
	if err != nil {
		return nil, nil, err
	}
	before, err := vf.changes.ChangeSet(ctx, c.run.ID)
	if err != nil {
		return nil, nil, err
	}
	out := &paddock.VerifyResult{Hash: before.Hash, Passed: true, Checks: []paddock.CheckResult{}}
	target := c.run
	if !isCheckRun(c.run) {
		p, err := vf.Project(ctx, c.run.Project)
		if err != nil {
			return nil, nil, err
		}
		tr, done, err := vf.checkRun(ctx, c.run, p, before)
		if err != nil {
			return nil, nil, err
		}
		defer done()
		target = tr
		out.RanIn = vf.checkEnvironment(tr, p)
	}
	if err := vf.stageManifest(ctx, target, mf); err != nil {
		return nil, nil, err
	}
	// The check run's commands, masked as the verified run's are.
	tc := &callContext{run: target, def: definitionOf(target), red: c.red}
	var evs []callEvent
	for _, ch := range plan {
		cr := paddock.CheckResult{Name: ch.Name, Dir: ch.Dir, Argv: ch.Argv}
		if !out.Passed {
			cr.Skipped = "an earlier check failed"
			out.Checks = append(out.Checks, cr)
			continue
		}
		var buf bytes.Buffer
		w := io.Writer(&buf)
		if logw != nil {
			fmt.Fprintf(logw, "$ %s\n", strings.Join(ch.Argv, " "))
			w = io.MultiWriter(&buf, logw)
		}
		// go test -json is read for its counts and shown as the text it
		// carries, never as JSON lines.
		var gotest *manifest.GoTestWriter
		if ch.Results == manifest.ResultsGoTestJSON {
			gotest = manifest.NewGoTestWriter(w)
			w = gotest
		}
		results := vf.resultsDir(target.ID)
		if err := os.RemoveAll(results); err != nil {
			return nil, evs, internal("emptying the verify results failed", err)
		}
		started := time.Now()
		// A check leaves the workspace as it found it where the tool lets it:
		// no __pycache__ (pytest's cache is off in its argv), so the change
		// set it ran against is still the one there.
		env := append([]string{"PYTHONDONTWRITEBYTECODE=1"}, ch.Env...)
		// The command's stdout and stderr come at once, from two streams.
		lw := &lockedWriter{w: w}
		res, cevs, err := vf.executor.execStream(ctx, tc, paddock.ExecRequest{Argv: ch.Argv, Dir: ch.Dir, Env: env}, paddock.ExecIO{Stdout: lw, Stderr: lw})
		// Each check is recorded as it ends: a long verify that a crash
		// cuts short keeps what ran, and a client following the events
		// sees its progress.
		if rerr := vf.broker.recordEvents(ctx, c.run.ID, cevs); rerr != nil {
			return nil, nil, rerr
		}
		n, ok := vf.reports(target.ID, ch)
		if !ok {
			n, ok = vf.workspaceReports(ctx, target, ch, started)
		}
		if ok {
			cr.Tests = &paddock.TestCounts{Passed: n.Passed, Failed: n.Failed, Skipped: n.Skipped, Failures: n.Failures}
		}
		if gotest != nil {
			gotest.Close()
			if gotest.Events() > 0 {
				n := gotest.Counts()
				cr.Tests = &paddock.TestCounts{Passed: n.Passed, Failed: n.Failed, Skipped: n.Skipped, Failures: n.Failures}
			}
		}
		if err != nil {
			return nil, evs, err
		}
		cr.ExitCode, cr.Passed, cr.DurationMS = res.ExitCode, res.ExitCode == 0, res.DurationMS
		cr.Output, cr.Truncated = tail(buf.String(), 16<<10)
		out.Checks = append(out.Checks, cr)
		out.Passed = out.Passed && cr.Passed
		if ctx.Err() != nil {
			return nil, evs, ctx.Err()
		}
	}
	if after, err := vf.changes.ChangeSet(ctx, c.run.ID); err == nil && after.Hash != before.Hash {
		out.Stale = true
	}
	// full: the whole plan a verify without names runs (build, lint, test),
	// not a check the caller picked; only a full pass lets a policy
	// approve on its own.
	full := true
	for _, n := range manifest.VerifyOrder {
		full = full && (len(names) == 0 || slices.Contains(names, n))
	}
	evs = append(evs, callEvent{paddock.EventVerified, map[string]any{"hash": out.Hash, "passed": out.Passed, "stale": out.Stale, "full": full, "checks": summary(out.Checks)}})
	return out, evs, nil
}

func summary(cs []paddock.CheckResult) []map[string]any {
	var out []map[string]any
	for _, c := range cs {
		s := map[string]any{"name": c.Name, "argv": c.Argv, "passed": c.Passed, "exit_code": c.ExitCode}
		if c.Skipped != "" {
			s["skipped"] = c.Skipped
		}
		if c.Tests != nil {
			s["tests"] = c.Tests
		}
		out = append(out, s)
	}
	return out
}

// tail keeps the last n bytes of s, from a line start where it can.
func tail(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < 512 {
		s = s[i+1:]
	}
	return s, true
}

// stageManifest writes mf's recipes (the base's) in run r's workspace,
// where the commands expect them;
// .paddock is protected, so the agent cannot rewrite them (read-only in
// the sandbox).
func (vf *Verifier) stageManifest(ctx context.Context, r *paddock.Run, mf *manifest.Manifest) error {
	if len(mf.Files) == 0 {
		return nil
	}
	// (Files are keyed by their path in the repository.)
	root, err := vf.views.openView(ctx, r, nil, &confine.Policy{})
	if err != nil {
		return err
	}
	defer root.Close()
	if err := vf.views.asSandboxUser(r, func() error {
		for name, content := range mf.Files {
			if _, err := root.WriteFile(confine.Trusted(path.Join(manifest.StageDir, name)), content, nil); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return internal("staging the manifest failed", err)
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// resultsDir is manifest.ResultsDir of run id, as the host reaches it.
func (vf *Verifier) resultsDir(id string) string {
	return filepath.Join(vf.auxDir(id), "home", strings.TrimPrefix(manifest.ResultsDir, HomeInView+"/"))
}

// reportParser is how a check's structured results are read, and the glob
// that names its reports; nil when it names none in a file.
func reportParser(ch manifest.Check) (func(io.Reader) (manifest.Counts, error), string) {
	format, glob := ch.ResultsFormat()
	parse := map[string]func(io.Reader) (manifest.Counts, error){manifest.ResultsJUnit: manifest.ParseJUnit, manifest.ResultsTRX: manifest.ParseTRX}[format]
	return parse, glob
}

// reports reads the JUnit or TRX reports a check wrote under
// manifest.ResultsDir (emptied before it began), and adds up their counts;
// ok is false when the check names none there, or wrote none. The
// directory is the run's: it is read through an os.Root, so a link a
// command left there reaches nothing of the host's.
func (vf *Verifier) reports(id string, ch manifest.Check) (manifest.Counts, bool) {
	parse, glob := reportParser(ch)
	rel, under := strings.CutPrefix(glob, manifest.ResultsDir+"/")
	if parse == nil || !under {
		return manifest.Counts{}, false
	}
	// The home is the daemon's directory; the results directory in it is
	// the agent's, and may be a link it made: opened from the home's root,
	// it cannot lead out of the home.
	home, err := os.OpenRoot(filepath.Join(vf.auxDir(id), "home"))
	if err != nil {
		return manifest.Counts{}, false
	}
	defer home.Close()
	root, err := home.OpenRoot(strings.TrimPrefix(manifest.ResultsDir, HomeInView+"/"))
	if err != nil {
		return manifest.Counts{}, false
	}
	defer root.Close()
	return readReports(root.FS(), rel, time.Time{}, parse)
}

// workspaceReports reads the reports a tool writes into the workspace
// itself (surefire's target/surefire-reports, Gradle's build/test-results),
// named by a glob relative to the root: only those written since the check
// started (an earlier run's stay on disk), never what an agent left there
// before it.
func (vf *Verifier) workspaceReports(ctx context.Context, r *paddock.Run, ch manifest.Check, since time.Time) (manifest.Counts, bool) {
	parse, glob := reportParser(ch)
	if parse == nil || glob == "" || path.IsAbs(glob) {
		return manifest.Counts{}, false
	}
	root, err := vf.views.openView(ctx, r, nil, &confine.Policy{})
	if err != nil {
		return manifest.Counts{}, false
	}
	defer root.Close()
	return readReports(root.OS().FS(), glob, since, parse)
}

// readReports parses every regular file of fsys that glob matches and that
// was written since then (.git, node_modules and .paddock skipped).
func readReports(fsys fs.FS, glob string, since time.Time, parse func(io.Reader) (manifest.Counts, error)) (manifest.Counts, bool) {
	var total manifest.Counts
	found := false
	fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", ".paddock":
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !manifest.MatchPath(glob, p) {
			return nil
		}
		if info, err := d.Info(); err != nil || info.ModTime().Before(since) {
			return nil
		}
		f, err := fsys.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		if n, err := parse(io.LimitReader(f, 64<<20)); err == nil {
			total.Add(n)
			found = true
		}
		return nil
	})
	return total, found
}

// lockedWriter is one writer for two streams that write at once.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
