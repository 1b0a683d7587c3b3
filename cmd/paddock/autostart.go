package main

import (
	"context"
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
		if exe, err = daemonExecutable(); err != nil {
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
	cmd := exec.Command(exe, "serve", "--home", home)
	cmd.Stdin = devnull
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("autostart: %w", err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := c.Health(ctx); err == nil {
			fmt.Fprintf(a.stderr, "paddock: started a daemon (pid %d, log %s)\n", pid, logPath)
			return nil
		}
		select {
		case err := <-exited:
			// Another CLI may have won the race to start one; use it if it answers.
			if c.Health(ctx) == nil {
				return nil
			}
			return fmt.Errorf("autostart: the daemon exited (%v); see %s", err, logPath)
		case <-deadline.C:
			return fmt.Errorf("autostart: the daemon (pid %d) did not answer within 15s; see %s", pid, logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
