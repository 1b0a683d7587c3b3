// Command gitrun measures what making git available inside a run costs
// and gives: `git status` run by an agent in a fresh overlay run of a
// generated repository (through the run's sandbox, less the cost of a bare
// command there, so that the figure is git's own) beside `git status` in a
// fresh plain checkout of the same repository (git worktree add); and the
// creation of an overlay run (which now writes the run's git directory and
// copies the snapshot's index) beside git worktree add.
//
// It prints a markdown table: figure, paddock, peer, ratio (median of N,
// with min–max). Nothing is asserted: these machines are noisy.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
)

func main() {
	quick := flag.Bool("quick", false, "small workload for a CI smoke run")
	files := flag.Int("files", 50000, "files in the generated repository")
	runs := flag.Int("runs", 7, "repetitions (each figure is the median)")
	flag.Parse()
	if *quick {
		*files, *runs = 2000, 5
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
	repo := filepath.Join(tmp, "repo")
	benchutil.Step("generating a %d-file repository", nfiles)
	if err := generate(repo, nfiles); err != nil {
		return err
	}
	sha, err := benchutil.Git(repo, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	d, err := benchutil.StartDaemon(ctx, tmp)
	if err != nil {
		return err
	}
	defer d.Stop()
	c := d.Client
	if _, err := c.AddProject(ctx, paddock.AddProjectRequest{Path: repo, Name: "bench"}); err != nil {
		return err
	}
	benchutil.Step("building the overlay snapshot of the base (once per base)")
	first, err := c.Create(ctx, paddock.CreateRunRequest{Project: "bench", Kind: "overlay"})
	if err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	c.Remove(ctx, first.ID)

	benchutil.Step("%d × a fresh overlay run and git status in it, interleaved with git worktree add and git status there", nruns)
	var create, wtAdd, status, bare, peerStatus []time.Duration
	for i := 0; i < nruns; i++ {
		t0 := time.Now()
		r, err := c.Create(ctx, paddock.CreateRunRequest{Project: "bench", Kind: "overlay"})
		if err != nil {
			return err
		}
		create = append(create, time.Since(t0))
		// The run's harness is made by its first command: not part of git's cost.
		exec := func(argv ...string) (time.Duration, error) {
			t0 := time.Now()
			res, err := c.Exec(ctx, r.ID, paddock.ExecRequest{Argv: argv})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("%v: exit %d: %s", argv, res.ExitCode, res.Stderr)
			}
			return time.Since(t0), err
		}
		if _, err := exec("true"); err != nil {
			return err
		}
		b, err := exec("true")
		if err != nil {
			return err
		}
		s, err := exec("git", "status", "--porcelain")
		if err != nil {
			return err
		}
		bare, status = append(bare, b), append(status, s-b)
		if _, err := c.Reject(ctx, r.ID); err != nil {
			return err
		}

		wt := filepath.Join(tmp, "wt")
		t0 = time.Now()
		if _, err := benchutil.Git(repo, "worktree", "add", "--quiet", "--detach", wt, sha); err != nil {
			return err
		}
		wtAdd = append(wtAdd, time.Since(t0))
		t0 = time.Now()
		if _, err := benchutil.Git(wt, "status", "--porcelain"); err != nil {
			return err
		}
		peerStatus = append(peerStatus, time.Since(t0))
		if _, err := benchutil.Git(repo, "worktree", "remove", "--force", wt); err != nil {
			return err
		}
	}
	fmt.Printf("\n%s\n\n", benchutil.Machine(tmp))
	fmt.Println("| figure | paddock | peer | ratio |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| git status in a fresh overlay run, %d files, less a bare command's %s (median of %d) | %s | %s (git status in a fresh git worktree add) | %s |\n",
		nfiles, benchutil.Median(bare), nruns, benchutil.Stats(status), benchutil.Stats(peerStatus), benchutil.Ratio(status, peerStatus))
	fmt.Printf("| create an overlay run with its own git, %d files (median of %d) | %s | %s (git worktree add) | %s |\n",
		nfiles, nruns, benchutil.Stats(create), benchutil.Stats(wtAdd), benchutil.Ratio(create, wtAdd))
	return nil
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
