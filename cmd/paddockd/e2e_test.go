package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/internal/paddockcli"
	"github.com/paddock-dev/paddock/postgres/pgtest"
	"github.com/paddock-dev/paddock/sandbox"
)

// binary is the paddock binary (the CLI, with paddockd beside it) built
// once for the tests that need a real daemon process (kill -9 needs one).
var binary string

func TestMain(m *testing.M) {
	// In-process CLI calls that reach the sandbox (doctor) re-execute the
	// test binary as the helper, as the real binary does.
	sandbox.Main()
	dir, err := os.MkdirTemp("", "paddock-e2e-")
	if err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755) // a daemon run as another user must reach the binary
	binary = filepath.Join(dir, "paddock")
	// Built as README builds them, both (TestReadmeBuildIsStatic): paddock,
	// the CLI, which every test that runs the binary runs, and paddockd
	// beside it, which the CLI hands serve, doctor and mcp.
	for _, args := range readmeBuild(dir) {
		build := exec.Command("go", args...)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "go %s: %v\n", strings.Join(args, " "), err)
			os.Exit(1)
		}
	}
	code := m.Run()
	pgtest.StopShared()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is a paddock serve process under test.
type daemon struct {
	t    *testing.T
	home string
	cmd  *exec.Cmd
	log  *os.File
	info paddock.DaemonStatus
}

// startDaemon starts `paddock serve` on home and waits until it answers. The
// test's cleanup stops it, however the test ends.
func startDaemon(t *testing.T, home string, extra ...string) *daemon {
	t.Helper()
	return startDaemonAs(t, home, nil, extra...)
}

// startDaemonAs is startDaemon with the daemon running as cred (nil: as the test).
func startDaemonAs(t *testing.T, home string, cred *syscall.Credential, extra ...string) *daemon {
	t.Helper()
	return startDaemonBin(t, home, binary, cred, extra...)
}

// startDaemonWith is startDaemon with the daemon started from bin.
func startDaemonWith(t *testing.T, home, bin string, extra ...string) *daemon {
	t.Helper()
	return startDaemonBin(t, home, bin, nil, extra...)
}

func startDaemonBin(t *testing.T, home, bin string, cred *syscall.Credential, extra ...string) *daemon {
	t.Helper()
	return startDaemonVia(t, home, nil, bin, cred, extra...)
}

// startDaemonVia is startDaemonBin with the daemon started by a command
// that execs it (nsenter into a network namespace): via is that
// command's argv before the binary's.
func startDaemonVia(t *testing.T, home string, via []string, bin string, cred *syscall.Credential, extra ...string) *daemon {
	t.Helper()
	os.MkdirAll(home, 0o700)
	if cred != nil {
		os.Chown(home, int(cred.Uid), int(cred.Gid))
	}
	logf, err := os.OpenFile(filepath.Join(home, "test-daemon.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, home: home, log: logf}
	argv := append(append(slices.Clip(via), bin, "serve", "--home", home, "--log-level", "debug"), extra...)
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.Env = append(os.Environ(), "PADDOCK_NO_AUTOSTART=1")
	if cred != nil {
		d.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		d.cmd.Dir = "/"
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	t.Cleanup(func() { killHarnesses(home) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(home, "daemon.json"))
		if err == nil && json.Unmarshal(b, &d.info) == nil && d.info.PID == d.cmd.Process.Pid {
			return d
		}
		if time.Now().After(deadline) {
			logb, _ := os.ReadFile(logf.Name())
			t.Fatalf("daemon did not start:\n%s", logb)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) stop() {
	if d.cmd.ProcessState == nil && d.cmd.Process != nil {
		d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			d.cmd.Process.Kill()
			<-done
		}
	}
	d.log.Close()
}

// kill9 kills the daemon without warning.
func (d *daemon) kill9() {
	d.cmd.Process.Kill()
	d.cmd.Wait()
}

type result struct {
	out, err string
	code     int
}

// paddockd is an invocation of paddockd's whole tree in-process, as the
// binary's would be, that starts a daemon (if it does) with the CLI the
// tests built.
func paddockd(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) paddockcli.Invocation {
	return paddockcli.Invocation{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: getenv, Exe: binary, Daemon: daemonVerbs}
}

// The CLI's exit codes, as the tests name them.
const (
	exitInternal    = paddockcli.ExitInternal
	exitUsage       = paddockcli.ExitUsage
	exitNotFound    = paddockcli.ExitNotFound
	exitConflict    = paddockcli.ExitConflict
	exitBusy        = paddockcli.ExitBusy
	exitForbidden   = paddockcli.ExitForbidden
	exitUnsupported = paddockcli.ExitUnsupported
	exitUnreachable = paddockcli.ExitUnreachable
	exitAttribution = paddockcli.ExitAttribution
	exitNodeLost    = paddockcli.ExitNodeLost
	daemonName      = paddockcli.DaemonName
	execFailed      = paddockcli.ExitExecFailed
	execNotFound    = paddockcli.ExitExecNotFound
)

// cli runs the CLI in-process, exactly as the binary would, with home as the
// state directory.
func cli(t *testing.T, home string, args ...string) result {
	t.Helper()
	return cliCtx(context.Background(), t, home, args...)
}

func cliCtx(ctx context.Context, t *testing.T, home string, args ...string) result {
	return cliIn(ctx, t, home, nil, args...)
}

// cliIn is cli with stdin as the CLI's standard input (nil: none).
func cliIn(ctx context.Context, t *testing.T, home string, stdin io.Reader, args ...string) result {
	var out, errb bytes.Buffer
	env := map[string]string{"PADDOCK_HOME": home, "PADDOCK_NO_AUTOSTART": "1", "HOME": "/nonexistent"}
	inv := paddockd(stdin, &out, &errb, func(k string) string { return env[k] })
	code := inv.Run(ctx, args)
	return result{out.String(), errb.String(), code}
}

func (r result) must(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.out, r.err)
	}
	return r
}

func (r result) wantCode(t *testing.T, code int, stderrHas string) {
	t.Helper()
	if r.code != code || !strings.Contains(r.err, stderrHas) {
		t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", r.code, code, stderrHas, r.out, r.err)
	}
}

func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.must(t).out), &v); err != nil {
		t.Fatalf("decode %q: %v", r.out, err)
	}
	return v
}

func runState(t *testing.T, home, id string) *paddock.Run {
	t.Helper()
	return decode[*paddock.Run](t, cli(t, home, "show", id, "--json"))
}

func newRepo(t *testing.T, dir string, nfiles int) string {
	files := map[string]string{"README.md": "hello\n", ".gitignore": "build/\n"}
	for i := 0; i < nfiles; i++ {
		files[fmt.Sprintf("pkg%02d/file%04d.go", i%20, i)] = fmt.Sprintf("package p\n// %d\n", i)
	}
	return gittest.NewRepo(t, dir, files)
}

// TestEndToEnd drives every verb of the core through the CLI against a real
// daemon, including a kill -9 and a restart.
func TestEndToEnd(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "my app ü"), 30)
	before, beforeLines := gittest.TreeDigest(t, repo)
	d := startDaemon(t, home, "--listen", "127.0.0.1:0")

	// Projects, and bad input that changes nothing.
	p := decode[*paddock.Project](t, cli(t, home, "project", "add", repo, "--json"))
	if p.Name != "my-app" || p.Root != repo {
		t.Fatalf("project = %+v", p)
	}
	bare := filepath.Join(base, "bare.git")
	gittest.Git(t, base, "init", "-q", "--bare", bare)
	cli(t, home, "project", "add", filepath.Join(base, "missing")).wantCode(t, exitUsage, "does not exist")
	cli(t, home, "project", "add", base).wantCode(t, exitUsage, "not a git repository")
	cli(t, home, "project", "add", bare).wantCode(t, exitUsage, "bare repository")
	cli(t, home, "project", "add", repo, "--name", "again").wantCode(t, exitConflict, "already declared")
	cli(t, home, "project", "add", repo, "--name", "has space").wantCode(t, exitUsage, "invalid name")
	cli(t, home, "project", "add", repo, "--name", "naïve").wantCode(t, exitUsage, "invalid name")
	cli(t, home, "create", "--project", "nope").wantCode(t, exitNotFound, "no project")
	cli(t, home, "create", "--project", "my-app", "--base", "no-such-ref").wantCode(t, exitUsage, "unknown revision")
	cli(t, home, "create", "--project", "my-app", "--kind", "vm").wantCode(t, exitUsage, "unknown workspace kind")
	cli(t, home, "create").wantCode(t, exitUsage, "--project")
	cli(t, home, "show").wantCode(t, exitUsage, "usage")
	cli(t, home, "show", "r-nothere").wantCode(t, exitNotFound, "no run")
	cli(t, home, "frobnicate").wantCode(t, exitUsage, "unknown command")
	if runs := decode[[]*paddock.Run](t, cli(t, home, "ls", "--all", "--json")); len(runs) != 0 {
		t.Fatalf("bad input made runs: %v", runs)
	}
	projects := decode[[]*paddock.Project](t, cli(t, home, "project", "ls", "--json"))
	if len(projects) != 1 {
		t.Fatalf("projects = %v", projects)
	}

	// One run of each kind.
	ids := map[paddock.WorkspaceKind]string{}
	handed := filepath.Join(base, "handed")
	os.MkdirAll(handed, 0o755)
	cli(t, home, "create", "-p", "my-app", "--kind", "operator_dir").wantCode(t, exitUsage, "needs a directory")
	cli(t, home, "create", "-p", "my-app", "--kind", "operator_dir", "--dir", filepath.Join(repo, "pkg01")).wantCode(t, exitUsage, "checkout")
	for _, k := range paddock.Kinds {
		args := []string{"create", "-p", "my-app", "--kind", string(k), "--json"}
		if k == paddock.KindOperatorDir {
			args = append(args, "--dir", handed)
		}
		r := decode[*paddock.Run](t, cli(t, home, args...))
		got := r.Workspace.Kind
		if k == paddock.KindAuto && (got == paddock.KindOverlay || got == paddock.KindClone) {
			got = k // auto becomes the kind this machine can make
		}
		if r.State() != paddock.StateReady || got != k || len(r.Workspace.BaseRevision) != 40 {
			t.Fatalf("created %s: %+v", k, r.Workspace)
		}
		ids[k] = r.ID
	}
	plain := cli(t, home, "create", "-p", "my-app", "--base", "main").must(t)
	extra := strings.TrimSpace(plain.out)
	if !strings.HasPrefix(extra, "r-") || strings.Contains(extra, "\n") {
		t.Fatalf("create prints %q, want just the run id", plain.out)
	}
	ls := cli(t, home, "ls").must(t).out
	for _, id := range ids {
		if !strings.Contains(ls, id) {
			t.Fatalf("ls misses %s:\n%s", id, ls)
		}
	}
	if !strings.Contains(ls, "STATE") || !strings.Contains(ls, "worktree") || !strings.Contains(ls, "(main)") {
		t.Fatalf("ls output:\n%s", ls)
	}
	show := cli(t, home, "show", ids[paddock.KindClone]).must(t).out
	for _, want := range []string{"state:", "ready", "kind:", "clone", "base:", "cleanup policy:"} {
		if !strings.Contains(show, want) {
			t.Fatalf("show misses %q:\n%s", want, show)
		}
	}

	checkTCP(t, home, d.info.Listen)

	// The project lock: operator_dir holds it; a forced unlock is recorded.
	cli(t, home, "create", "-p", "my-app", "--kind", "operator_dir", "--dir", handed).wantCode(t, exitBusy, "locked by run "+ids[paddock.KindOperatorDir])
	cli(t, home, "project", "unlock", "my-app").wantCode(t, exitUsage, "--force")
	un := cli(t, home, "project", "unlock", "my-app", "--force").must(t).out
	if !strings.Contains(un, ids[paddock.KindOperatorDir]) || !strings.Contains(un, "uid ") {
		t.Fatalf("unlock: %s", un)
	}
	evs := decodeLines(t, cli(t, home, "events", ids[paddock.KindOperatorDir], "--json").must(t).out)
	last := evs[len(evs)-1]
	if last.Type != paddock.EventLockForceRelease || !strings.Contains(string(last.Data), `"by":`) {
		t.Fatalf("last event: %s %s", last.Type, last.Data)
	}

	// Follow a run's events while it changes.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var followed result
	wg.Add(1)
	go func() {
		defer wg.Done()
		followed = cliCtx(ctx, t, home, "events", ids[paddock.KindWorktree], "--follow")
	}()
	time.Sleep(200 * time.Millisecond)
	cli(t, home, "resume", ids[paddock.KindWorktree]).must(t)
	cli(t, home, "checkpoint", ids[paddock.KindWorktree], "--reason", "lunch").must(t)
	time.Sleep(time.Second) // the follower's long poll wakes on each append
	cancel()
	wg.Wait()
	for _, want := range []string{"requested -> preparing", "ready -> active", "active -> checkpointed (lunch)"} {
		if !strings.Contains(followed.out, want) {
			t.Fatalf("events --follow misses %q:\n%s\n%s", want, followed.out, followed.err)
		}
	}

	// Retention is a hard stop through the CLI.
	cli(t, home, "retain", ids[paddock.KindClone]).must(t)
	cli(t, home, "rm", ids[paddock.KindClone]).wantCode(t, exitConflict, "retained")
	cli(t, home, "reject", ids[paddock.KindClone]).wantCode(t, exitConflict, "retained")
	cli(t, home, "project", "rm", "my-app").wantCode(t, exitConflict, "still has workspaces")

	// kill -9 with a run active, a directory gone and a stray directory.
	cli(t, home, "resume", extra).must(t)
	wt := runState(t, home, ids[paddock.KindWorktree])
	os.RemoveAll(wt.Workspace.Root)
	stray := filepath.Join(home, "workspaces", "r-stray")
	os.MkdirAll(stray, 0o755)
	d.kill9()
	if _, err := os.Stat(filepath.Join(home, "paddock.sock")); err != nil {
		t.Fatal("the killed daemon's socket should still be there, to prove restart copes")
	}
	cli(t, home, "ls").wantCode(t, exitUnreachable, "unreachable")
	d = startDaemon(t, home)
	if len(d.info.Recovered) != 2 {
		t.Fatalf("recovered = %+v", d.info.Recovered)
	}
	if r := runState(t, home, extra); r.State() != paddock.StateCheckpointed || r.Workspace.Checkpoint.Reason != "daemon restart" {
		t.Fatalf("active run after kill -9: %s", r.State())
	}
	if r := runState(t, home, ids[paddock.KindWorktree]); r.State() != paddock.StateOrphaned {
		t.Fatalf("run without directory after restart: %s", r.State())
	}
	dry := decode[[]paddock.Finding](t, cli(t, home, "gc", "--dry-run", "--json"))
	if len(dry) != 2 || dry[0].Action != paddock.ActionWouldClean {
		t.Fatalf("gc --dry-run = %+v", dry)
	}
	gcOut := cli(t, home, "gc").must(t).out
	if !strings.Contains(gcOut, "cleaned") || !strings.Contains(gcOut, "r-stray") {
		t.Fatalf("gc:\n%s", gcOut)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatal("gc left the stray directory")
	}
	if out := cli(t, home, "gc").must(t).out; !strings.Contains(out, "nothing to collect") {
		t.Fatalf("second gc:\n%s", out)
	}

	// Reject and remove everything not retained: the project is byte-identical.
	for _, id := range []string{ids[paddock.KindOperatorDir], ids[paddock.KindOverlay], ids[paddock.KindAuto], extra} {
		cli(t, home, "reject", id).must(t)
		cli(t, home, "rm", id).must(t)
	}
	cli(t, home, "rm", ids[paddock.KindWorktree]).must(t)
	gittest.RequireIdentical(t, repo, before, beforeLines)
	if runs := decode[[]*paddock.Run](t, cli(t, home, "ls", "--json")); len(runs) != 1 || runs[0].ID != ids[paddock.KindClone] {
		t.Fatalf("ls after rm = %v", runs)
	}
	if runs := decode[[]*paddock.Run](t, cli(t, home, "ls", "--all", "--json")); len(runs) != len(paddock.Kinds)+1 {
		t.Fatalf("ls --all after rm = %d runs", len(runs))
	}
	// Every run's events are gap-free, and every transition is one.
	for _, id := range []string{ids[paddock.KindWorktree], extra} {
		evs := decodeLines(t, cli(t, home, "events", id, "--json").must(t).out)
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("%s: event %d has seq %d", id, i, e.Seq)
			}
		}
	}

	// A second daemon on the same state directory is refused.
	second := exec.Command(binary, "serve", "--home", home)
	out, err := second.CombinedOutput()
	if code := second.ProcessState.ExitCode(); err == nil || code != exitBusy || !strings.Contains(string(out), "already running") {
		t.Fatalf("second daemon: exit %d, %s", code, out)
	}

	// version and doctor talk to the daemon without starting one.
	if v := cli(t, home, "version").must(t).out; !strings.Contains(v, fmt.Sprintf("pid %d", d.info.PID)) {
		t.Fatalf("version: %s", v)
	}
	rep := decode[paddock.DoctorReport](t, cli(t, home, "doctor", "--json"))
	names := []string{}
	for _, c := range rep.Checks {
		names = append(names, c.Name)
	}
	for _, want := range []string{"state directory", "git", "daemon", "landlock", "user namespaces", "overlayfs", "seccomp", "cgroup v2"} {
		if !slices.Contains(names, want) {
			t.Fatalf("doctor misses %s: %v", want, names)
		}
	}

	// SIGTERM: graceful stop checkpoints active runs and removes the socket.
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	if _, err := os.Stat(filepath.Join(home, "paddock.sock")); !os.IsNotExist(err) {
		t.Fatal("socket left after a graceful stop")
	}
}

func decodeLines(t *testing.T, s string) []*paddock.Event {
	t.Helper()
	var out []*paddock.Event
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		var e paddock.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("event line %q: %v", line, err)
		}
		out = append(out, &e)
	}
	return out
}

// checkTCP checks the loopback listener's guards: token, Origin, Host.
func checkTCP(t *testing.T, home, addr string) {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(home, "token"))
	if err != nil {
		t.Fatal(err)
	}
	get := func(mod func(*http.Request)) int {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/runs", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		mod(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, tc := range map[string]struct {
		mod  func(*http.Request)
		want int
	}{
		"token":       {func(*http.Request) {}, 200},
		"no token":    {func(r *http.Request) { r.Header.Del("Authorization") }, 401},
		"wrong token": {func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, 401},
		"origin":      {func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, 403},
		"referer":     {func(r *http.Request) { r.Header.Set("Referer", "https://evil.example/") }, 403},
		"rebinding":   {func(r *http.Request) { r.Host = "evil.example" }, 403},
	} {
		if got := get(tc.mod); got != tc.want {
			t.Errorf("TCP %s: status %d, want %d", name, got, tc.want)
		}
	}
	// The CLI reaches the daemon over TCP with --addr and the token file.
	if out := cli(t, home, "--addr", addr, "project", "ls").must(t).out; !strings.Contains(out, "my-app") {
		t.Fatalf("project ls over TCP: %s", out)
	}
}

// killHarnesses kills the resident sandboxes a daemon of home left (a test
// that failed before stopping it gracefully, or one killed with -9 that
// was never restarted): nothing a test starts outlives it.
func killHarnesses(home string) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var killed []int
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !strings.Contains(string(b), sandbox.HarnessArg) || !strings.Contains(string(b), filepath.Join(home, "harness")+"/") {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
			killed = append(killed, pid)
		}
	}
	for _, pid := range killed {
		for i := 0; i < 200 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
	sandbox.SweepCgroupsOf(filepath.Join(home, "harness")) // and their pids cgroups
}
