package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/kernel"
	"github.com/paddock-dev/paddock/sandbox"
	"github.com/spf13/cobra"
)

func (a *app) doctorCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [--json]",
		Short: "Check what this machine offers paddock, and what it lacks",
		Long: `Check the state directory, git, the daemon, and the kernel mechanisms the
sandbox builds on (Landlock, user namespaces, overlayfs, seccomp, cgroup v2),
each with a one-line fix where one exists; then run /bin/true in the sandbox
for real. It never starts a daemon.

Exit codes: 0 nothing failed (warnings allowed); 1 a check failed.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			checks := a.doctor(cmd.Context())
			failed := false
			for _, c := range checks {
				failed = failed || c.Status == kernel.Fail
			}
			err := a.output(asJSON, checks, func(w io.Writer) {
				for _, c := range checks {
					fmt.Fprintf(w, "%-4s  %-16s %s\n", c.Status, c.Name, c.Detail)
					if c.Fix != "" {
						fmt.Fprintf(w, "      %-16s fix: %s\n", "", c.Fix)
					}
				}
			})
			if err == nil && failed {
				err = fmt.Errorf("some checks failed")
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) doctor(ctx context.Context) []kernel.Check {
	var out []kernel.Check
	home, err := a.stateDir()
	switch {
	case err != nil:
		out = append(out, kernel.Check{Name: "state directory", Status: kernel.Fail, Detail: err.Error(), Fix: "set PADDOCK_HOME"})
	default:
		c := kernel.Check{Name: "state directory", Status: kernel.OK, Detail: home}
		if _, err := os.Stat(home); err != nil {
			c.Detail += " (not created yet)"
			if err := os.MkdirAll(filepath.Dir(home), 0o700); err != nil {
				c.Status, c.Fix = kernel.Fail, "make its parent writable or set PADDOCK_HOME"
			}
		} else if err := prepareHome(home); err != nil {
			c.Status, c.Detail, c.Fix = kernel.Fail, err.Error(), "fix its permissions or set PADDOCK_HOME"
		}
		out = append(out, c)
	}
	if g, err := gitx.New(ctx); err != nil {
		out = append(out, kernel.Check{Name: "git", Status: kernel.Fail, Detail: err.Error(), Fix: "install git 2.25 or newer"})
	} else {
		v, _ := g.Version(ctx)
		out = append(out, kernel.Check{Name: "git", Status: kernel.OK, Detail: "git " + v + " at " + g.Path})
	}
	d := kernel.Check{Name: "daemon", Status: kernel.OK}
	if st := a.daemonStatus(ctx); st != nil {
		d.Detail = fmt.Sprintf("%s, pid %d, %s", st.Version, st.PID, st.Socket)
	} else {
		d.Status, d.Detail, d.Fix = kernel.Warn, "not running", "paddock serve (the CLI also starts one on demand)"
	}
	out = append(out, d)
	if os.Geteuid() == 0 {
		out = append(out, kernel.Check{Name: "user", Status: kernel.Warn, Detail: "running as root",
			Fix: "run the daemon as an unprivileged user; agents never need root"})
	}
	out = append(out, kernel.Probe()...)
	return append(out, sandboxCheck(ctx), harnessCheck(ctx, home))
}

// harnessCheck says which sandbox mode the daemon uses and, for resident,
// proves a harness starts and forks commands here, with what each costs.
func harnessCheck(ctx context.Context, home string) kernel.Check {
	c := kernel.Check{Name: "sandbox mode"}
	cfg, err := loadConfig(home, "")
	if err != nil {
		c.Status, c.Detail = kernel.Warn, err.Error()
		return c
	}
	if cfg.SandboxMode == "per-exec" {
		c.Status, c.Detail = kernel.OK, "per-exec (sandbox_mode in paddock.toml): each command gets a sandbox of its own"
		return c
	}
	dir, err := os.MkdirTemp("", "paddock-doctor-")
	if err != nil {
		c.Status, c.Detail = kernel.Fail, err.Error()
		return c
	}
	defer os.RemoveAll(dir)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	uid := 0
	if os.Getuid() == 0 {
		uid = 65534
		os.Chmod(dir, 0o755)
		os.Chown(ws, uid, uid)
	}
	pool := &sandbox.Pool{Dir: filepath.Join(dir, "h")}
	defer pool.Close()
	var took [2]time.Duration
	var res *sandbox.Result
	for i := range took {
		start := time.Now()
		res, err = pool.Run(ctx, "doctor", sandbox.Spec{Argv: []string{"/bin/true"}, Workspace: ws, UID: uid, GID: uid,
			Env: []string{"PATH=/usr/bin:/bin"}, Limits: sandbox.Limits{Wall: 20 * time.Second}})
		took[i] = time.Since(start)
		if err != nil {
			break
		}
	}
	switch {
	case err != nil:
		c.Status, c.Detail, c.Fix = kernel.Warn, "resident sandboxes do not work here: "+paddock.ErrorMessage(err),
			`set sandbox_mode = "per-exec" in paddock.toml`
	case res.Enforcement.Mode != "resident":
		c.Status, c.Detail = kernel.Warn, "per-exec: "+res.Enforcement.ModeReason
	default:
		c.Status = kernel.OK
		c.Detail = fmt.Sprintf("resident: one harness per active run (set-up %s, then %s per exec); idle %s, orphan %s",
			took[0].Round(time.Millisecond/10), took[1].Round(time.Millisecond/10), orDefault(cfg.HarnessIdle, "5m"), orDefault(cfg.HarnessOrphan, "10m"))
		if err := sandbox.ProbeOverlay(ctx, uid); err != nil {
			c.Status, c.Fix = kernel.Warn, "runs of kind auto get clone workspaces; overlay needs overlayfs mountable in a user namespace (Linux 5.11+)"
			c.Detail += "; overlay workspaces do not work here: " + paddock.ErrorMessage(err)
		} else {
			c.Detail += "; overlay workspaces work (kind auto makes them)"
		}
	}
	return c
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// sandboxCheck runs /bin/true in the sandbox for real: the one check that
// proves the mechanisms work together on this machine.
func sandboxCheck(ctx context.Context) kernel.Check {
	c := kernel.Check{Name: "sandbox"}
	dir, err := os.MkdirTemp("", "paddock-doctor-")
	if err != nil {
		c.Status, c.Detail = kernel.Fail, err.Error()
		return c
	}
	defer os.RemoveAll(dir)
	uid := 0
	if os.Getuid() == 0 {
		uid = 65534
		os.Chown(dir, uid, uid)
	}
	res, err := sandbox.Run(ctx, sandbox.Spec{Argv: []string{"/bin/true"}, Workspace: dir, UID: uid, GID: uid,
		Env: []string{"PATH=/usr/bin:/bin"}, Limits: sandbox.Limits{Wall: 20 * time.Second}})
	switch {
	case err != nil:
		c.Status, c.Detail = kernel.Fail, paddock.ErrorMessage(err)
		if paddock.ErrorCode(err) == paddock.CodeInternal {
			c.Detail = err.Error()
		}
		c.Fix = "see the checks above; paddock exec refuses to run unconfined"
	case res.ExitCode != 0:
		c.Status, c.Detail = kernel.Fail, fmt.Sprintf("/bin/true exited %d in the sandbox: %s", res.ExitCode, res.Stderr)
	default:
		e := res.Enforcement
		c.Status = kernel.OK
		c.Detail = fmt.Sprintf("works: namespaces %v, Landlock ABI %d, seccomp %v, uid %d, %s per exec",
			e.Namespaces, e.Landlock, e.Seccomp, e.UID, res.Duration.Round(time.Millisecond/10))
	}
	return c
}
