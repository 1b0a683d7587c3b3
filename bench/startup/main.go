// Command startup measures how long the CLI takes to start: `paddock
// version` (no daemon answers, none is started) beside a Go hello-world
// built by the same toolchain, interleaved in one run, and what package
// initialisation `paddock version` pays (GODEBUG=inittrace=1). A CLI that
// starts in milliseconds is what lets an agent call `paddock exec` in a
// loop from a shell. Beside them it starts a floor: a program that links
// every package the paddock binary links except paddock's own, and does
// nothing, so that what paddock's code costs stands apart from what its
// dependencies' initialisation and the runtime's set-up of a binary that
// size cost whatever paddock does. It prints a markdown table; nothing is
// asserted (the budget is held by cmd/paddock's TestStartupInitBudget).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/bench/internal/benchutil"
)

func main() {
	quick := flag.Bool("quick", false, "small workload for a CI smoke run")
	n := flag.Int("n", 400, "starts per side")
	flag.Parse()
	if *quick {
		*n = 40
	}
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

const hello = `package main

import "os"

func main() { os.Stdout.WriteString("hello\n") }
`

func run(n int) error {
	tmp, err := os.MkdirTemp("", "paddock-bench-startup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "paddock")
	benchutil.Step("building paddock and a hello-world")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/paddock").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	hdir := filepath.Join(tmp, "hello")
	os.Mkdir(hdir, 0o755)
	os.WriteFile(filepath.Join(hdir, "main.go"), []byte(hello), 0o644)
	os.WriteFile(filepath.Join(hdir, "go.mod"), []byte("module hello\n"), 0o644)
	hbin := filepath.Join(tmp, "hello-world")
	build := exec.Command("go", "build", "-o", hbin, ".")
	build.Dir = hdir
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build hello-world: %v\n%s", err, out)
	}
	benchutil.Step("building the floor: paddock's dependencies and nothing else")
	floor := filepath.Join(tmp, "floor")
	floorPkgs, err := buildFloor(tmp, floor)
	if err != nil {
		return err
	}
	env := append(os.Environ(), "PADDOCK_HOME="+filepath.Join(tmp, "home"), "PADDOCK_NO_AUTOSTART=1")
	start := func(argv ...string) (time.Duration, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		t0 := time.Now()
		err := cmd.Run()
		return time.Since(t0), err
	}
	benchutil.Step("%d starts each of paddock version, the hello-world and the floor, interleaved", n)
	var ours, peer, deps []time.Duration
	for i := 0; i < n+n/10; i++ {
		a, err := start(bin, "version")
		if err != nil {
			return fmt.Errorf("paddock version: %w", err)
		}
		b, err := start(hbin)
		if err != nil {
			return err
		}
		c, err := start(floor)
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		if i >= n/10 { // the first tenth warms the page cache
			ours, peer, deps = append(ours, a), append(peer, b), append(deps, c)
		}
	}
	inits, bytes, allocs, err := initCost(bin, env)
	if err != nil {
		return err
	}
	fmt.Println(benchutil.Machine(tmp))
	fmt.Println()
	fmt.Println("| figure | paddock | peer | ratio |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| CLI start: `paddock version`, no daemon (%d starts) vs a Go hello-world | %s | %s | %s |\n",
		len(ours), benchutil.Stats(ours), benchutil.Stats(peer), benchutil.Ratio(ours, peer))
	fmt.Printf("| floor: paddock's %d dependencies linked, nothing run (%d starts) vs a Go hello-world | %s | %s | %s |\n",
		floorPkgs, len(deps), benchutil.Stats(deps), benchutil.Stats(peer), benchutil.Ratio(deps, peer))
	fmt.Printf("| paddock's own share: `paddock version` minus the floor (medians) vs the floor | %s | %s | %s |\n",
		benchutil.Round(benchutil.Median(ours)-benchutil.Median(deps)), benchutil.Stats(deps), benchutil.Ratio(ours, deps))
	fmt.Printf("| package initialisation of `paddock version` (inittrace: %d packages) | %d KiB, %d allocations | – | – |\n",
		inits, bytes>>10, allocs)
	return nil
}

// initCost sums what GODEBUG=inittrace=1 reports for `paddock version`.
func initCost(bin string, env []string) (n int, bytes, allocs int64, err error) {
	cmd := exec.Command(bin, "version")
	var stderr strings.Builder
	cmd.Env, cmd.Stderr = append(env, "GODEBUG=inittrace=1"), &stderr
	if err := cmd.Run(); err != nil {
		return 0, 0, 0, fmt.Errorf("paddock version with inittrace: %w", err)
	}
	for _, l := range parseInitTrace(stderr.String()) {
		n, bytes, allocs = n+1, bytes+l.bytes, allocs+l.allocs
	}
	return n, bytes, allocs, nil
}

type initLine struct {
	pkg           string
	bytes, allocs int64
}

// parseInitTrace reads lines such as
// "init net/http @1.2 ms, 0.01 ms clock, 4712 bytes, 49 allocs".
func parseInitTrace(s string) []initLine {
	var out []initLine
	sc := bufio.NewScanner(bytes.NewBufferString(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] != "init" {
			continue
		}
		b, _ := strconv.ParseInt(f[7], 10, 64)
		a, _ := strconv.ParseInt(f[9], 10, 64)
		out = append(out, initLine{f[1], b, a})
	}
	return out
}

// buildFloor builds, into bin, a program that imports every package that
// cmd/paddock links but paddock's own and has an empty main. Its source is
// written in tmp and placed in the module with -overlay, so that it gets
// the module's versions without a file in the tree. Internal and vendored
// packages cannot be imported; those that paddock links come in through
// the packages that import them. It returns how many packages the floor
// imports.
func buildFloor(tmp, bin string) (int, error) {
	out, err := exec.Command("go", "list", "-deps", "./cmd/paddock").Output()
	if err != nil {
		return 0, fmt.Errorf("go list: %w", err)
	}
	mod, err := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Dir}}").Output()
	if err != nil {
		return 0, fmt.Errorf("go list -m: %w", err)
	}
	modPath, modDir, _ := strings.Cut(strings.TrimSpace(string(mod)), " ")
	n := 0
	var src strings.Builder
	src.WriteString("// Code generated by bench/startup. DO NOT EDIT.\n\npackage main\n\nimport (\n")
	for _, p := range strings.Fields(string(out)) {
		if p == modPath || strings.HasPrefix(p, modPath+"/") || strings.HasPrefix(p, "vendor/") ||
			p == "internal" || strings.HasPrefix(p, "internal/") || strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal") {
			continue
		}
		fmt.Fprintf(&src, "\t_ %q\n", p)
		n++
	}
	src.WriteString(")\n\nfunc main() {}\n")
	mainGo := filepath.Join(tmp, "floor.go")
	if err := os.WriteFile(mainGo, []byte(src.String()), 0o644); err != nil {
		return 0, err
	}
	dir := filepath.Join(modDir, "bench", "startup", "floor")
	overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(dir, "main.go"): mainGo}})
	if err != nil {
		return 0, err
	}
	overlayPath := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		return 0, err
	}
	build := exec.Command("go", "build", "-overlay", overlayPath, "-o", bin, "./bench/startup/floor")
	build.Dir = modDir
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("build the floor: %v\n%s", err, out)
	}
	return n, nil
}
