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
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/client"
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
}

// StartDaemon builds paddock into tmp and starts it with its state in tmp/home.
func StartDaemon(ctx context.Context, tmp string) (*Daemon, error) {
	bin := filepath.Join(tmp, "paddock")
	Step("building paddock")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/paddock").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build: %v\n%s", err, out)
	}
	home := filepath.Join(tmp, "home")
	cmd := exec.Command(bin, "serve", "--home", home, "--log-level", "warn")
	logf, err := os.Create(filepath.Join(tmp, "daemon.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &Daemon{Cmd: cmd, Client: client.Unix(filepath.Join(home, "paddock.sock")), Home: home}
	for i := 0; d.Client.Health(ctx) != nil; i++ {
		if i > 400 {
			d.Stop()
			return nil, fmt.Errorf("daemon did not start")
		}
		time.Sleep(25 * time.Millisecond)
	}
	return d, nil
}

// Stop stops the daemon.
func (d *Daemon) Stop() {
	d.Cmd.Process.Signal(syscall.SIGTERM)
	d.Cmd.Wait()
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
