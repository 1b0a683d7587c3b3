package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/tools"
)

// ignoreTree is a tree with .gitignore files to search, named for the table.
type ignoreTree struct {
	name string
	dir  string
}

// ignoreTrees makes the trees where .gitignore files are: Go's own source
// tree (goSrc, all of it or, for a quick run, src/crypto) and a generated
// tree of nfiles files, each made a git repository (ripgrep reads
// .gitignore files only in one) with a 25-line .gitignore at the top and
// 15-line ones in 100 directories.
func ignoreTrees(tmp, goSrc string, nfiles int, quick bool) ([]ignoreTree, error) {
	var trees []ignoreTree
	if goSrc != "" {
		part, name := goSrc, "Go's source tree ($GOROOT/src)"
		if quick {
			part, name = filepath.Join(goSrc, "crypto"), "Go's src/crypto"
		}
		dir := filepath.Join(tmp, "gosrc")
		benchutil.Step("copying %s and adding .gitignore files", part)
		if err := gittest.CopyTree(part, dir, false); err != nil {
			return nil, fmt.Errorf("copy %s: %w", part, err)
		}
		trees = append(trees, ignoreTree{name, dir})
	}
	dir := filepath.Join(tmp, "generated-ignores")
	benchutil.Step("generating a %d-file tree with .gitignore files", nfiles)
	if err := generate(dir, nfiles); err != nil {
		return nil, err
	}
	// What the .gitignore files are there for: build output, objects,
	// logs, one object file re-included, in every module.
	mods, _ := filepath.Glob(filepath.Join(dir, "mod*"))
	for _, m := range mods {
		for _, f := range []string{"build/out.bin", "build/gen/x.go", "pkg00/x.o", "pkg00/keep.o", "pkg01/debug.log", "testdata/a.golden"} {
			p := filepath.Join(m, f)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(strings.Repeat("build output\n", 400)), 0o644); err != nil {
				return nil, err
			}
		}
	}
	trees = append(trees, ignoreTree{fmt.Sprintf("a generated %d-file tree", nfiles), dir})
	for i, tr := range trees {
		if err := gittest.SprinkleIgnores(tr.dir, 100); err != nil {
			return nil, err
		}
		if _, err := benchutil.Git(tr.dir, "init", "--quiet"); err != nil {
			return nil, err
		}
		files, ignores := 0, 0
		filepath.WalkDir(tr.dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() && !strings.Contains(p, "/.git/") {
				files++
				if d.Name() == ".gitignore" {
					ignores++
				}
			}
			return nil
		})
		trees[i].name = fmt.Sprintf("%s, %d files, %d .gitignore", tr.name, files, ignores)
	}
	return trees, nil
}

// ignoreRows times grep of a token that is nowhere and glob of **/*.go on
// each tree beside ripgrep on the same tree, interleaved, and checks that
// both leave out the same files.
func ignoreRows(ctx context.Context, trees []ignoreTree, rg string, rounds int) ([]string, error) {
	grep, _ := tools.Lookup(paddock.AccessRead, "grep")
	glob, _ := tools.Lookup(paddock.AccessRead, "glob")
	// ripgrep as close to the grep tool as it goes: hidden files too but
	// not .git (which --hidden would search), and no ignore rules but the
	// tree's own .gitignore files.
	rgBase := []string{"--no-config", "--hidden", "-g", "!.git", "--no-ignore-global", "--no-ignore-exclude", "--no-ignore-parent"}
	runRG := func(dir string, args ...string) (string, time.Duration, error) {
		cmd := exec.Command(rg, append(append([]string{}, rgBase...), args...)...)
		cmd.Dir = dir
		t0 := time.Now()
		out, err := cmd.Output()
		d := time.Since(t0)
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			err = nil // no match
		}
		return string(out), d, err
	}
	var rows []string
	for _, tr := range trees {
		root, err := confine.Open(tr.dir, nil)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		grepArgs, _ := json.Marshal(map[string]any{"pattern": "zq_no_such_token_xj", "literal": true, "max_results": tools.MaxLimit})
		globArgs, _ := json.Marshal(map[string]any{"pattern": "**/*.go", "limit": tools.MaxLimit})
		benchutil.Step("grep (no match) and glob on %s, %d rounds each, interleaved with rg", tr.name, rounds)
		var gOurs, gPeer, fOurs, fPeer []time.Duration
		var searched, globbed int
		for i := 0; i < rounds; i++ {
			t0 := time.Now()
			res, _, err := grep.Call(ctx, root, grepArgs)
			gOurs = append(gOurs, time.Since(t0))
			if err != nil {
				return nil, err
			}
			searched = res.(*tools.GrepResult).FilesSearched
			if _, d, err := runRG(tr.dir, "-F", "-c", "--", "zq_no_such_token_xj", "."); err != nil {
				return nil, fmt.Errorf("rg: %w", err)
			} else {
				gPeer = append(gPeer, d)
			}
			t0 = time.Now()
			res, _, err = glob.Call(ctx, root, globArgs)
			fOurs = append(fOurs, time.Since(t0))
			if err != nil {
				return nil, err
			}
			globbed = len(res.(*tools.GlobResult).Matches)
			if _, d, err := runRG(tr.dir, "--files", "-g", "*.go"); err != nil {
				return nil, fmt.Errorf("rg: %w", err)
			} else {
				fPeer = append(fPeer, d)
			}
		}
		all, _, err := runRG(tr.dir, "--files")
		if err != nil {
			return nil, err
		}
		goFiles, _, err := runRG(tr.dir, "--files", "-g", "*.go")
		if err != nil {
			return nil, err
		}
		agree := func(ours int, peer string) string {
			n := len(strings.Fields(peer))
			if ours == n {
				return fmt.Sprintf("both find the same %d files", n)
			}
			return fmt.Sprintf("FILES DIFFER: %d vs ripgrep's %d", ours, n)
		}
		rows = append(rows,
			fmt.Sprintf("| grep that matches nothing, %s (%s) | %s | %s (ripgrep) | %s |",
				tr.name, agree(searched, all), benchutil.Stats(gOurs), benchutil.Stats(gPeer), benchutil.Ratio(gOurs, gPeer)),
			fmt.Sprintf("| glob **/*.go, %s (%s) | %s | %s (ripgrep --files -g '*.go') | %s |",
				tr.name, agree(globbed, goFiles), benchutil.Stats(fOurs), benchutil.Stats(fPeer), benchutil.Ratio(fOurs, fPeer)))
	}
	return rows, nil
}
