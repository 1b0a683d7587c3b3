// Command sandbox measures what confinement costs per command, in one run:
// 200 execs of /bin/true bare (fork/exec), forked from a run's resident
// harness, through a sandbox set up per exec (both without the API round
// trip), and through bubblewrap with a comparable set of namespaces and
// mounts, interleaved. It prints a markdown table; nothing is asserted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/paddock-dev/paddock/bench/internal/benchutil"
	"github.com/paddock-dev/paddock/sandbox"
)

func main() {
	sandbox.Main()
	quick := flag.Bool("quick", false, "small workload for a CI smoke run")
	n := flag.Int("n", 200, "execs per side")
	flag.Parse()
	if *quick {
		*n = 20
	}
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n int) error {
	ctx := context.Background()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return fmt.Errorf("bubblewrap (bwrap) is not installed; bench/run installs it from Debian's packages")
	}
	ws, err := os.MkdirTemp("", "paddock-bench-sandbox-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	os.Chmod(ws, 0o755) // bubblewrap as root maps its uid to root, who is "other" here
	uid := 0
	if os.Getuid() == 0 {
		uid = 65534
		os.Chown(ws, uid, uid)
	}
	spec := sandbox.Spec{Argv: []string{"/bin/true"}, Workspace: ws, UID: uid, GID: uid, Env: []string{"PATH=/usr/bin:/bin"}}
	if _, err := sandbox.Run(ctx, spec); err != nil {
		return fmt.Errorf("the sandbox does not run here: %w", err)
	}
	bwrapArgs := []string{"--unshare-all", "--die-with-parent", "--new-session",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--ro-bind", "/etc", "/etc",
		"--tmpfs", "/tmp", "--bind", ws, ws, "--dev", "/dev", "--proc", "/proc", "--chdir", ws, "/bin/true"}
	if uid != 0 {
		bwrapArgs = append([]string{"--uid", fmt.Sprint(uid), "--gid", fmt.Sprint(uid)}, bwrapArgs...)
	}
	if out, err := exec.Command(bwrap, bwrapArgs...).CombinedOutput(); err != nil {
		return fmt.Errorf("bwrap does not run here: %v: %s", err, out)
	}
	hdir, err := os.MkdirTemp("", "paddock-bench-harness-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(hdir)
	pool := &sandbox.Pool{Dir: hdir}
	defer pool.Close()
	start := time.Now()
	if res, err := pool.Run(ctx, "bench", spec); err != nil || res.Enforcement.Mode != "resident" {
		return fmt.Errorf("the resident harness does not run here: %v", err)
	}
	setup := time.Since(start)
	benchutil.Step("%d execs of /bin/true each: bare, resident harness, per-exec sandbox, bubblewrap, interleaved", n)
	var bare, resident, ours, bw []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			return err
		}
		bare = append(bare, time.Since(t0))

		t0 = time.Now()
		res, err := pool.Run(ctx, "bench", spec)
		if err != nil || res.ExitCode != 0 || res.Enforcement.Mode != "resident" {
			return fmt.Errorf("harness: %v %+v", err, res)
		}
		resident = append(resident, time.Since(t0))

		t0 = time.Now()
		res, err = sandbox.Run(ctx, spec)
		if err != nil || res.ExitCode != 0 {
			return fmt.Errorf("sandbox: %v %+v", err, res)
		}
		ours = append(ours, time.Since(t0))

		t0 = time.Now()
		if err := exec.Command(bwrap, bwrapArgs...).Run(); err != nil {
			return fmt.Errorf("bwrap: %w", err)
		}
		bw = append(bw, time.Since(t0))
	}
	sameNet, ownNet, err := lessNetwork(ctx, spec, n)
	if err != nil {
		return err
	}
	fmt.Printf("\n%s\n\n| figure | paddock | peer | ratio |\n|---|---|---|---|\n", benchutil.Machine(ws))
	fmt.Printf("| exec /bin/true from the run's resident harness, an empty workspace (median of %d) | %s | %s (bubblewrap, --unshare-all) | %s |\n",
		n, benchutil.Stats(resident), benchutil.Stats(bw), benchutil.Ratio(resident, bw))
	fmt.Printf("| exec /bin/true in a sandbox set up per exec | %s | %s (bubblewrap) | %s |\n",
		benchutil.Stats(ours), benchutil.Stats(bw), benchutil.Ratio(ours, bw))
	fmt.Printf("| exec /bin/true bare (fork/exec) | – | %s | harness %s, per-exec %s |\n",
		benchutil.Stats(bare), benchutil.Ratio(resident, bare), benchutil.Ratio(ours, bare))
	fmt.Printf("| added cost per exec over bare | harness %s, per-exec %s | %s (bubblewrap) | – |\n",
		benchutil.Round(benchutil.Median(resident)-benchutil.Median(bare)), benchutil.Round(benchutil.Median(ours)-benchutil.Median(bare)),
		benchutil.Round(benchutil.Median(bw)-benchutil.Median(bare)))
	fmt.Printf("| setting up a run's harness (once per run, first exec) | %s | – | – |\n", benchutil.Round(setup))
	fmt.Printf("| exec /bin/true with no network, forked into a network namespace of its own from a busy harness that has one (an agent's command) | %s | %s (the same harness, its network) | %s |\n",
		benchutil.Stats(ownNet), benchutil.Stats(sameNet), benchutil.Ratio(ownNet, sameNet))
	return nil
}

// lessNetwork times commands forked from a harness that a long command
// holds with the host's network (a run's agent): with that network, and
// with none (a network namespace of their own), interleaved.
func lessNetwork(ctx context.Context, spec sandbox.Spec, n int) (same, own []time.Duration, err error) {
	dir, err := os.MkdirTemp("", "paddock-bench-ownnet-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	pool := &sandbox.Pool{Dir: dir}
	defer pool.Close()
	actx, stop := context.WithCancel(ctx)
	defer stop()
	agent, host := spec, spec
	agent.Net, agent.Argv = sandbox.NetHost, []string{"sleep", "3600"}
	host.Net = sandbox.NetHost
	done := make(chan struct{})
	go func() { defer close(done); pool.Run(actx, "agent", agent) }()
	defer func() { stop(); <-done }()
	for end := time.Now().Add(30 * time.Second); !pool.Live("agent"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			return nil, nil, fmt.Errorf("the agent's harness did not start")
		}
	}
	time.Sleep(100 * time.Millisecond) // the agent's command is running
	benchutil.Step("%d execs of /bin/true each beside a running agent: with its network, and with a network of their own", n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		res, err := pool.Run(ctx, "agent", host)
		if err != nil || res.ExitCode != 0 || res.Enforcement.OwnNet {
			return nil, nil, fmt.Errorf("a command with the harness's network: %v %+v", err, res)
		}
		same = append(same, time.Since(t0))
		t0 = time.Now()
		res, err = pool.Run(ctx, "agent", spec)
		if err != nil || res.ExitCode != 0 || !res.Enforcement.OwnNet {
			return nil, nil, fmt.Errorf("a command with a network of its own: %v %+v", err, res)
		}
		own = append(own, time.Since(t0))
	}
	return same, own, nil
}
