// Package benchutil holds what every paddock benchmark shares: timing
// summaries, the machine line, and a daemon started from a fresh build.
package benchutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/client"
	"golang.org/x/sys/unix"
)

// Step prints progress on stderr.
func Step(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+" …\n", args...) }

// Median of ds.
func Median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// Percentile p (0–100) of ds.
func Percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// Stats is "median (min–max)".
func Stats(ds []time.Duration) string {
	return fmt.Sprintf("%s (%s–%s)", Round(Median(ds)), Round(slices.Min(ds)), Round(slices.Max(ds)))
}

// Ratio of the medians (ours / peer), with how many times faster when it
// is under one.
func Ratio(ours, peer []time.Duration) string {
	r := float64(Median(ours)) / float64(Median(peer))
	if r > 0 && r < 1 {
		return fmt.Sprintf("%.3g× (%.1f× faster)", r, 1/r)
	}
	return fmt.Sprintf("%.2f×", r)
}

// Round a duration for a table.
func Round(d time.Duration) time.Duration {
	switch {
	case d > time.Second:
		return d.Round(10 * time.Millisecond)
	case d > time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(100 * time.Nanosecond)
}

// Machine describes the machine for the table's heading.
func Machine(dir string) string {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	var st syscall.Statfs_t
	syscall.Statfs(dir, &st)
	names := map[int64]string{0xef53: "ext4", 0x9123683e: "btrfs", 0x58465342: "xfs", 0x01021994: "tmpfs", 0x794c7630: "overlayfs"}
	fs, ok := names[int64(st.Type)]
	if !ok {
		fs = fmt.Sprintf("0x%x", st.Type)
	}
	return fmt.Sprintf("machine: %d cores, kernel %s, file system %s", runtime.NumCPU(), strings.TrimSpace(string(kernel)), fs)
}

// Daemon is a paddock daemon built from this checkout.
type Daemon struct {
	Cmd    *exec.Cmd
	Client *client.Client
	Home   string
	Log    string // the daemon's stdout and stderr
}

// StartDaemon builds paddock into tmp and starts it with its state in tmp/home.
func StartDaemon(ctx context.Context, tmp string) (*Daemon, error) {
	bin, err := Binary(tmp)
	if err != nil {
		return nil, err
	}
	return StartDaemonFrom(ctx, bin, filepath.Join(tmp, "home"))
}

// Binary is the paddock binary a benchmark runs: the one
// PADDOCK_BENCH_BINARY names (built already: one a profiler can still read
// after the benchmark removed its directory, or an older one to compare),
// else paddock built into tmp.
func Binary(tmp string) (string, error) {
	if bin := os.Getenv("PADDOCK_BENCH_BINARY"); bin != "" {
		return bin, nil
	}
	bin := filepath.Join(tmp, "paddock")
	Step("building paddock")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/paddockd").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build: %v\n%s", err, out)
	}
	return bin, nil
}

// StartDaemonFrom starts bin (paddock's whole binary) as `serve` with its
// state in home and the extra flags, its output in home/bench-daemon.log,
// and waits for its socket to answer.
func StartDaemonFrom(ctx context.Context, bin, home string, extra ...string) (*Daemon, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(home, "bench-daemon.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--home", home, "--log-level", "warn"}, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "PADDOCK_NO_AUTOSTART=1")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &Daemon{Cmd: cmd, Client: client.Unix(filepath.Join(home, "paddock.sock")), Home: home, Log: logf.Name()}
	for i := 0; ; i++ {
		err := d.Client.Health(ctx)
		if err == nil {
			return d, nil
		}
		if i > 600 || ctx.Err() != nil {
			d.Stop()
			return nil, fmt.Errorf("the daemon in %s did not start: %v\n%s", home, err, d.LogTail(20))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Stop stops the daemon: SIGTERM, and SIGKILL if it has not exited a
// minute later, which is a defect of the daemon's and an error. Stopping
// a stopped daemon does nothing.
func (d *Daemon) Stop() error {
	if d.Cmd.ProcessState != nil {
		return nil
	}
	d.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { d.Cmd.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(time.Minute):
		d.Cmd.Process.Kill()
		<-done
		err := fmt.Errorf("the daemon (pid %d) did not stop a minute after SIGTERM:\n%s", d.Cmd.Process.Pid, d.LogTail(20))
		fmt.Fprintln(os.Stderr, "bench:", err)
		return err
	}
}

// LogTail is the last n lines of the daemon's log, for a bench's failure.
func (d *Daemon) LogTail(n int) string {
	b, err := os.ReadFile(d.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// Subreaper makes this process the subreaper of everything it starts
// (PR_SET_CHILD_SUBREAPER), so that a process a daemon or a child leaves
// behind when it ends becomes this process's child, where Leftovers finds
// it, and not init's.
func Subreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_CHILD_SUBREAPER: %w", err)
	}
	return nil
}

// Leftovers waits up to wait for this process to have no child left,
// reaping those that end (orphans a subreaper inherits have no exec.Cmd to
// wait for them), then kills those still there, by pid, and returns their
// pids and command lines. Call it once every child it started has been
// waited for: what remains was left behind.
func Leftovers(wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		pids := children()
		for _, pid := range pids {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
		pids = children()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var out []string
			for _, pid := range pids {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				out = append(out, fmt.Sprintf("pid %d (%s)", pid, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))))
				unix.Kill(pid, unix.SIGKILL)
				var ws unix.WaitStatus
				unix.Wait4(pid, &ws, 0, nil)
			}
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// children are the pids whose parent is this process, zombies included.
func children() []int {
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		f := strings.Fields(rest)
		if len(f) > 1 {
			if ppid, err := strconv.Atoi(f[1]); err == nil && ppid == self {
				out = append(out, pid)
			}
		}
	}
	return out
}

// RSS returns the daemon's resident set size as /proc reports it.
func (d *Daemon) RSS() string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.Cmd.Process.Pid))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// Git runs git for a benchmark's own fixtures, with no user config.
func Git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Repo makes a benchmark's small project at dir: a git repository whose
// one commit holds files (path, relative to dir, to content).
func Repo(dir string, files map[string]string) error {
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	if _, err := Git("", "init", "-q", dir); err != nil {
		return err
	}
	if _, err := Git(dir, "add", "-A"); err != nil {
		return err
	}
	_, err := Git(dir, "commit", "-qm", "x")
	return err
}
