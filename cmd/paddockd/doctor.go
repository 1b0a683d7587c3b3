package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/internal/paddockcli"
	"github.com/paddock-dev/paddock/kernel"
	"github.com/paddock-dev/paddock/sandbox"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func doctorCmd(a paddockcli.Call) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [--json]",
		Short: "Check what this machine offers paddock, and what it lacks",
		Long: `Check the state directory, the daemon, git, and the kernel mechanisms the
sandbox builds on (Landlock, user namespaces, overlayfs, seccomp, cgroup v2),
each with a one-line fix where one exists; then run /bin/true in the sandbox
for real. It never starts a daemon.

What can be enforced depends on the process that builds the sandbox: its
user, its namespaces, its cgroup. With a daemon running, the machine's
checks are the daemon's own (asked over GET /v1/doctor), since the daemon
builds every run's sandbox; without one they are this CLI's process, which
a daemon started as another user may not match. The output says which
process the checks describe, with its pid and uid (in --json: "process").

Exit codes: 0 nothing failed (warnings allowed); 1 a check failed.`,
		Args: paddockcli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep := doctor(a, cmd.Context())
			failed := false
			for _, c := range rep.Checks {
				failed = failed || c.Status == kernel.Fail
			}
			err := a.Output(asJSON, rep, func(w io.Writer) {
				p := rep.Process
				if p.Role == "daemon" {
					fmt.Fprintf(w, "These checks describe the daemon's process (pid %d, uid %d), which builds every run's sandbox.\n", p.PID, p.UID)
				} else {
					fmt.Fprintf(w, "No daemon answered: these checks describe this CLI's own process (pid %d, uid %d); a daemon run as another user may find otherwise.\n", p.PID, p.UID)
				}
				for _, c := range rep.Checks {
					fmt.Fprintf(w, "%-4s  %-16s %s\n", c.Status, c.Name, c.Detail)
					if c.Fix != "" {
						fmt.Fprintf(w, "      %-16s fix: %s\n", "", c.Fix)
					}
				}
				if len(rep.Holds) > 0 {
					fmt.Fprintln(w, "\nWhat holds each property of a command's confinement here (a command with no network):")
					paddockcli.PrintHolds(w, rep.Holds)
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

// doctor checks what the CLI itself sees (the state directory, the daemon)
// and then what the process that builds sandboxes can enforce: the
// daemon's, asked, or this process's when no daemon answers.
func doctor(a paddockcli.Call, ctx context.Context) *paddock.DoctorReport {
	var local []kernel.Check
	home, err := a.StateDir()
	st := a.DaemonStatus(ctx)
	switch {
	case err != nil:
		local = append(local, kernel.Check{Name: "state directory", Status: kernel.Fail, Detail: err.Error(), Fix: "set PADDOCK_HOME"})
	case st != nil:
		// The daemon's: it keeps it as its own user wants it.
		local = append(local, kernel.Check{Name: "state directory", Status: kernel.OK, Detail: home + " (the running daemon's)"})
	default:
		// A daemon the CLI starts would run as this user, here.
		c := kernel.Check{Name: "state directory", Status: kernel.OK, Detail: home}
		if _, err := os.Stat(home); err != nil {
			c.Detail += " (not created yet)"
			if err := os.MkdirAll(filepath.Dir(home), 0o700); err != nil {
				c.Status, c.Fix = kernel.Fail, "make its parent writable or set PADDOCK_HOME"
			}
		} else if err := paddockcli.PrepareHome(home); err != nil {
			c.Status, c.Detail, c.Fix = kernel.Fail, err.Error(), "fix its permissions or set PADDOCK_HOME"
		}
		local = append(local, c)
	}
	d := kernel.Check{Name: "daemon", Status: kernel.OK}
	var rep *paddock.DoctorReport
	if st != nil {
		d.Detail = fmt.Sprintf("%s, pid %d, %s", st.Version, st.PID, st.Socket)
		rep, err = client.Unix(paddockcli.SocketPath(home)).Doctor(ctx)
		if err != nil {
			rep = nil
			d.Status, d.Fix = kernel.Warn, "restart the daemon with this version of paddock"
			d.Detail += "; it did not say what it can enforce (" + paddock.ErrorMessage(err) + ")"
		}
	} else {
		d.Status, d.Detail, d.Fix = kernel.Warn, "not running", "paddock serve (the CLI also starts one on demand)"
	}
	if rep == nil {
		cfg, err := loadConfig(home, "")
		if err != nil {
			local = append(local, kernel.Check{Name: "config", Status: kernel.Warn, Detail: err.Error()})
		}
		uid := cfg.SandboxUID
		if os.Getuid() == 0 && uid == 0 {
			uid = 65534 // as serve does: commands never run as root
		}
		// The workspaces' file system: their directory, else the state
		// directory's, else (none yet, or not this user's to write: a
		// daemon's run by another) the temporary directory's.
		ws := ""
		for _, d := range []string{home, filepath.Join(home, "workspaces")} {
			if unix.Access(d, unix.W_OK|unix.X_OK) == nil {
				ws = d
			}
		}
		rep = machineReport(ctx, "cli", doctorConfig{sandboxUID: uid, perExec: cfg.SandboxMode == "per-exec",
			idle: cfg.HarnessIdle, orphan: cfg.HarnessOrphan, workspaces: ws})
	}
	rep.Checks = append(append(local, d), rep.Checks...)
	return rep
}

// doctorConfig is what the daemon's settings change in what it enforces.
type doctorConfig struct {
	sandboxUID   int // who commands run as; 0: the daemon's own user
	perExec      bool
	idle, orphan string
	// workspaces is where overlay workspaces' layers go ("": unknown, the
	// temporary directory): the overlay probe runs on that file system.
	workspaces string
}

// machineReport probes, in this process, what it can enforce: git, the user
// it runs as, the kernel's mechanisms, and a real sandbox. The daemon
// answers GET /v1/doctor with it (role "daemon"); the CLI falls back on it
// (role "cli") when no daemon answers.
func machineReport(ctx context.Context, role string, cfg doctorConfig) *paddock.DoctorReport {
	rep := &paddock.DoctorReport{Process: paddock.ProcessInfo{Role: role, PID: os.Getpid(), UID: os.Getuid(), EUID: os.Geteuid(), GID: os.Getgid()}}
	if g, err := gitx.New(ctx); err != nil {
		rep.Checks = append(rep.Checks, kernel.Check{Name: "git", Status: kernel.Fail, Detail: err.Error(), Fix: "install git 2.25 or newer"})
	} else {
		v, _ := g.Version(ctx)
		rep.Checks = append(rep.Checks, kernel.Check{Name: "git", Status: kernel.OK, Detail: "git " + v + " at " + g.Path})
	}
	if os.Geteuid() == 0 {
		rep.Checks = append(rep.Checks, kernel.Check{Name: "user", Status: kernel.Warn,
			Detail: fmt.Sprintf("running as root; commands run as uid %d", cfg.sandboxUID),
			Fix:    "run the daemon as an unprivileged user; agents never need root"})
	} else {
		rep.Checks = append(rep.Checks, kernel.Check{Name: "user", Status: kernel.OK, Detail: fmt.Sprintf("uid %d; commands run as it, in a user namespace", os.Geteuid())})
	}
	rep.Checks = append(rep.Checks, kernel.Probe()...)
	cg := kernel.Check{Name: "cgroup limits", Status: kernel.OK}
	var full bool
	if cg.Detail, full = sandbox.CgroupReport(); !full {
		cg.Status, cg.Fix = kernel.Warn, "run the daemon with a delegated cgroup v2: Delegate=yes in its systemd unit (contrib/systemd), or from a systemd session (it asks for a delegated scope)"
	}
	rep.Checks = append(rep.Checks, cg)
	sc, holds := sandboxCheck(ctx, cfg.sandboxUID)
	rep.Checks, rep.Holds = append(rep.Checks, sc, harnessCheck(ctx, cfg)), holds
	return rep
}

// harnessCheck says which sandbox mode the daemon uses and, for resident,
// proves a harness starts and forks commands here, with what each costs.
func harnessCheck(ctx context.Context, cfg doctorConfig) kernel.Check {
	c := kernel.Check{Name: "sandbox mode"}
	if cfg.perExec {
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
	uid := cfg.sandboxUID
	if uid != 0 {
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
			took[0].Round(time.Millisecond/10), took[1].Round(time.Millisecond/10), orDefault(cfg.idle, "5m"), orDefault(cfg.orphan, "10m"))
		if err := sandbox.ProbeOverlay(ctx, cfg.workspaces, uid); err != nil {
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
// proves the mechanisms work together on this machine. It returns what held
// each property of that command's confinement.
func sandboxCheck(ctx context.Context, uid int) (kernel.Check, []paddock.Hold) {
	c := kernel.Check{Name: "sandbox"}
	dir, err := os.MkdirTemp("", "paddock-doctor-")
	if err != nil {
		c.Status, c.Detail = kernel.Fail, err.Error()
		return c, nil
	}
	defer os.RemoveAll(dir)
	if uid != 0 {
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
		return c, e.Holds
	}
	return c, nil
}
