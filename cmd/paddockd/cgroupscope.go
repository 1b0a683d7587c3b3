package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/sandbox"
)

// scopeEnv marks a daemon already re-executed into a scope of its own.
const scopeEnv = "PADDOCK_CGROUP_SCOPE"

// intoDelegatedScope gives a daemon started where no cgroup was delegated
// to it (a terminal's session scope: the CLI's autostart, a user's own
// paddock serve) one that is: under systemd it re-executes itself, same
// pid, through `systemd-run --scope -p Delegate=yes` (--user for a user's
// daemon), as rootless container tools do. Without systemd, or where
// systemd will not make the scope (no user manager), it returns and the
// daemon says at start which limits fall back to rlimits.
func intoDelegatedScope(ctx context.Context, log *slog.Logger) {
	need, cgroup := sandbox.CgroupNeedsDelegation()
	if os.Getenv(scopeEnv) != "" || !need {
		return
	}
	if strings.HasSuffix(cgroup, ".service") {
		// A service of systemd's own without Delegate=yes: a scope would
		// take the daemon out of it, and its limits with it. Its unit is
		// what to change (contrib/systemd); the daemon says so.
		return
	}
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return // not booted with systemd
	}
	run, err := exec.LookPath("systemd-run")
	if err != nil {
		return
	}
	self, err := os.Executable()
	if err != nil {
		return
	}
	args := []string{"systemd-run", "--scope", "--quiet", "--collect", "-p", "Delegate=yes"}
	if os.Getuid() != 0 {
		args = append(args, "--user")
	}
	// Ask once with a command that does nothing: an exec that fails would
	// leave no daemon at all.
	probe, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(probe, run, append(args[1:], "--", "/bin/true")...).CombinedOutput(); err != nil {
		log.Warn("systemd gave no delegated scope; commands' limits fall back to rlimits", "error", err, "output", string(out))
		return
	}
	env := append(os.Environ(), scopeEnv+"=1")
	argv := append(append(args, "--", self), os.Args[1:]...)
	err = syscall.Exec(run, argv, env)
	log.Warn("could not re-execute in a delegated scope", "error", err)
}
