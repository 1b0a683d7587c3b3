// Command core measures the core's run lifecycle against plain git, in one
// run: creating and removing N clone runs of a generated repository through
// the daemon, beside `git clone --shared` + checkout + rm of the same
// repository, interleaved pair by pair. It also reports the idle daemon's RSS.
//
// It prints a markdown table: figure, paddock, peer, ratio (median of N, with
// min–max). Nothing is asserted: these machines are noisy.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
)

func main() {
	quick := flag.Bool("quick", false, "small workload for a CI smoke run")
	files := flag.Int("files", 20000, "files in the generated repository")
	runs := flag.Int("runs", 50, "runs to create and remove")
	flag.Parse()
	if *quick {
		*files, *runs = 2000, 10
	}
	if err := run(*files, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(nfiles, nruns int) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "paddock-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	bin := filepath.Join(tmp, "paddock")
	step("building paddock")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/paddock").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	repo := filepath.Join(tmp, "repo")
	step(fmt.Sprintf("generating a %d-file repository", nfiles))
	if err := generate(repo, nfiles); err != nil {
		return err
	}
	sha, err := git(repo, "rev-parse", "HEAD")
	if err != nil {
		return err
	}

	home := filepath.Join(tmp, "home")
	daemon := exec.Command(bin, "serve", "--home", home, "--log-level", "warn")
	logf, _ := os.Create(filepath.Join(tmp, "daemon.log"))
	daemon.Stdout, daemon.Stderr = logf, logf
	if err := daemon.Start(); err != nil {
		return err
	}
	defer func() {
		daemon.Process.Signal(syscall.SIGTERM)
		daemon.Wait()
	}()
	c := client.Unix(filepath.Join(home, "paddock.sock"))
	for i := 0; c.Health(ctx) != nil; i++ {
		if i > 400 {
			return fmt.Errorf("daemon did not start")
		}
		time.Sleep(25 * time.Millisecond)
	}
	if _, err := c.AddProject(ctx, paddock.AddProjectRequest{Path: repo, Name: "bench"}); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	rssIdle := rss(daemon.Process.Pid)

	step(fmt.Sprintf("%d × create+rm of a clone run, interleaved with git clone --shared + checkout + rm", nruns))
	var ours, peer []time.Duration
	peerDir := filepath.Join(tmp, "peer")
	for i := 0; i < nruns; i++ {
		t0 := time.Now()
		r, err := c.CreateRun(ctx, paddock.CreateRunRequest{Project: "bench", Kind: "clone"})
		if err != nil {
			return err
		}
		if _, err := c.RemoveRun(ctx, r.ID); err != nil {
			return err
		}
		ours = append(ours, time.Since(t0))

		t0 = time.Now()
		if _, err := git("", "clone", "--quiet", "--shared", "--no-checkout", "--", repo, peerDir); err != nil {
			return err
		}
		if _, err := git(peerDir, "checkout", "--quiet", "--detach", sha); err != nil {
			return err
		}
		if err := os.RemoveAll(peerDir); err != nil {
			return err
		}
		peer = append(peer, time.Since(t0))
	}
	time.Sleep(200 * time.Millisecond)
	rssAfter := rss(daemon.Process.Pid)

	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	var st syscall.Statfs_t
	syscall.Statfs(tmp, &st)
	fmt.Printf("\nmachine: %d cores, kernel %s, file system of %s: %s\n\n", runtime.NumCPU(), strings.TrimSpace(string(kernel)), os.TempDir(), fsName(st.Type))
	fmt.Println("| figure | paddock | peer | ratio |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| create + rm a clone run, %d files (median of %d) | %s | %s (git clone --shared + checkout + rm) | %.2f× |\n",
		nfiles, nruns, stats(ours), stats(peer), float64(median(ours))/float64(median(peer)))
	fmt.Printf("| idle daemon RSS | %s after start, %s after %d runs | – | – |\n", rssIdle, rssAfter, nruns)
	return nil
}

func step(s string) { fmt.Fprintln(os.Stderr, "bench:", s, "…") }

func git(dir string, args ...string) (string, error) {
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

// generate writes a repository of n files in a tree three levels deep, with
// sizes from a few bytes to a few KiB and a handful of larger files.
func generate(dir string, n int) error {
	rng := rand.New(rand.NewPCG(1, 2))
	if _, err := git("", "init", "--quiet", "--initial-branch=main", dir); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		// About 20 files a directory, 20 directories a module.
		p := filepath.Join(dir, fmt.Sprintf("mod%03d", i/400), fmt.Sprintf("pkg%02d", (i/20)%20), fmt.Sprintf("file%05d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		size := 64 + rng.IntN(4096)
		if i%5000 == 0 {
			size = 2 << 20
		}
		body := make([]byte, size)
		for j := range body {
			body[j] = byte('a' + rng.IntN(26))
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			return err
		}
	}
	if _, err := git(dir, "add", "-A"); err != nil {
		return err
	}
	_, err := git(dir, "commit", "--quiet", "-m", "generated")
	return err
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func stats(ds []time.Duration) string {
	return fmt.Sprintf("%s (%s–%s)", round(median(ds)), round(slices.Min(ds)), round(slices.Max(ds)))
}

func round(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Microsecond)
}

func rss(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
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

func fsName(t int64) string {
	names := map[int64]string{0xef53: "ext4", 0x9123683e: "btrfs", 0x58465342: "xfs", 0x01021994: "tmpfs", 0x794c7630: "overlayfs"}
	if n, ok := names[t]; ok {
		return n
	}
	return fmt.Sprintf("0x%x", t)
}
