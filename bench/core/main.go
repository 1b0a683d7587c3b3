// Command core measures the core's run lifecycle against plain git, in one
// run: creating and removing N clone runs of a generated repository through
// the daemon, beside `git clone --shared` + checkout + rm of the same
// repository, interleaved pair by pair; and computing the change sets of
// clone and overlay runs with N modified files (--changes, 10 to 5,000)
// through the API beside `git status --porcelain` + `git diff` on the same
// edits in a plain clone. It also reports the idle daemon's RSS,
// and what history depth costs: an overlay run made in a repository of
// 60,000 commits beside one of 5 with the same files.
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
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
	"github.com/paddock-dev/paddock/client"
)

func main() {
	quick := flag.Bool("quick", false, "small workload for a CI smoke run")
	files := flag.Int("files", 50000, "files in the generated repository")
	runs := flag.Int("runs", 5, "runs to create and remove (each figure is the median of as many)")
	overlayOnly := flag.Bool("overlay-only", false, "measure only the overlay figures (the clone ones take long on a large repository)")
	history := flag.Int("history", 300, "commits of history in the generated repository, after the first")
	deep := flag.Int("deep-history", 60000, "commits of the repository that measures history depth (0 to skip)")
	changes := flag.String("changes", "10,1000", "comma-separated numbers of modified files whose change sets are measured (each at most half the files)")
	flag.Parse()
	if *quick {
		*files, *runs, *history = 1000, 3, 20
	}
	sizes, err := parseSizes(*changes, *files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := run(*files, *runs, *history, *deep, *overlayOnly, sizes); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parseSizes reads --changes: each size at least 1 and at most half the
// files (the edits are spread over the tree and skip its 2 MiB files).
func parseSizes(list string, nfiles int) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--changes: %q is not a number of files", f)
		}
		sizes = append(sizes, min(n, nfiles/2))
	}
	return sizes, nil
}

func run(nfiles, nruns, nhistory, deep int, overlayOnly bool, sizes []int) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "paddock-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	repo := filepath.Join(tmp, "repo")
	benchutil.Step("generating a %d-file repository with %d commits of history", nfiles, nhistory+1)
	if err := generate(repo, nfiles, nhistory); err != nil {
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

	var ours, peer []time.Duration
	var rows []string // the change sets' rows, clone then overlay
	tree := fmt.Sprintf("a generated %d-file repository, %d commits", nfiles, nhistory+1)
	if !overlayOnly {
		if ours, peer, err = clonePhase(ctx, c, tmp, repo, sha, nruns); err != nil {
			return err
		}
		if rows, err = changeSetRows(ctx, c, "clone", tmp, repo, sha, tree, nfiles, nruns, sizes); err != nil {
			return err
		}
	}
	benchutil.Step("building the overlay snapshot of the base (once per base)")
	t0 := time.Now()
	first, err := c.Create(ctx, paddock.CreateRunRequest{Project: "bench", Kind: "overlay"})
	if err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	snapshot := time.Since(t0)
	c.Remove(ctx, first.ID)
	benchutil.Step("%d × create an overlay run at the snapshotted base (and a worktree run), interleaved with git worktree add", nruns)
	var ovCreate, wtAdd, wtCreate []time.Duration
	for i := 0; i < nruns; i++ {
		t0 := time.Now()
		r, err := c.Create(ctx, paddock.CreateRunRequest{Project: "bench", Kind: "overlay"})
		if err != nil {
			return err
		}
		ovCreate = append(ovCreate, time.Since(t0))
		if _, err := c.Remove(ctx, r.ID); err != nil {
			return err
		}
		if !overlayOnly {
			t0 = time.Now()
			r, err := c.Create(ctx, paddock.CreateRunRequest{Project: "bench", Kind: "worktree"})
			if err != nil {
				return err
			}
			wtCreate = append(wtCreate, time.Since(t0))
			if _, err := c.Remove(ctx, r.ID); err != nil {
				return err
			}
		}
		wt := filepath.Join(tmp, "wt")
		t0 = time.Now()
		if _, err := benchutil.Git(repo, "worktree", "add", "--quiet", "--detach", wt, sha); err != nil {
			return err
		}
		wtAdd = append(wtAdd, time.Since(t0))
		if _, err := benchutil.Git(repo, "worktree", "remove", "--force", wt); err != nil {
			return err
		}
	}
	ovRows, err := changeSetRows(ctx, c, "overlay", tmp, repo, sha, tree, nfiles, nruns, sizes)
	if err != nil {
		return err
	}
	rows = append(rows, ovRows...)
	var historyTable []string
	if deep > 0 {
		if historyTable, err = historyRows(ctx, c, tmp, deep, max(nruns, 5)); err != nil {
			return err
		}
	}

	fmt.Printf("\n%s\n\n", benchutil.Machine(tmp))
	fmt.Println("| figure | paddock | peer | ratio |")
	fmt.Println("|---|---|---|---|")
	if !overlayOnly {
		fmt.Printf("| create + rm a clone run, %s (median of %d) | %s | %s (git clone --shared + checkout + rm) | %s |\n",
			tree, nruns, benchutil.Stats(ours), benchutil.Stats(peer), benchutil.Ratio(ours, peer))
	}
	fmt.Printf("| create an overlay run at a snapshotted base, %s (median of %d) | %s | %s (git worktree add) | %s |\n",
		tree, nruns, benchutil.Stats(ovCreate), benchutil.Stats(wtAdd), benchutil.Ratio(ovCreate, wtAdd))
	if !overlayOnly {
		fmt.Printf("| create a worktree run, %s (median of %d) | %s | %s (git worktree add) | %s |\n",
			tree, nruns, benchutil.Stats(wtCreate), benchutil.Stats(wtAdd), benchutil.Ratio(wtCreate, wtAdd))
	}
	fmt.Printf("| build the overlay snapshot of a base (once per base), %s | %s | – | – |\n", tree, benchutil.Round(snapshot))
	for _, row := range rows {
		fmt.Println(row)
	}
	fmt.Printf("| idle daemon RSS (%s) | %s after start, %s after %d runs | – | – |\n", tree, rssIdle, d.RSS(), nruns)
	for _, row := range historyTable {
		fmt.Println(row)
	}
	return nil
}

// clonePhase measures clone runs: create+rm against git clone --shared, and
// change sets of 10 edits against git status + diff.
func clonePhase(ctx context.Context, c *client.Client, tmp, repo, sha string, nruns int) (ours, peer []time.Duration, err error) {
	benchutil.Step("%d × create+rm of a clone run, interleaved with git clone --shared + checkout + rm", nruns)
	peerDir := filepath.Join(tmp, "peer")
	for i := 0; i < nruns; i++ {
		t0 := time.Now()
		r, err := c.Create(ctx, paddock.CreateRunRequest{Project: "bench", Kind: "clone"})
		if err != nil {
			return nil, nil, err
		}
		if _, err := c.Remove(ctx, r.ID); err != nil {
			return nil, nil, err
		}
		ours = append(ours, time.Since(t0))

		t0 = time.Now()
		if _, err := benchutil.Git("", "clone", "--quiet", "--shared", "--no-checkout", "--", repo, peerDir); err != nil {
			return nil, nil, err
		}
		if _, err := benchutil.Git(peerDir, "checkout", "--quiet", "--detach", sha); err != nil {
			return nil, nil, err
		}
		if err := os.RemoveAll(peerDir); err != nil {
			return nil, nil, err
		}
		peer = append(peer, time.Since(t0))
	}
	time.Sleep(200 * time.Millisecond)
	return ours, peer, nil
}

// changeSetRows measures the change sets of runs of kind with each number
// of modified files, and returns their table rows.
func changeSetRows(ctx context.Context, c *client.Client, kind, tmp, repo, sha, tree string, nfiles, nruns int, sizes []int) ([]string, error) {
	var rows []string
	for _, n := range sizes {
		benchutil.Step("%d × change set of %s %s run, %d modified files, interleaved with git status --porcelain + git diff", nruns, article(kind), kind, n)
		ours, peer, err := changeSets(ctx, c, kind, repo, sha, filepath.Join(tmp, "edited"), nfiles, n, nruns)
		if err != nil {
			return nil, err
		}
		rows = append(rows, fmt.Sprintf("| change set of %s %s run, %d modified files, %s (median of %d) | %s | %s (git status --porcelain + git diff) | %s |",
			article(kind), kind, n, tree, nruns, benchutil.Stats(ours), benchutil.Stats(peer), benchutil.Ratio(ours, peer)))
	}
	return rows, nil
}

func article(kind string) string {
	if strings.HasPrefix(kind, "o") {
		return "an"
	}
	return "a"
}

// generate writes a repository of n files in a tree three levels deep, about
// 20 files a directory, sizes from 64 B to 4 KiB and one 2 MiB file in 5,000,
// with a history of that many commits on top of the first.
func generate(dir string, n, history int) error {
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
	if _, err := benchutil.Git(dir, "commit", "--quiet", "-m", "generated"); err != nil {
		return err
	}
	// A history: each commit edits a few files, as work does.
	for c := 0; c < history; c++ {
		var paths []string
		for k := 0; k < 5; k++ {
			i := rng.IntN(n)
			rel := filepath.Join(fmt.Sprintf("mod%03d", i/400), fmt.Sprintf("pkg%02d", (i/20)%20), fmt.Sprintf("file%05d.go", i))
			f, err := os.OpenFile(filepath.Join(dir, rel), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			fmt.Fprintf(f, "\n// change %d\n", c)
			f.Close()
			paths = append(paths, rel)
		}
		if _, err := benchutil.Git(dir, append([]string{"add", "--"}, paths...)...); err != nil {
			return err
		}
		if _, err := benchutil.Git(dir, "commit", "--quiet", "-m", fmt.Sprintf("change %d", c)); err != nil {
			return err
		}
	}
	return nil
}

// changeSets makes one run of kind and one plain clone, edits the same
// files in both (through the sandbox for the run: an overlay's view exists
// only there), and times paddock's change set against git's own answer.
func changeSets(ctx context.Context, c *client.Client, kind, repo, sha, peerDir string, nfiles, edits, n int) (ours, peer []time.Duration, err error) {
	r, err := c.Create(ctx, paddock.CreateRunRequest{Project: "bench", Kind: kind})
	if err != nil {
		return nil, nil, err
	}
	defer c.Remove(context.WithoutCancel(ctx), r.ID)
	if _, err := benchutil.Git("", "clone", "--quiet", "--shared", "--no-checkout", "--", repo, peerDir); err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(peerDir)
	if _, err := benchutil.Git(peerDir, "checkout", "--quiet", "--detach", sha); err != nil {
		return nil, nil, err
	}
	var script strings.Builder
	for k := 0; k < edits; k++ {
		i := k*(nfiles/edits) + 1 // not the 2 MiB files (every 5,000th)
		rel := filepath.Join(fmt.Sprintf("mod%03d", i/400), fmt.Sprintf("pkg%02d", (i/20)%20), fmt.Sprintf("file%05d.go", i))
		fmt.Fprintf(&script, "printf '\\n// edited %d\\n' >> %s\n", k, rel)
		f, err := os.OpenFile(filepath.Join(peerDir, rel), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(f, "\n// edited %d\n", k)
		f.Close()
	}
	// In pieces: one argument of a command line holds at most 128 KiB.
	for lines := strings.SplitAfter(script.String(), "\n"); len(lines) > 0; {
		k := min(len(lines), 500)
		piece := strings.Join(lines[:k], "")
		lines = lines[k:]
		if res, err := c.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", piece}}); err != nil || res.ExitCode != 0 {
			return nil, nil, fmt.Errorf("editing the run: %v %+v", err, res)
		}
	}
	for i := 0; i < n; i++ {
		t0 := time.Now()
		cs, err := c.ChangeSet(ctx, r.ID)
		if err != nil {
			return nil, nil, err
		}
		if len(cs.Entries) != edits {
			return nil, nil, fmt.Errorf("change set has %d entries, want %d", len(cs.Entries), edits)
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
