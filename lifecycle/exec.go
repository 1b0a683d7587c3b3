package lifecycle

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/broker"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/sandbox"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// executor runs a run's commands in its sandbox, within the run's limits, and watches the disk they write.
type executor struct {
	*kernel
	// the services it calls
	broker *Broker
	jobs   *Jobs
	views  *views

	life   *lifetime   // the commands' (they end with it) and the disk watchdogs'
	quotas *diskQuotas // the kernel's project quota on overlay runs, where the file system has one
}

// forget lifts a gone run's project quota.
func (ex *executor) forget(id string) { ex.quotas.forget(id) }

// maxProtectedInSandbox bounds the protected paths a command's view hides.
const maxProtectedInSandbox = 256

// baseEnv is every command's environment before the request's additions:
// HOME is the run's own (HomeInView), outside the workspace.
func baseEnv() []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + HomeInView,
		"LANG=C.UTF-8",
		"TERM=dumb",
		"TMPDIR=/tmp",
		"PADDOCK=1",
	}
}

// execStream runs a command in the run's workspace, confined by the
// sandbox; the broker has allowed it. It passes the output, masked, to
// streams.Stdout and Stderr as it comes (either may be nil), and
// streams.Stdin, if set, to the command as it comes. When it streams, the
// result keeps only the first sandbox.LiveKeep bytes of each: the output
// up to its limit goes through, never held whole in memory. With
// req.Terminal the command runs on a terminal of that size, resized by
// streams.Resize. It returns the events that record the command once it
// reached the sandbox (the command, its outcome, and the enforcement it
// got), for the broker to record.
func (ex *executor) execStream(ctx context.Context, c *callContext, req paddock.ExecRequest, streams paddock.ExecIO) (*paddock.ExecResult, []callEvent, error) {
	id := c.run.ID
	stdout, stderr := streams.Stdout, streams.Stderr
	if err := checkExecRequest(req, streams); err != nil {
		return nil, nil, err
	}
	net, allow, err := parseNet(req.Net)
	if err != nil {
		return nil, nil, err
	}
	limits, err := ex.commandLimits(req, broker.Limits(c.def, c.grants))
	if err != nil {
		return nil, nil, err
	}
	if err := ex.checkExpectNow(ctx); err != nil {
		return nil, nil, err
	}
	r, spec, err := ex.commandView(ctx, c.run, c.project)
	if err != nil {
		return nil, nil, err
	}
	env, creds, err := ex.commandEnv(c, r, req)
	if err != nil {
		return nil, nil, err
	}
	// The command's secrets were read just now (commandEnv), perhaps with
	// values changed since the call's redactor was made: its output, and
	// the call's answer, are masked with the values it was given.
	c.red = ex.redactor(c.run)
	red := c.red
	var liveOut, liveErr *redact.Writer
	if stdout != nil {
		liveOut = red.NewWriter(stdout)
		defer liveOut.Close()
	}
	if stderr != nil {
		liveErr = red.NewWriter(stderr)
		defer liveErr.Close()
	}
	spec.Argv, spec.Dir, spec.Net, spec.Allow = req.Argv, req.Dir, net, allow
	if net == sandbox.NetAllow {
		spec.AllowAddrs = ex.NetAllowAddrs
		spec.Credentials, spec.ProxyCA, spec.UpstreamRoots = creds, ex.ProxyCA, ex.ProxyUpstreamRoots
	}
	spec.Env, spec.Limits, spec.AllowDegraded, spec.Stdin = env, limits, req.AllowDegraded, req.Stdin
	spec.Stdout, spec.Stderr = writerOrNil(liveOut), writerOrNil(liveErr)
	var input *countingReader
	if streams.Stdin != nil {
		input = &countingReader{r: streams.Stdin}
		spec.Input = input
	}
	if req.Terminal != nil {
		spec.Terminal = &sandbox.Terminal{Size: *req.Terminal, Resize: streams.Resize}
	}
	if streams.Stdin != nil || req.Terminal != nil {
		// Someone watches and answers: a prompt must show without its newline.
		var stopFlushing func()
		spec.Stdout, spec.Stderr, stopFlushing = flushingOutputs(liveOut, liveErr)
		defer stopFlushing()
	}
	spec.LiveOnly = stdout != nil || stderr != nil
	if req.Session && spec.LiveOnly {
		// A session's output passes whole (an agent's screen, redrawn for
		// hours); the result keeps its first LiveKeep bytes as always.
		spec.Limits.Output = sandbox.NoLimitBytes
	}
	spec.Decide = func(d sandbox.ProxyDecision) {
		// A host may be made of a secret (a name looked up is a way out):
		// stored masked, as the call's own events are.
		if err := ex.record(ctx, id, paddock.EventNetwork, maskedData(red, d)); err != nil {
			ex.log().Error("cannot record a network decision", "run", id, "err", err)
		}
	}
	// On a state disk under its reserve a command still runs, writing
	// nothing (no file may grow past a byte): deleting is always allowed,
	// and the agent's own rm is how the disk gets its room back.
	writeNothing := ex.diskCheck(r, true)
	if writeNothing != "" {
		spec.Limits.FileSize = 1
	}
	// The command ends when its caller goes, or at Close.
	runCtx, cancel := context.WithCancel(ctx)
	stopFollowing := context.AfterFunc(ex.life.ctx, cancel)
	watch := ex.watchDisk(r, cancel, writeNothing != "")
	spanCtx, end := ex.span(runCtx, "exec", c.run)
	res, err := ex.runCommand(spanCtx, id, spec)
	if err == nil {
		trace.SpanFromContext(spanCtx).SetAttributes(attribute.String("paddock.sandbox_mode", res.Enforcement.Mode),
			attribute.Int("paddock.exit_code", res.ExitCode))
	}
	end(err)
	killed := watch.stop()
	stopFollowing()
	cancel()
	req.Argv = red.Strings(req.Argv) // a secret on the command line stays out of events
	if err != nil {
		ex.observer().ExecFailed(err)
		return nil, streamedEvents(execEvents(req, nil, err), input), err
	}
	ex.observer().Exec(c.run.Access, res.Enforcement.Mode, len(res.Enforcement.Degraded) > 0, res.OOMKilled, res.Duration)
	res.Stdout, res.Stderr = maskOutput(red, res.Stdout), maskOutput(red, res.Stderr)
	out := ex.resultOf(r, req, spec.Limits, res, killed, writeNothing)
	return out, streamedEvents(execEvents(req, out, nil), input), nil
}

// maskOutput masks a command's kept output. One kept to its limit ends
// with the sandbox's marker, and what comes before the marker may end
// inside a secret, which the whole-form masks miss: that part is masked
// too (redact.MaskTail).
func maskOutput(red *redact.Redactor, b []byte) []byte {
	b = red.Bytes(b)
	if body, ok := bytes.CutSuffix(b, []byte(sandbox.TruncatedMarker)); ok {
		return append(slices.Clip(red.MaskTail(body)), sandbox.TruncatedMarker...)
	}
	return red.MaskTail(b)
}

// resultOf is a command's answer: its outcome, what enforced it, and
// why it was killed, in words.
func (ex *executor) resultOf(r *paddock.Run, req paddock.ExecRequest, limits paddock.CommandLimits, res *sandbox.Result, killed, writeNothing string) *paddock.ExecResult {
	if res.TimedOut && killed == "" {
		// In words, in the answer and the event, not only exit 137.
		what := "its time limit"
		if req.Session {
			what = "its session's time limit"
		}
		killed = fmt.Sprintf("%s of %s (timeout; the operator's ceiling is exec_limits or session_limits in paddock.toml)", what, limits.Wall)
	}
	if res.OOMKilled && killed == "" {
		killed = fmt.Sprintf("its memory limit of %d MiB (the kernel's OOM killer ended the whole command; memory.max of its cgroup, exec_limits memory in paddock.toml)", limits.Memory>>20)
	}
	res.Enforcement.Disk = ex.diskEnforcement(r)
	if writeNothing != "" {
		res.Enforcement.Disk = writeNothing + ": the command could write nothing (file size limit 1 byte); remove files to go on"
	}
	out := &paddock.ExecResult{ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut, Killed: killed,
		DurationMS: ms(res.Duration), CPUMS: ms(res.CPU), MaxRSS: res.MaxRSS, Truncated: res.Truncated,
		MemoryPeak: res.MemoryPeak, CPUThrottledMS: ms(res.Throttled),
		Denied: res.Denied, Enforcement: res.Enforcement, OutputEncoding: "utf-8",
		Stdout: string(res.Stdout), Stderr: string(res.Stderr)}
	if !utf8.Valid(res.Stdout) || !utf8.Valid(res.Stderr) {
		out.OutputEncoding = "base64"
		out.Stdout, out.Stderr = b64(res.Stdout), b64(res.Stderr)
	}
	return out
}

// checkExecRequest refuses a command request that cannot be run as asked.
func checkExecRequest(req paddock.ExecRequest, streams paddock.ExecIO) error {
	if len(req.Argv) == 0 {
		return paddock.Errorf(paddock.CodeBadRequest, "exec needs a command")
	}
	if streams.Stdin != nil && len(req.Stdin) > 0 {
		return paddock.Errorf(paddock.CodeBadRequest, "stdin comes in the request or as a stream, not both")
	}
	if t := req.Terminal; t != nil && (t.Rows == 0 || t.Cols == 0 || t.Rows > maxTerminalSide || t.Cols > maxTerminalSide) {
		return paddock.Errorf(paddock.CodeBadRequest, "a terminal of %d rows and %d columns: each must be 1 to %d", t.Rows, t.Cols, maxTerminalSide)
	}
	if len(req.Stdin) > paddock.MaxExecStdin {
		return paddock.Errorf(paddock.CodeTooLarge, "stdin is %d bytes; an exec takes at most %d MiB: put larger input in the workspace and let the command read it from there",
			len(req.Stdin), paddock.MaxExecStdin>>20)
	}
	for _, kv := range req.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \x00") || strings.HasPrefix(k, "LD_") {
			return paddock.Errorf(paddock.CodeBadRequest, "env %q: want KEY=VALUE (LD_* is not allowed)", kv)
		}
	}
	return nil
}

// commandEnv is a command's environment: the sandbox's own, the run's
// API, the definition's, the request's, the run's secrets, and last the
// credentials' placeholders (nothing the request sets is the value),
// with the credentials its proxy sets.
func (ex *executor) commandEnv(c *callContext, r *paddock.Run, req paddock.ExecRequest) ([]string, []sandbox.Credential, error) {
	var secrets []string
	for _, n := range r.Secrets {
		if ex.Secret == nil {
			break
		}
		if v, ok := ex.readSecret(n); ok {
			// Checked at create too; the value may have changed since.
			if err := maskable(n, v); err != nil {
				return nil, nil, err
			}
			secrets = append(secrets, n+"="+v)
		}
	}
	creds, credEnv, err := commandCredentials(c.def, ex.readSecret, ex.ProxyCA != nil)
	if err != nil {
		return nil, nil, err
	}
	env := mergeEnv(baseEnv(), mountPath(c.def, baseEnv()), ex.views.runAPIEnv(r.ID), fixedEnv(c.def), req.Env, secrets, credEnv)
	if req.Terminal != nil {
		env = terminalEnv(env)
	}
	return env, creds, nil
}

// commandView is what a command of run r runs in: its workspace's view,
// or, for a run with no workspace (its agent's own start command, the one
// exec a none run has), an instance sandbox: an empty directory of its
// own, its home and its API, nothing of the project's (instance.go).
func (ex *executor) commandView(ctx context.Context, run *paddock.Run, p *paddock.Project) (*paddock.Run, sandbox.Spec, error) {
	if run.Access == paddock.AccessNone {
		spec, err := ex.jobs.instanceSpec(ctx, run)
		return run, spec, err
	}
	r, p, err := ex.broker.workspaceFor(ctx, run, p)
	if err != nil {
		return nil, sandbox.Spec{}, err
	}
	spec, err := ex.views.sandboxSpec(ctx, r, p)
	return r, spec, err
}

// maxTerminalSide bounds a terminal's rows and columns.
const maxTerminalSide = 4096

// terminalEnv gives a command on a terminal a TERM that says so, unless its
// definition or request named one.
func terminalEnv(env []string) []string {
	for i, kv := range env {
		if kv == "TERM=dumb" {
			env[i] = "TERM=xterm-256color"
		}
	}
	return env
}

// countingReader counts the bytes a command's streamed stdin passed.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// streamedEvents adds to an exec event how much stdin was streamed (its
// size, never its content).
func streamedEvents(evs []callEvent, input *countingReader) []callEvent {
	if input != nil && len(evs) > 0 {
		if data, ok := evs[0].data.(map[string]any); ok {
			data["stdin_bytes"] = input.n.Load()
			data["stdin_streamed"] = true
		}
	}
	return evs
}

// fixedEnv is what a definition always sets: its NAME=VALUE entries.
func fixedEnv(def *paddock.AgentDefinition) []string {
	var out []string
	for _, e := range def.Env {
		if strings.Contains(e, "=") {
			out = append(out, e)
		}
	}
	return out
}

// commandLimits are the limits a request gets: the manager's ceiling, each
// lowered where the request asks for less. Asking for more is refused,
// naming the limit and the ceiling, rather than quietly cut: an agent
// must not believe it has an hour when it has ten minutes.
func (ex *executor) commandLimits(req paddock.ExecRequest, agentCeil paddock.AgentLimits) (sandbox.Limits, error) {
	ceil := sandbox.WithDefaults(ex.ExecLimits)
	l := lowered(ceil, agentCeil)
	if req.Session {
		// An agent's session lives as long as the person or the
		// orchestrator needs: its wall time is the session's, its CPU
		// time is not limited (the wall bounds it), and its commands keep
		// theirs.
		ceil.Wall, l.CPU = ex.SessionLimits.wall(req.Terminal != nil), sandbox.NoLimit
		l.Wall = ceil.Wall
		if req.Timeout != "" {
			d, err := time.ParseDuration(req.Timeout)
			if err != nil || d <= 0 {
				return l, paddock.Errorf(paddock.CodeBadRequest, "timeout %q: want a duration such as 2h", req.Timeout)
			}
			if d > ceil.Wall {
				return l, paddock.Errorf(paddock.CodeForbidden, "timeout %s is above the %s this daemon allows an agent's session (session_limits in paddock.toml)", req.Timeout, ceil.Wall).
					WithRule("limit_above_ceiling")
			}
			l.Wall = d
		}
		req.Timeout, req.Limits.CPU = "", ""
	}
	dur := func(name, v, example string, max time.Duration, dst *time.Duration) error {
		if v == "" {
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return paddock.Errorf(paddock.CodeBadRequest, "%s %q: want a duration such as %s", name, v, example)
		}
		if d > max {
			return overCeiling(name, v, max.String())
		}
		*dst = d
		return nil
	}
	if err := dur("timeout", req.Timeout, "2m", ceil.Wall, &l.Wall); err != nil {
		return l, err
	}
	if err := dur("cpu limit", req.Limits.CPU, "30s", ceil.CPU, &l.CPU); err != nil {
		return l, err
	}
	x := req.Limits
	if x.Procs < 0 || x.Memory < 0 || x.FileSize < 0 || x.Output < 0 || x.Tmp < 0 {
		return l, paddock.Errorf(paddock.CodeBadRequest, "limits must not be negative")
	}
	for _, c := range []struct {
		name       string
		asked, max int64
		dst        func(int64)
	}{
		{"procs", int64(x.Procs), int64(ceil.Procs), func(v int64) { l.Procs = int(v) }},
		{"memory", x.Memory, ceil.Memory, func(v int64) { l.Memory = v }},
		{"file_size", x.FileSize, ceil.FileSize, func(v int64) { l.FileSize = v }},
		{"output", x.Output, ceil.Output, func(v int64) { l.Output = v }},
		{"tmp", x.Tmp, ceil.Tmp, func(v int64) { l.Tmp = v }},
	} {
		switch {
		case c.asked == 0:
		case c.asked > c.max:
			return l, overCeiling(c.name+" limit", strconv.FormatInt(c.asked, 10), strconv.FormatInt(c.max, 10))
		default:
			c.dst(c.asked)
		}
	}
	return l, nil
}

// SessionLimits bound an agent's session: the command that is the agent
// (paddock run's CMD, a bootstrapped agent's job), not the commands it
// asks for.
type SessionLimits struct {
	// Wall is the most a session not at a terminal runs (an agent's
	// job, a paddock run from a script); 0: DefaultSessionWall.
	Wall time.Duration
	// TerminalWall is the most a session at a terminal runs; 0: no limit
	// (a person is there, and stops it).
	TerminalWall time.Duration
}

// DefaultSessionWall is an unattended agent session's wall time.
const DefaultSessionWall = 8 * time.Hour

// wall is a session's ceiling; sandbox.NoLimit for none.
func (s SessionLimits) wall(terminal bool) time.Duration {
	switch {
	case terminal && s.TerminalWall > 0:
		return s.TerminalWall
	case terminal:
		return sandbox.NoLimit
	case s.Wall > 0:
		return s.Wall
	}
	return DefaultSessionWall
}

// lowered is the daemon's ceiling lowered to an agent's, where its
// definition (or a grant) sets one below it: what a command gets when it
// asks for nothing. (The broker refuses asking for more than the agent's.)
func lowered(l sandbox.Limits, a paddock.AgentLimits) sandbox.Limits {
	dur := func(s string, dst *time.Duration) {
		if d, err := time.ParseDuration(s); err == nil && d > 0 && d < *dst {
			*dst = d
		}
	}
	dur(a.Timeout, &l.Wall)
	dur(a.CPU, &l.CPU)
	if a.Procs > 0 && a.Procs < l.Procs {
		l.Procs = a.Procs
	}
	for _, c := range []struct {
		v   int64
		dst *int64
	}{{a.Memory, &l.Memory}, {a.FileSize, &l.FileSize}, {a.Output, &l.Output}, {a.Tmp, &l.Tmp}} {
		if c.v > 0 && c.v < *c.dst {
			*c.dst = c.v
		}
	}
	return l
}

func overCeiling(name, asked, max string) error {
	return paddock.Errorf(paddock.CodeForbidden, "%s %s is above the %s this daemon allows a command; a request may only lower a limit (the operator sets them: exec_limits in paddock.toml)", name, asked, max).
		WithRule("limit_above_ceiling")
}

// mergeEnv joins environments: a later KEY replaces an earlier one in its
// place, so a command never sees a variable twice (Go and glibc read the
// first of two; a request's HOME must win).
func mergeEnv(lists ...[]string) []string {
	var out []string
	at := map[string]int{}
	for _, l := range lists {
		for _, kv := range l {
			k, _, _ := strings.Cut(kv, "=")
			if i, ok := at[k]; ok {
				out[i] = kv
				continue
			}
			at[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
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
// workspace now, but for the patterns protectedAhead enforces whatever is
// there (a plain path, or one whose wildcard is in its last name, whose
// directory is made read-only): their matches are at or under a path made
// read-only already. Every pattern of the default policy is one of those,
// and the harness's placeholders of the missing ones are in an overlay's
// upper layer, where globbing them all took a fifth of a command's own
// cost in the daemon.
func protectedIn(root string, patterns []string) []string {
	var out []string
	fsys := os.DirFS(root)
	for _, pat := range patterns {
		if _, ahead := aheadPath(pat); ahead {
			continue
		}
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

// execEvents are the exec event and, if the sandbox ran, what it enforced.
func execEvents(req paddock.ExecRequest, res *paddock.ExecResult, runErr error) []callEvent {
	data := map[string]any{"argv": req.Argv, "dir": req.Dir, "net": req.Net}
	if req.Terminal != nil {
		data["terminal"] = req.Terminal
	}
	if len(req.Stdin) > 0 {
		data["stdin_bytes"] = len(req.Stdin) // never its content
	}
	if runErr != nil {
		data["error"] = paddock.ErrorMessage(runErr)
		data["code"] = paddock.ErrorCode(runErr)
		return []callEvent{{paddock.EventExec, data}}
	}
	data["exit_code"] = res.ExitCode
	data["duration_ms"] = res.DurationMS
	data["cpu_ms"] = res.CPUMS
	data["max_rss_bytes"] = res.MaxRSS
	if res.MemoryPeak > 0 {
		data["memory_peak_bytes"] = res.MemoryPeak
	}
	if res.CPUThrottledMS > 0 {
		data["cpu_throttled_ms"] = res.CPUThrottledMS
	}
	data["timed_out"] = res.TimedOut
	data["truncated"] = res.Truncated
	if res.Killed != "" {
		data["killed"] = res.Killed
	}
	data["stdout_bytes"] = len(res.Stdout)
	data["stderr_bytes"] = len(res.Stderr)
	if len(res.Denied) > 0 {
		data["denied"] = res.Denied
	}
	return []callEvent{{paddock.EventExec, data}, {paddock.EventSandboxEnforced, res.Enforcement}}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// runCommand runs a command of run id through the run's harness, or in a
// sandbox of its own when the manager keeps none; none once Close has
// begun (ExecStream refuses then; this is for a Close meanwhile).
func (ex *executor) runCommand(ctx context.Context, id string, spec sandbox.Spec) (*sandbox.Result, error) {
	if err := ex.checkOpen(); err != nil {
		return nil, err
	}
	if ex.Harnesses != nil {
		return ex.Harnesses.Run(ctx, id, spec)
	}
	res, err := sandbox.Run(ctx, spec)
	if res != nil {
		res.Enforcement.Mode, res.Enforcement.ModeReason = "per-exec", "resident sandboxes are not configured"
	}
	return res, err
}

// releaseHarness gives back the run's harness, if it has one: its
// workspace is going away or the run has ended.
func (ex *executor) releaseHarness(id string) {
	if ex.Harnesses != nil {
		ex.Harnesses.Release(id)
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
		if p, ok := aheadPath(pat); ok {
			paths = append(paths, p)
		} else {
			unenforced = append(unenforced, pat+": only what matches when the view is made (its new matches cannot be named ahead)")
		}
	}
	return paths, unenforced
}

// aheadPath is the path a view makes read-only for pattern pat whatever
// is there: the path itself for a plain one, its directory for one whose
// only wildcard is in its last name (not its first). Others cannot be
// named ahead.
func aheadPath(pat string) (string, bool) {
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
		return strings.Join(segs, "/"), true
	case meta == len(segs)-1 && meta > 0:
		return strings.Join(segs[:meta], "/"), true
	}
	return "", false
}

// protectedSpec is the union of the paths protected ahead and those the
// patterns match (protectedIn, of each layer of the view), sorted, and
// what is not enforced ahead.
func protectedSpec(patterns []string, matched ...[]string) (paths, unenforced []string) {
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
	for _, m := range matched {
		for _, p := range m {
			add(p)
		}
	}
	if dropped > 0 {
		unenforced = append(unenforced, "more than "+strconv.Itoa(maxProtectedInSandbox)+" protected paths exist: only that many are made read-only in a view")
	}
	sort.Strings(paths)
	return paths, unenforced
}
