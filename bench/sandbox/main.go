// Command sandbox measures what confinement costs per command, in one run:
// 200 execs of /bin/true bare (fork/exec), through paddock's sandbox (without
// the API round trip), and through bubblewrap with a comparable set of
// namespaces and mounts, interleaved. It prints a markdown table; nothing is
// asserted.
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
	benchutil.Step("%d execs of /bin/true each: bare, paddock's sandbox, bubblewrap, interleaved", n)
	var bare, ours, bw []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			return err
		}
		bare = append(bare, time.Since(t0))

		t0 = time.Now()
		res, err := sandbox.Run(ctx, spec)
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
	added := benchutil.Median(ours) - benchutil.Median(bare)
	fmt.Printf("\n%s\n\n| figure | paddock | peer | ratio |\n|---|---|---|---|\n", benchutil.Machine(ws))
	fmt.Printf("| exec /bin/true confined (median of %d) | %s | %s (bubblewrap 0.8, --unshare-all) | %s |\n",
		n, benchutil.Stats(ours), benchutil.Stats(bw), benchutil.Ratio(ours, bw))
	fmt.Printf("| exec /bin/true bare (fork/exec) | – | %s | %s |\n", benchutil.Stats(bare), benchutil.Ratio(ours, bare))
	fmt.Printf("| added cost of the sandbox per exec | %s | %s (bubblewrap) | – |\n",
		benchutil.Round(added), benchutil.Round(benchutil.Median(bw)-benchutil.Median(bare)))
	return nil
}
