package lifecycle

import (
	"context"
	"encoding/base64"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/sandbox"
)

// Events recorded for a confined command.
const (
	EventExec             = "exec"
	EventSandboxEnforced  = "sandbox.enforced"
	EventNetwork          = "network.connection"
	maxProtectedInSandbox = 256
)

// baseEnv is every command's environment before the request's additions.
func baseEnv(workspace string) []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + workspace,
		"LANG=C.UTF-8",
		"TERM=dumb",
		"TMPDIR=/tmp",
		"PADDOCK=1",
	}
}

// Exec runs a command in the run's workspace, confined by the sandbox, and
// records it (the command, its outcome, and the enforcement it got).
func (m *Manager) Exec(ctx context.Context, id string, req paddock.ExecRequest) (*paddock.ExecResult, error) {
	return m.ExecStream(ctx, id, req, nil, nil)
}

// ExecStream is Exec that also passes the output, masked, to stdout and
// stderr as it comes (either may be nil).
func (m *Manager) ExecStream(ctx context.Context, id string, req paddock.ExecRequest, stdout, stderr io.Writer) (*paddock.ExecResult, error) {
	r, err := m.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.Access == paddock.AccessNone {
		return nil, paddock.Errorf(paddock.CodeForbidden, "run %s has no workspace to run commands in", id).WithDetail("rule", "access_none")
	}
	if len(req.Argv) == 0 {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "exec needs a command")
	}
	var wall time.Duration
	if req.Timeout != "" {
		if wall, err = time.ParseDuration(req.Timeout); err != nil || wall <= 0 {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "timeout %q: want a duration such as 2m", req.Timeout)
		}
	}
	for _, kv := range req.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \x00") || strings.HasPrefix(k, "LD_") {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "env %q: want KEY=VALUE (LD_* is not allowed)", kv)
		}
	}
	net, allow, err := parseNet(req.Net)
	if err != nil {
		return nil, err
	}
	limits := sandbox.Limits{Wall: wall, Procs: req.Limits.Procs, Memory: req.Limits.Memory,
		FileSize: req.Limits.FileSize, Output: req.Limits.Output, Tmp: req.Limits.Tmp}
	if req.Limits.CPU != "" {
		if limits.CPU, err = time.ParseDuration(req.Limits.CPU); err != nil || limits.CPU <= 0 {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "cpu limit %q: want a duration such as 30s", req.Limits.CPU)
		}
	}
	if req.Limits.Procs < 0 || req.Limits.Memory < 0 || req.Limits.FileSize < 0 || req.Limits.Output < 0 || req.Limits.Tmp < 0 {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "limits must not be negative")
	}
	if err := m.checkExpectNow(ctx); err != nil {
		return nil, err
	}
	r, p, err := m.workspaceFor(ctx, id)
	if err != nil {
		return nil, err
	}
	env := append(baseEnv(r.Workspace.Root), req.Env...)
	for _, n := range r.Secrets {
		if m.Secret == nil {
			break
		}
		if v, ok := m.Secret(n); ok {
			env = append(env, n+"="+v)
		}
	}
	red := m.redactor(r)
	var liveOut, liveErr *redact.Writer
	if stdout != nil {
		liveOut = red.NewWriter(stdout)
		defer liveOut.Close()
	}
	if stderr != nil {
		liveErr = red.NewWriter(stderr)
		defer liveErr.Close()
	}
	spec, err := m.sandboxSpec(ctx, r, p)
	if err != nil {
		return nil, err
	}
	spec.Argv, spec.Dir, spec.Net, spec.Allow = req.Argv, req.Dir, net, allow
	spec.Env, spec.Limits, spec.AllowDegraded = env, limits, req.AllowDegraded
	spec.Stdout, spec.Stderr = writerOrNil(liveOut), writerOrNil(liveErr)
	spec.Decide = func(d sandbox.ProxyDecision) {
		m.update(context.WithoutCancel(ctx), func(tx paddock.Tx) error {
			_, err := tx.AppendEvent(ctx, id, EventNetwork, d)
			return err
		})
	}
	res, err := m.runCommand(ctx, id, spec)
	req.Argv = red.Strings(req.Argv) // a secret on the command line stays out of events
	ctx = context.WithoutCancel(ctx) // a canceled command is still recorded
	if err != nil {
		m.recordExec(ctx, id, req, nil, err)
		return nil, err
	}
	res.Stdout, res.Stderr = red.Bytes(res.Stdout), red.Bytes(res.Stderr)
	out := &paddock.ExecResult{ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut,
		DurationMS: ms(res.Duration), CPUMS: ms(res.CPU), MaxRSS: res.MaxRSS, Truncated: res.Truncated,
		Denied: res.Denied, Enforcement: res.Enforcement, OutputEncoding: "utf-8",
		Stdout: string(res.Stdout), Stderr: string(res.Stderr)}
	if !utf8.Valid(res.Stdout) || !utf8.Valid(res.Stderr) {
		out.OutputEncoding = "base64"
		out.Stdout, out.Stderr = b64(res.Stdout), b64(res.Stderr)
	}
	if err := m.recordExec(ctx, id, req, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// writerOrNil keeps a nil *redact.Writer from becoming a non-nil io.Writer.
func writerOrNil(w *redact.Writer) io.Writer {
	if w == nil {
		return nil
	}
	return w
}

// parseNet reads "none", "host" or "allow=DOMAIN,…".
func parseNet(s string) (sandbox.Net, []string, error) {
	switch {
	case s == "" || s == string(sandbox.NetNone):
		return sandbox.NetNone, nil, nil
	case s == string(sandbox.NetHost):
		return sandbox.NetHost, nil, nil
	case strings.HasPrefix(s, "allow="):
		domains := strings.Split(strings.TrimPrefix(s, "allow="), ",")
		if err := sandbox.ValidateDomains(domains); err != nil {
			return "", nil, paddock.Errorf(paddock.CodeBadRequest, "--net %s: %v", s, err)
		}
		return sandbox.NetAllow, domains, nil
	}
	return "", nil, paddock.Errorf(paddock.CodeBadRequest, "--net %q: want none, host or allow=DOMAIN,…", s)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// protectedIn lists the paths the policy's patterns match in the
// workspace now (protectedAhead names .git and what can be named ahead).
func protectedIn(root string, patterns []string) []string {
	var out []string
	fsys := os.DirFS(root)
	for _, pat := range patterns {
		matches, _ := doublestar.Glob(fsys, pat, doublestar.WithNoFollow())
		for _, mt := range matches {
			if len(out) > maxProtectedInSandbox { // one over: the caller reports it
				return out
			}
			if fi, err := fs.Stat(fsys, mt); err == nil && (fi.Mode().IsRegular() || fi.IsDir()) {
				out = append(out, filepath.ToSlash(mt))
			}
		}
	}
	return out
}

// recordExec appends the exec event and, if the sandbox ran, what it enforced.
func (m *Manager) recordExec(ctx context.Context, id string, req paddock.ExecRequest, res *paddock.ExecResult, runErr error) error {
	return m.update(ctx, func(tx paddock.Tx) error {
		data := map[string]any{"argv": req.Argv, "dir": req.Dir, "net": req.Net}
		if runErr != nil {
			data["error"] = paddock.ErrorMessage(runErr)
			data["code"] = paddock.ErrorCode(runErr)
		} else {
			data["exit_code"] = res.ExitCode
			data["duration_ms"] = res.DurationMS
			data["timed_out"] = res.TimedOut
			data["truncated"] = res.Truncated
			data["stdout_bytes"] = len(res.Stdout)
			data["stderr_bytes"] = len(res.Stderr)
			if len(res.Denied) > 0 {
				data["denied"] = res.Denied
			}
		}
		if _, err := tx.AppendEvent(ctx, id, EventExec, data); err != nil {
			return err
		}
		if res != nil {
			if _, err := tx.AppendEvent(ctx, id, EventSandboxEnforced, res.Enforcement); err != nil {
				return err
			}
		}
		return nil
	})
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// runCommand runs a command of run id through the run's harness, or in a
// sandbox of its own when the manager keeps none.
func (m *Manager) runCommand(ctx context.Context, id string, spec sandbox.Spec) (*sandbox.Result, error) {
	if m.Harnesses != nil {
		return m.Harnesses.Run(ctx, id, spec)
	}
	res, err := sandbox.Run(ctx, spec)
	if res != nil {
		res.Enforcement.Mode, res.Enforcement.ModeReason = "per-exec", "resident sandboxes are not configured"
	}
	return res, err
}

// releaseHarness gives back the run's harness, if it has one: its
// workspace is going away or the run has ended.
func (m *Manager) releaseHarness(id string) {
	if m.Harnesses != nil {
		m.Harnesses.Release(id)
	}
}

// protectedAhead turns the policy's patterns into the paths a command's
// view makes read-only whether they exist or not (the sandbox makes a
// missing one first): a pattern without wildcards is such a path; one
// whose only wildcard is its last name (".codex/**", ".claude/settings*.json")
// protects the directory above it whole. What no path can stand for ahead
// (a wildcard above the last name, a wildcard name in the top directory)
// is returned apart, to be reported as not enforced for new paths.
func protectedAhead(patterns []string) (paths, unenforced []string) {
	paths = []string{".git"}
	for _, pat := range patterns {
		segs := strings.Split(strings.Trim(pat, "/"), "/")
		meta := -1
		for i, s := range segs {
			if strings.ContainsAny(s, "*?[{\\") {
				meta = i
				break
			}
		}
		switch {
		case meta < 0:
			paths = append(paths, strings.Join(segs, "/"))
		case meta == len(segs)-1 && meta > 0:
			paths = append(paths, strings.Join(segs[:meta], "/"))
		default:
			unenforced = append(unenforced, pat+": only what matches when the view is made (its new matches cannot be named ahead)")
		}
	}
	return paths, unenforced
}

// protectedSpec is the union of the paths protected ahead and those the
// patterns match in dirs now, sorted, and what is not enforced ahead.
func protectedSpec(patterns []string, dirs ...string) (paths, unenforced []string) {
	ahead, unenforced := protectedAhead(patterns)
	seen, dropped := map[string]bool{}, 0
	add := func(p string) {
		switch {
		case seen[p]:
		case len(paths) >= maxProtectedInSandbox:
			dropped++
		default:
			seen[p] = true
			paths = append(paths, p)
		}
	}
	for _, p := range ahead {
		add(p)
	}
	for _, dir := range dirs {
		for _, p := range protectedIn(dir, patterns) {
			add(p)
		}
	}
	if dropped > 0 {
		unenforced = append(unenforced, "more than "+strconv.Itoa(maxProtectedInSandbox)+" protected paths exist: only that many are made read-only in a view")
	}
	sort.Strings(paths)
	return paths, unenforced
}
