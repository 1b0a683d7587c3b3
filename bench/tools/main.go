// Command tools measures the working tools against their peers, in one run:
//
//   - grep (literal and regex) over a generated tree, in process without the
//     API round trip, beside ripgrep on the same tree, interleaved;
//   - grep of a token that is nowhere and glob **/*.go where .gitignore files
//     are: on Go's own source tree and on a generated 13,000-file tree, each
//     with 101 of them, beside ripgrep on the same tree;
//   - 10,000 read calls of a 4 KiB file through the daemon's API (each one a
//     durable event), as p50 and p99 (bench/mcp makes them over MCP beside
//     the API's).
//
// It prints a markdown table; nothing is asserted.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/tools"
)

func main() {
	quick := flag.Bool("quick", false, "small workload for a CI smoke run")
	files := flag.Int("files", 50000, "files in the generated tree")
	ignoredFiles := flag.Int("ignore-tree-files", 13000, "files in the generated tree with .gitignore files")
	goSrc := flag.String("go-src", goSource(), "Go's source tree, searched with .gitignore files added (\"\" to skip)")
	rounds := flag.Int("rounds", 7, "grep rounds per side")
	reads := flag.Int("reads", 10000, "read calls through the API")
	flag.Parse()
	if *quick {
		*files, *ignoredFiles, *rounds, *reads = 2000, 2000, 3, 300
	}
	if err := run(*files, *ignoredFiles, *goSrc, *quick, *rounds, *reads); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

var words = []string{"alpha", "beta", "gamma", "delta", "return", "func", "struct", "value", "error", "context", "handler", "request"}

// generate writes n source-like files, about 20 a directory, 1–8 KiB each;
// one file in 500 holds the literal needle, and handler functions are common.
func generate(dir string, n int) error {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("mod%03d", i/400), fmt.Sprintf("pkg%02d", (i/20)%20), fmt.Sprintf("file%05d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		var b strings.Builder
		fmt.Fprintf(&b, "package pkg%02d\n\n", (i/20)%20)
		for b.Len() < 1024+rng.IntN(7*1024) {
			switch rng.IntN(12) {
			case 0:
				fmt.Fprintf(&b, "func %sHandler(ctx context.Context) error {\n", words[rng.IntN(len(words))])
			case 1:
				b.WriteString("}\n")
			default:
				for w := 0; w < 3+rng.IntN(8); w++ {
					b.WriteString(words[rng.IntN(len(words))])
					b.WriteByte(' ')
				}
				b.WriteByte('\n')
			}
		}
		if i%500 == 7 {
			b.WriteString("// needle_token_xyz marks this file\n")
		}
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// goSource is $(go env GOROOT)/src, or "" where there is none.
func goSource() string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return ""
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	if _, err := os.Stat(filepath.Join(src, "go.mod")); err != nil {
		return ""
	}
	return src
}

func run(nfiles, nIgnored int, goSrc string, quick bool, rounds, nreads int) error {
	ctx := context.Background()
	rg, err := exec.LookPath("rg")
	if err != nil {
		return fmt.Errorf("ripgrep (rg) is not installed; bench/run installs it from Debian's packages")
	}
	tmp, err := os.MkdirTemp("", "paddock-bench-tools-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "tree")
	benchutil.Step("generating a %d-file tree", nfiles)
	if err := generate(tree, nfiles); err != nil {
		return err
	}
	root, err := confine.Open(tree, nil)
	if err != nil {
		return err
	}
	defer root.Close()
	rows, err := grepRows(ctx, root, tree, rg, nfiles, rounds)
	if err != nil {
		return err
	}
	trees, err := ignoreTrees(tmp, goSrc, nIgnored, quick)
	if err != nil {
		return err
	}
	more, err := ignoreRows(ctx, trees, rg, rounds)
	if err != nil {
		return err
	}
	rows = append(rows, more...)

	row, err := readRow(ctx, tmp, nreads)
	if err != nil {
		return err
	}
	rows = append(rows, row)

	fmt.Printf("\n%s\n\n| figure | paddock | peer | ratio |\n|---|---|---|---|\n", benchutil.Machine(tmp))
	for _, row := range rows {
		fmt.Println(row)
	}
	return nil
}

// grepRows time the grep tool over the tree against ripgrep, in turns,
// for a rare literal, a rare regular expression and a common one.
func grepRows(ctx context.Context, root *confine.Root, tree, rg string, nfiles, rounds int) ([]string, error) {
	grep, _ := tools.Lookup(paddock.AccessRead, "grep")
	type pattern struct {
		name, expr string
		literal    bool
	}
	patterns := []pattern{
		{"literal (rare)", "needle_token_xyz", true},
		{"regex (rare)", `needle_\w+_xyz`, false},
		{"regex (common)", `(?:alpha|omega)Handler\(ctx`, false},
	}
	var rows []string
	for _, p := range patterns {
		benchutil.Step("grep %s, %d rounds each, interleaved with rg", p.name, rounds)
		args, _ := json.Marshal(map[string]any{"pattern": p.expr, "literal": p.literal, "max_results": tools.MaxLimit})
		var ours, peer []time.Duration
		var ourCount, peerCount int
		for i := 0; i < rounds; i++ {
			t0 := time.Now()
			res, _, err := grep.Call(ctx, root, args)
			ours = append(ours, time.Since(t0))
			if err != nil {
				return nil, err
			}
			ourCount = len(res.(*tools.GrepResult).Matches)

			rgArgs := []string{"--no-heading", "-n", "--no-config", "--count-matches"}
			if p.literal {
				rgArgs = append(rgArgs, "-F")
			}
			cmd := exec.Command(rg, append(rgArgs, "--", p.expr, ".")...)
			cmd.Dir = tree
			t0 = time.Now()
			out, err := cmd.Output()
			peer = append(peer, time.Since(t0))
			if err != nil {
				return nil, fmt.Errorf("rg: %w", err)
			}
			peerCount = 0
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				var n int
				if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ':')+1:], "%d", &n); err == nil {
					peerCount += n
				}
			}
		}
		agree := "same matches"
		if ourCount != peerCount {
			agree = fmt.Sprintf("MATCHES DIFFER: %d vs %d", ourCount, peerCount)
		}
		rows = append(rows, fmt.Sprintf("| grep %s over a generated %d-file tree, no .gitignore (%s) | %s | %s (ripgrep) | %s |",
			p.name, nfiles, agree, benchutil.Stats(ours), benchutil.Stats(peer), benchutil.Ratio(ours, peer)))
	}
	return rows, nil
}

// readRow times read calls of a 4 KiB file through a daemon's API.
func readRow(ctx context.Context, tmp string, nreads int) (string, error) {
	d, err := benchutil.StartDaemon(ctx, tmp)
	if err != nil {
		return "", err
	}
	defer d.Stop()
	repo := filepath.Join(tmp, "repo")
	if err := benchutil.Repo(repo, map[string]string{"page.txt": strings.Repeat("0123456789abcdef", 256)}); err != nil {
		return "", err
	}
	if _, err := d.Client.AddProject(ctx, paddock.AddProjectRequest{Path: repo, Name: "bench"}); err != nil {
		return "", err
	}
	r, err := d.Client.Create(ctx, paddock.CreateRunRequest{Project: "bench"})
	if err != nil {
		return "", err
	}
	benchutil.Step("%d read calls of a 4 KiB file through the API", nreads)
	lat := make([]time.Duration, 0, nreads)
	start := time.Now()
	for i := 0; i < nreads; i++ {
		t0 := time.Now()
		if _, err := d.Client.CallTool(ctx, r.ID, "read", map[string]string{"path": "page.txt"}); err != nil {
			return "", err
		}
		lat = append(lat, time.Since(t0))
	}
	total := time.Since(start)
	return fmt.Sprintf("| read of a 4 KiB file through the API (unix socket, durable event each), a one-file repository, %d calls | p50 %s, p99 %s, %.0f calls/s | – | – |",
		nreads, benchutil.Round(benchutil.Percentile(lat, 50)), benchutil.Round(benchutil.Percentile(lat, 99)), float64(nreads)/total.Seconds()), nil
}
