package paddockcli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/client"
)

// autostart starts a daemon for home in the background, detached from the
// caller's terminal and output (it gets its own session, and its log goes to
// <home>/daemon.log), and waits until it answers.
func (a *app) autostart(ctx context.Context, home string, c *client.Client) error {
	exe := a.exe
	if exe == "" {
		var err error
		if exe, err = a.daemonExecutable(); err != nil {
			return fmt.Errorf("autostart: %w", err)
		}
	}
	if err := prepareHome(home); err != nil {
		return err
	}
	logPath := filepath.Join(home, "daemon.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("autostart: %w", err)
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("autostart: %w", err)
	}
	defer devnull.Close()
	start := func() (int, <-chan error, error) {
		cmd := exec.Command(exe, "serve", "--home", home)
		cmd.Stdin = devnull
		cmd.Stdout = logf
		cmd.Stderr = logf
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return 0, nil, fmt.Errorf("autostart: %w", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		return cmd.Process.Pid, exited, nil
	}
	pid, exited, err := start()
	if err != nil {
		return err
	}

	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var again <-chan time.Time // when to start one again, after ours found home held
	for {
		if st, err := c.Status(ctx); err == nil {
			// The daemon that answers is ours only by its pid: another
			// call's may answer while ours has yet to find home held
			// and exit.
			if exited != nil && st.PID == pid {
				fmt.Fprintf(a.stderr, "paddock: started a daemon (pid %d, log %s)\n", pid, logPath)
			}
			return nil
		}
		select {
		case err := <-exited:
			// A daemon that exits busy found home held by another:
			// one another call started at the same time (an agent's
			// calls made at once, the first time), which may not listen
			// yet, or one still stopping. Wait for it to answer, and
			// start ours again in a while, in case it was stopping.
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == exitBusy {
				exited, again = nil, time.After(250*time.Millisecond)
				continue
			}
			if c.Health(ctx) == nil {
				return nil
			}
			return fmt.Errorf("autostart: the daemon exited (%v); see %s", err, logPath)
		case <-again:
			again = nil
			if pid, exited, err = start(); err != nil {
				return err
			}
		case <-deadline.C:
			if exited == nil {
				return fmt.Errorf("autostart: another daemon holds %s but did not answer within 15s; see %s", home, logPath)
			}
			return fmt.Errorf("autostart: the daemon (pid %d) did not answer within 15s; see %s", pid, logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
