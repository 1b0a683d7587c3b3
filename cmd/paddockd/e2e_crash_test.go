package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestKillDuringCreate kills the daemon with SIGKILL while it is making a
// workspace, at several moments, and checks that the restarted daemon leaves
// each workspace either finished or rolled back, never half-made, and that
// the project ends byte-identical.
func TestKillDuringCreate(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "big"), 4000)
	before, lines := gittest.TreeDigest(t, repo)
	d := startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)

	delays := []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond, 150 * time.Millisecond, 3 * time.Second}
	for i, delay := range delays {
		kind := []string{"worktree", "clone"}[i%2]
		done := make(chan result, 1)
		go func() { done <- cli(t, home, "create", "-p", "big", "--kind", kind) }()
		// Wait until the workspace directory appears: the daemon is preparing.
		ws := filepath.Join(home, "workspaces")
		deadline := time.Now().Add(20 * time.Second)
		for {
			entries, _ := os.ReadDir(ws)
			if len(entries) > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(delay)
		d.kill9()
		<-done
		d = startDaemon(t, home)

		runs := decode[[]*paddock.Run](t, cli(t, home, "ls", "--json"))
		if len(runs) != 1 {
			t.Fatalf("kill after %v: %d runs listed", delay, len(runs))
		}
		r := runs[0]
		switch r.State() {
		case paddock.StateCleaned:
			if _, err := os.Stat(r.Workspace.Root); !os.IsNotExist(err) {
				t.Fatalf("kill after %v: rolled back but %s is on disk", delay, r.Workspace.Root)
			}
		case paddock.StateReady:
			if n := countFiles(t, r.Workspace.Root); n < 4002 {
				t.Fatalf("kill after %v: ready with %d files", delay, n)
			}
		default:
			logb, _ := os.ReadFile(filepath.Join(home, "test-daemon.log"))
			t.Fatalf("kill after %v: state %s after restart\n%s", delay, r.State(), logb)
		}
		t.Logf("kill %v after the directory appeared (%s): %s", delay, kind, r.State())
		cli(t, home, "rm", r.ID).must(t)
		gittest.RequireIdentical(t, repo, before, lines)
	}
}

func countFiles(t *testing.T, root string) int {
	t.Helper()
	n := 0
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && !strings.Contains(p, "/.git/") {
			n++
		}
		return nil
	})
	return n
}

// TestAutostart runs the real binary with no daemon: it must start one in the
// background, detached from the caller's output (a caller reading the CLI's
// stdout to EOF must not wait for the daemon), and use it.
func TestAutostart(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	t.Cleanup(func() {
		b, err := os.ReadFile(filepath.Join(home, "daemon.json"))
		if err != nil {
			return
		}
		var info paddock.DaemonStatus
		if json.Unmarshal(b, &info) == nil && info.PID > 0 {
			if p, err := os.FindProcess(info.PID); err == nil {
				p.Signal(os.Interrupt)
				for i := 0; i < 200; i++ {
					if _, err := os.Stat(filepath.Join(home, "daemon.json")); os.IsNotExist(err) {
						return
					}
					time.Sleep(25 * time.Millisecond)
				}
				p.Kill()
			}
		}
	})
	run := func(env ...string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, "project", "ls")
		cmd.Env = append(os.Environ(), append([]string{"PADDOCK_HOME=" + home}, env...)...)
		out, _ := cmd.CombinedOutput() // reads to EOF: hangs if the daemon kept the pipe
		if ctx.Err() != nil {
			t.Fatal("the CLI's output stayed open: the daemon did not detach")
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := run("PADDOCK_NO_AUTOSTART=1")
	if code != exitUnreachable || !strings.Contains(out, "unreachable") {
		t.Fatalf("with autostart off: exit %d, %s", code, out)
	}
	out, code = run()
	if code != 0 || !strings.Contains(out, "started a daemon") || !strings.Contains(out, "NAME") {
		t.Fatalf("autostart: exit %d, %s", code, out)
	}
	out, code = run()
	if code != 0 || strings.Contains(out, "started a daemon") {
		t.Fatalf("second call started another daemon: exit %d, %s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "daemon.log")); !strings.Contains(string(b), "paddock serving") {
		t.Fatalf("daemon log: %s", b)
	}
}

func TestServeRefusesBadSetup(t *testing.T) {
	base := t.TempDir()
	// An unwritable state directory.
	ro := filepath.Join(base, "ro")
	os.Mkdir(ro, 0o500)
	r := cli(t, "/proc/paddock-state", "serve")
	r.wantCode(t, exitUsage, "cannot create state directory")
	if os.Geteuid() != 0 { // root writes anywhere
		cli(t, ro, "serve").wantCode(t, exitUsage, "not writable")
	}
	// A config with an unknown key, or a listener that is not loopback.
	home := filepath.Join(base, "home")
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("listne = \"127.0.0.1:1\"\n"), 0o600)
	cli(t, home, "serve").wantCode(t, exitUsage, "unknown key")
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("listen = \"0.0.0.0:7070\"\n"), 0o600)
	cli(t, home, "serve").wantCode(t, exitUsage, "only loopback")
	cli(t, home, "serve", "--config", filepath.Join(base, "missing.toml")).wantCode(t, exitUsage, "missing.toml")
	cli(t, home, "serve", "--log-level", "loud").wantCode(t, exitUsage, "log level")
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("changeset_max_total = \"lots\"\n"), 0o600)
	cli(t, home, "serve").wantCode(t, exitUsage, "changeset_max_total")
}

// TestHelp checks that every verb explains itself and its exit codes.
func TestHelp(t *testing.T) {
	home := t.TempDir()
	root := cli(t, home, "--help").must(t).out
	if !strings.Contains(root, "Exit codes:") {
		t.Fatalf("paddock --help lacks exit codes:\n%s", root)
	}
	verbs := [][]string{{"serve"}, {"create"}, {"ls"}, {"show"}, {"retain"}, {"reject"}, {"rm"}, {"events"},
		{"gc"}, {"checkpoint"}, {"resume"}, {"version"}, {"doctor"},
		{"project", "add"}, {"project", "ls"}, {"project", "rm"}, {"project", "unlock"},
		{"tool"}, {"tools"}, {"inbox"}, {"exec"}, {"diff"}, {"submit"}, {"approve"}, {"apply"}, {"undo"}, {"fake-agent"}}
	for _, v := range verbs {
		out := cli(t, home, append(v, "--help")...).must(t).out
		if !strings.Contains(out, "Usage:") || len(out) < 200 {
			t.Errorf("%v --help is too thin:\n%s", v, out)
		}
		needsCodes := v[0] != "serve" && v[0] != "ls" && v[0] != "version" && !(v[0] == "project" && v[1] == "ls")
		if needsCodes && !strings.Contains(out, "Exit codes") {
			t.Errorf("%v --help does not list exit codes", v)
		}
	}
}

// TestFollowWhenTheDaemonDies: `paddock events --follow`, the real binary
// with autostart on, whose daemon is killed (kill -9) under it: the CLI
// ends with the daemon's absence (exit 8) once none has answered for the
// client's grace, rather than waiting for ever or starting a daemon of
// its own in the place of the one that was stopped. With autostart off
// and no daemon at all it ends at once, as every verb does.
func TestFollowWhenTheDaemonDies(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 3)
	d := startDaemon(t, home)
	t.Cleanup(func() { stopDaemonOf(home) }) // one the CLI would have started
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "events", id, "--follow")
	cmd.Env = append(os.Environ(), "PADDOCK_HOME="+home)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 1)
	if _, err := stdout.Read(line); err != nil { // it follows: an event came
		t.Fatalf("no event: %v %s", err, stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	d.kill9()
	killed := time.Now()
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("events --follow still ran %v after its daemon was killed; stderr: %s", time.Since(killed), stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != exitUnreachable || !strings.Contains(stderr.String(), "unreachable") ||
		strings.Contains(stderr.String(), "started a daemon") {
		t.Fatalf("after the daemon was killed: exit %d (%v), stderr: %s", code, err, stderr.String())
	}
	t.Logf("ended %v after the kill: %s", time.Since(killed).Round(time.Millisecond), stderr.String())

	// No daemon at all, autostart off: exit 8 at once.
	start := time.Now()
	cmd = exec.CommandContext(ctx, binary, "events", id, "--follow")
	cmd.Env = append(os.Environ(), "PADDOCK_HOME="+filepath.Join(base, "empty"), "PADDOCK_NO_AUTOSTART=1")
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitUnreachable || time.Since(start) > 5*time.Second {
		t.Fatalf("with no daemon: exit %d after %v: %s", code, time.Since(start), out)
	}
}

// stopDaemonOf stops every daemon serving home: the one daemon.json
// names, and any other a CLI call started for it (autostart passes
// --home), a late one that took home once the first stopped included.
// Tests stop every process they start, even when they fail.
func stopDaemonOf(home string) {
	var info paddock.DaemonStatus
	if b, err := os.ReadFile(filepath.Join(home, "daemon.json")); err == nil && json.Unmarshal(b, &info) == nil && info.PID > 0 {
		syscall.Kill(info.PID, syscall.SIGTERM) // whatever its command line
	}
	for range 10 {
		pids := daemonsOf(home)
		if len(pids) == 0 {
			// A moment later, once more: one still starting.
			time.Sleep(200 * time.Millisecond)
			if pids = daemonsOf(home); len(pids) == 0 {
				return
			}
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGTERM)
		}
		for range 400 {
			if len(daemonsOf(home)) == 0 {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		for _, pid := range daemonsOf(home) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// daemonsOf lists the processes serving home (serve --home HOME), read
// from /proc; a process that has exited (a zombie) has no command line.
func daemonsOf(home string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		i := slices.Index(args, "--home")
		serves := i >= 0 && i+1 < len(args) && args[i+1] == home || slices.Contains(args, "--home="+home)
		if serves && slices.Contains(args, "serve") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestAutostartRace: calls made at once on a home with no daemon (an
// agent's parallel tool calls, the first time) each start one; one
// daemon serves, and every call uses it, the ones whose daemon found it
// already running included.
func TestAutostartRace(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	t.Cleanup(func() { stopDaemonOf(home) })
	const n = 6
	type res struct {
		out  string
		code int
	}
	results := make(chan res, n)
	for range n {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, "project", "ls")
			cmd.Env = append(os.Environ(), "PADDOCK_HOME="+home)
			out, _ := cmd.CombinedOutput()
			results <- res{string(out), cmd.ProcessState.ExitCode()}
		}()
	}
	started := 0
	for range n {
		r := <-results
		if r.code != 0 || !strings.Contains(r.out, "NAME") {
			t.Errorf("a call that raced to start the daemon: exit %d, %s", r.code, r.out)
		}
		if strings.Contains(r.out, "started a daemon") {
			started++
		}
	}
	if started != 1 {
		t.Errorf("%d calls said they started the daemon", started)
	}
}

// TestAutostartWhileStopping: a call made while the daemon is stopping
// (SIGTERM: it checkpoints its active runs, no longer listening but still
// holding home) starts the next one once home is free, rather than
// failing because the one it started found home held.
func TestAutostartWhileStopping(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 3)
	d := startDaemon(t, home)
	t.Cleanup(func() { stopDaemonOf(home) }) // the one the call starts
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "true").must(t) // active: the stop checkpoints it
	d.cmd.Process.Signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "ls")
	cmd.Env = append(os.Environ(), "PADDOCK_HOME="+home)
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(string(out), id) {
		t.Fatalf("a call while the daemon stopped: exit %d: %s", code, out)
	}
}
