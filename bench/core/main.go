// Command core measures the core's run lifecycle against plain git, in one
// run: creating and removing N clone runs of a generated repository through
// the daemon, beside `git clone --shared` + checkout + rm of the same
// repository, interleaved pair by pair; and computing the change set of 10
// modified files through the API beside `git status --porcelain` + `git diff`
// on the same edits in a plain clone. It also reports the idle daemon's RSS.
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
	"path/filepath"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
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
	time.Sleep(200 * time.Millisecond)
	rssIdle := d.RSS()

	benchutil.Step("%d × create+rm of a clone run, interleaved with git clone --shared + checkout + rm", nruns)
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
		if _, err := benchutil.Git("", "clone", "--quiet", "--shared", "--no-checkout", "--", repo, peerDir); err != nil {
			return err
		}
		if _, err := benchutil.Git(peerDir, "checkout", "--quiet", "--detach", sha); err != nil {
			return err
		}
		if err := os.RemoveAll(peerDir); err != nil {
			return err
		}
		peer = append(peer, time.Since(t0))
	}
	time.Sleep(200 * time.Millisecond)

	benchutil.Step("%d × change set of 10 modified files, interleaved with git status --porcelain + git diff", nruns)
	csOurs, csPeer, err := changeSets(ctx, c, repo, sha, filepath.Join(tmp, "edited"), nfiles, nruns)
	if err != nil {
		return err
	}

	fmt.Printf("\n%s\n\n", benchutil.Machine(tmp))
	fmt.Println("| figure | paddock | peer | ratio |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| create + rm a clone run, %d files (median of %d) | %s | %s (git clone --shared + checkout + rm) | %s |\n",
		nfiles, nruns, benchutil.Stats(ours), benchutil.Stats(peer), benchutil.Ratio(ours, peer))
	fmt.Printf("| change set of 10 modified files in %d (median of %d) | %s | %s (git status --porcelain + git diff) | %s |\n",
		nfiles, nruns, benchutil.Stats(csOurs), benchutil.Stats(csPeer), benchutil.Ratio(csOurs, csPeer))
	fmt.Printf("| idle daemon RSS | %s after start, %s after %d runs | – | – |\n", rssIdle, d.RSS(), nruns)
	return nil
}

// generate writes a repository of n files in a tree three levels deep, about
// 20 files a directory, sizes from 64 B to 4 KiB and one 2 MiB file in 5,000.
func generate(dir string, n int) error {
	rng := rand.New(rand.NewPCG(1, 2))
	if _, err := benchutil.Git("", "init", "--quiet", "--initial-branch=main", dir); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
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
	if _, err := benchutil.Git(dir, "add", "-A"); err != nil {
		return err
	}
	_, err := benchutil.Git(dir, "commit", "--quiet", "-m", "generated")
	return err
}

// changeSets makes one clone run and one plain clone, edits the same 10
// files in both, and times paddock's change set against git's own answer.
func changeSets(ctx context.Context, c *client.Client, repo, sha, peerDir string, nfiles, n int) (ours, peer []time.Duration, err error) {
	r, err := c.CreateRun(ctx, paddock.CreateRunRequest{Project: "bench", Kind: "clone"})
	if err != nil {
		return nil, nil, err
	}
	defer c.RemoveRun(context.WithoutCancel(ctx), r.ID)
	if _, err := benchutil.Git("", "clone", "--quiet", "--shared", "--no-checkout", "--", repo, peerDir); err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(peerDir)
	if _, err := benchutil.Git(peerDir, "checkout", "--quiet", "--detach", sha); err != nil {
		return nil, nil, err
	}
	for k := 0; k < 10; k++ {
		i := k*(nfiles/10) + 1 // not the 2 MiB files (every 5,000th)
		rel := filepath.Join(fmt.Sprintf("mod%03d", i/400), fmt.Sprintf("pkg%02d", (i/20)%20), fmt.Sprintf("file%05d.go", i))
		for _, root := range []string{r.Workspace.Root, peerDir} {
			f, err := os.OpenFile(filepath.Join(root, rel), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return nil, nil, err
			}
			fmt.Fprintf(f, "\n// edited %d\n", k)
			f.Close()
		}
	}
	for i := 0; i < n; i++ {
		t0 := time.Now()
		cs, err := c.ChangeSet(ctx, r.ID)
		if err != nil {
			return nil, nil, err
		}
		if len(cs.Entries) != 10 {
			return nil, nil, fmt.Errorf("change set has %d entries, want 10", len(cs.Entries))
		}
		ours = append(ours, time.Since(t0))
		t0 = time.Now()
		if _, err := benchutil.Git(peerDir, "status", "--porcelain"); err != nil {
			return nil, nil, err
		}
		if _, err := benchutil.Git(peerDir, "diff"); err != nil {
			return nil, nil, err
		}
		peer = append(peer, time.Since(t0))
	}
	return ours, peer, nil
}
