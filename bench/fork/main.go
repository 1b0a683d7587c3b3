// Command fork measures paddock fork (issue #22): the fork of an overlay
// run whose upper layer holds 1,000 changed files, in a generated
// repository of 5,000 and of 50,000 files, beside the two ways to get a
// second copy of that work without it: `cp -a` of the run's upper layer
// (what a fork by copying would cost) and `git worktree add` of the base (a
// plain second checkout, before any of the changes are in it). Each
// repetition forks a fresh run, so that every fork freezes 1,000 files.
//
// It prints a markdown table: figure, paddock, peer, ratio (median of N,
// with min–max), and the fork at 50,000 files against the fork at 5,000
// (flat in the repository's size: a ratio near 1). Nothing is asserted:
// these machines are noisy.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
)

func main() {
	quick := flag.Bool("quick", false, "small workload for a CI smoke run")
	sizes := flag.String("files", "5000,50000", "files in the generated repositories, comma-separated")
	changed := flag.Int("changed", 1000, "files the run changes before it is forked")
	runs := flag.Int("runs", 7, "repetitions (each figure is the median)")
	flag.Parse()
	if *quick {
		*sizes, *changed, *runs = "500,5000", 200, 3
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < *changed {
			fmt.Fprintf(os.Stderr, "bench: bad -files %q (each at least -changed)\n", s)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	if err := run(ns, *changed, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type figures struct {
	files               int
	fork, fork3, cp, wt []time.Duration
}

func run(sizes []int, changed, nruns int) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "paddock-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	d, err := benchutil.StartDaemon(ctx, tmp)
	if err != nil {
		return err
	}
	defer d.Stop()
	var all []*figures
	for _, n := range sizes {
		f, err := measure(ctx, d, tmp, n, changed, nruns)
		if err != nil {
			return fmt.Errorf("%w\n%s", err, d.LogTail(20))
		}
		all = append(all, f)
	}
	fmt.Printf("\n%s\n\n", benchutil.Machine(tmp))
	fmt.Println("| figure | paddock | peer | ratio |")
	fmt.Println("|---|---|---|---|")
	for _, f := range all {
		fmt.Printf("| fork of a run with %d changed files, %d-file repository (median of %d) | %s | %s (cp -a of its upper layer) | %s |\n",
			changed, f.files, nruns, benchutil.Stats(f.fork), benchutil.Stats(f.cp), benchutil.Ratio(f.fork, f.cp))
		fmt.Printf("| fork of a run with %d changed files, %d-file repository (median of %d) | %s | %s (git worktree add) | %s |\n",
			changed, f.files, nruns, benchutil.Stats(f.fork), benchutil.Stats(f.wt), benchutil.Ratio(f.fork, f.wt))
		fmt.Printf("| fork into 3 runs, %d changed files, %d-file repository (median of %d) | %s | %s (3 × git worktree add) | %s |\n",
			changed, f.files, nruns, benchutil.Stats(f.fork3), benchutil.Stats(times3(f.wt)), benchutil.Ratio(f.fork3, times3(f.wt)))
	}
	if len(all) > 1 {
		lo, hi := all[0], all[len(all)-1]
		fmt.Printf("| fork at %d files vs at %d (flat: near 1) | %s | %s | %s |\n",
			hi.files, lo.files, benchutil.Stats(hi.fork), benchutil.Stats(lo.fork), benchutil.Ratio(hi.fork, lo.fork))
	}
	return nil
}

func times3(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = 3 * d
	}
	return out
}

// measure forks nruns fresh runs with changed files in a repository of
// nfiles, each beside cp -a of its upper layer and a git worktree add.
func measure(ctx context.Context, d *benchutil.Daemon, tmp string, nfiles, changed, nruns int) (*figures, error) {
	c := d.Client
	repo := filepath.Join(tmp, fmt.Sprintf("repo%d", nfiles))
	benchutil.Step("generating a %d-file repository", nfiles)
	if err := generate(repo, nfiles); err != nil {
		return nil, err
	}
	sha, err := benchutil.Git(repo, "rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	project := fmt.Sprintf("bench%d", nfiles)
	if _, err := c.AddProject(ctx, paddock.AddProjectRequest{Path: repo, Name: project}); err != nil {
		return nil, err
	}
	benchutil.Step("building the overlay snapshot of the base (once per base)")
	first, err := c.Create(ctx, paddock.CreateRunRequest{Project: project, Kind: "overlay"})
	if err != nil {
		return nil, fmt.Errorf("overlay: %w", err)
	}
	c.Remove(ctx, first.ID)
	// The run changes the first files of the tree (one line appended each).
	script := fmt.Sprintf("find . -path ./.git -prune -o -name '*.go' -print | sort | head -n %d | while read -r f; do echo '// changed' >> \"$f\"; done", changed)
	f := &figures{files: nfiles}
	benchutil.Step("%d × a run changing %d files, its fork, cp -a of its frozen layer, a fork into 3 of another, git worktree add", nruns, changed)
	for i := 0; i < nruns; i++ {
		mk := func() (*paddock.Run, error) {
			r, err := c.Create(ctx, paddock.CreateRunRequest{Project: project, Kind: "overlay"})
			if err != nil {
				return nil, err
			}
			res, err := c.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", script}})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("changing files: exit %d: %s", res.ExitCode, res.Stderr)
			}
			return r, err
		}
		r, err := mk()
		if err != nil {
			return nil, err
		}
		// Each timed step starts with nothing dirty in the page cache
		// (the run's writes, the last copy): the figure is the step's own.
		syscall.Sync()
		t0 := time.Now()
		res, err := c.Fork(ctx, r.ID, paddock.ForkRequest{Count: 1})
		if err != nil {
			return nil, err
		}
		f.fork = append(f.fork, time.Since(t0))
		// The peer: a copy of the same files (the upper layer, now the
		// frozen layer: the run's own .git went back to it).
		layer := filepath.Join(d.Home, "layers", res.Layer)
		dst := filepath.Join(tmp, "copy")
		syscall.Sync()
		t0 = time.Now()
		if out, err := exec.Command("cp", "-a", layer, dst).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("cp -a: %v: %s", err, out)
		}
		f.cp = append(f.cp, time.Since(t0))
		os.RemoveAll(dst)
		if i == 0 {
			// Once: the fork holds the run's changes.
			cs, err := c.ChangeSet(ctx, res.Runs[0].ID)
			if err != nil {
				return nil, err
			}
			if len(cs.Entries) != changed {
				return nil, fmt.Errorf("the fork's change set has %d entries, want %d", len(cs.Entries), changed)
			}
		}
		for _, k := range append(res.Runs, r) {
			c.Remove(ctx, k.ID)
		}

		r3, err := mk()
		if err != nil {
			return nil, err
		}
		syscall.Sync()
		t0 = time.Now()
		res, err = c.Fork(ctx, r3.ID, paddock.ForkRequest{Count: 3})
		if err != nil {
			return nil, err
		}
		f.fork3 = append(f.fork3, time.Since(t0))
		for _, k := range append(res.Runs, r3) {
			c.Remove(ctx, k.ID)
		}

		wt := filepath.Join(tmp, "wt")
		syscall.Sync()
		t0 = time.Now()
		if _, err := benchutil.Git(repo, "worktree", "add", "--quiet", "--detach", wt, sha); err != nil {
			return nil, err
		}
		f.wt = append(f.wt, time.Since(t0))
		if _, err := benchutil.Git(repo, "worktree", "remove", "--force", wt); err != nil {
			return nil, err
		}
		if _, err := c.GC(ctx, false); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// generate writes a repository of n small files, twenty a directory.
func generate(dir string, n int) error {
	if _, err := benchutil.Git("", "init", "--quiet", "--initial-branch=main", dir); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("mod%03d", i/400), fmt.Sprintf("pkg%02d", (i/20)%20), fmt.Sprintf("file%05d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("package p\n\n// File %d.\nconst N%d = %d\n", i, i, i)), 0o644); err != nil {
			return err
		}
	}
	if _, err := benchutil.Git(dir, "add", "-A"); err != nil {
		return err
	}
	_, err := benchutil.Git(dir, "commit", "--quiet", "-m", "generated")
	return err
}
