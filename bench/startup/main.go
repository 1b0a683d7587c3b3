// Command startup measures how long the CLI takes to start: `paddock
// version` and `paddock ls` (no daemon answers, none is started) and
// `paddock --help`, from the binaries README's commands build (static,
// CGO_ENABLED=0: paddock, the CLI alone (cmd/paddock), and paddockd, the
// whole binary (cmd/paddockd), beside it), beside a Go hello-world built by
// the same toolchain, interleaved in one run, and what package
// initialisation `paddock version` pays (GODEBUG=inittrace=1). A CLI that
// starts in milliseconds is what lets an agent call `paddock exec` in a
// loop from a shell. Beside them: `paddockd version`, what every CLI call
// cost when the CLI was the whole binary; two floors, programs that link
// every package the CLI (and paddockd) links except paddock's own, and do
// nothing, so that what paddock's code costs stands apart from what its
// dependencies' initialisation and the runtime's set-up of a binary that
// size cost whatever paddock does; and `paddock version` from a plain `go
// build` (cgo, dynamically linked), for what the dynamic loader costs;
// and the calls a daemon answers (paddockd serving a one-file project with
// a run, stopped at the end with whatever it started): `version`, `ls`,
// and `exec RUN -- true` beside paddockd's own exec. Each round runs the
// programs in a shuffled order. Each program is timed as a copy written whole (see copyFile), and
// paddock also as the linker left it. Each figure has its wall time and
// its CPU time (user and system), which waiting for a core on a loaded
// machine does not add to. It prints a markdown table; nothing is asserted
// (cmd/paddockd's TestClientLinksNoDaemon and TestStartupInitBudget, and
// internal/paddockcli's TestVerbTreeBudget, hold what the times follow
// from).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
)

func main() {
	quick := flag.Bool("quick", false, "small workload for a CI smoke run")
	n := flag.Int("n", 400, "starts per side")
	flag.Parse()
	if *quick {
		*n = 40
	}
	err := benchutil.Subreaper()
	if err == nil {
		err = run(*n)
	}
	// The daemon has been stopped and waited for: whatever is left is a
	// child it left behind.
	if left := benchutil.Leftovers(10 * time.Second); len(left) > 0 {
		err = errors.Join(err, fmt.Errorf("processes left behind after the daemon stopped, killed: %s", strings.Join(left, "; ")))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

const hello = `package main

import "os"

func main() { os.Stdout.WriteString("hello\n") }
`

// side is one program the benchmark starts, and its times.
type side struct {
	argv  []string
	exit  int      // the exit code it must end with
	env   []string // added to the environment (a daemon's home)
	times []time.Duration
	cpu   []time.Duration // user and system time, which waiting for a core does not add to
}

// run builds the programs, starts each n times (and a tenth more to warm
// the page cache) and prints the table.
func run(n int) error {
	tmp, err := os.MkdirTemp("", "paddock-bench-startup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "paddock")
	daemon := filepath.Join(tmp, "paddockd")
	hbin, dynamic, err := buildPrograms(tmp, bin, daemon)
	if err != nil {
		return err
	}
	benchutil.Step("building the floors: the CLI's dependencies and nothing else, paddockd's and nothing else")
	floor := filepath.Join(tmp, "floor")
	floorPkgs, err := buildFloor(tmp, floor, "./cmd/paddock")
	if err != nil {
		return err
	}
	daemonFloor := filepath.Join(tmp, "floor-paddockd")
	daemonFloorPkgs, err := buildFloor(tmp, daemonFloor, "./cmd/paddockd")
	if err != nil {
		return err
	}
	env := append(os.Environ(), "PADDOCK_HOME="+filepath.Join(tmp, "home"), "PADDOCK_NO_AUTOSTART=1")
	version := &side{argv: []string{bin, "version"}}
	ls := &side{argv: []string{bin, "ls"}, exit: 8} // no daemon answers, none is started
	help := &side{argv: []string{bin, "--help"}}
	peer := &side{argv: []string{hbin}}
	deps := &side{argv: []string{floor}}
	whole := &side{argv: []string{daemon, "version"}}
	wholeDeps := &side{argv: []string{daemonFloor}}
	versionCgo := &side{argv: []string{dynamic, "version"}}
	built, err := copyWhole(bin, daemon, dynamic, hbin, floor, daemonFloor)
	if err != nil {
		return err
	}
	versionBuilt := &side{argv: []string{built, "version"}}
	benchutil.Step("starting paddockd on a small project, with a run, for the calls a daemon answers")
	d, run, err := startDaemon(tmp, daemon)
	if err != nil {
		return err
	}
	defer d.Stop()
	denv := func(s *side) *side { s.env = []string{"PADDOCK_HOME=" + d.Home}; return s }
	versionUp := denv(&side{argv: []string{bin, "version"}})
	lsUp := denv(&side{argv: []string{bin, "ls"}})
	execUp := denv(&side{argv: []string{bin, "exec", run, "--", "true"}})
	wholeExecUp := denv(&side{argv: []string{daemon, "exec", run, "--", "true"}})
	sides := []*side{version, ls, help, peer, deps, whole, wholeDeps, versionCgo, versionBuilt, versionUp, lsUp, execUp, wholeExecUp}
	benchutil.Step("%d starts each of %d programs, interleaved", n, len(sides))
	if err := measure(sides, env, n); err != nil {
		return err
	}
	inits, bytes, allocs, err := initCost(bin, env)
	if err != nil {
		return err
	}
	wholeInits, wholeBytes, wholeAllocs, err := initCost(daemon, env)
	if err != nil {
		return err
	}
	fmt.Println(benchutil.Machine(tmp))
	fmt.Println()
	fmt.Println("| figure | paddock | peer | ratio |")
	fmt.Println("|---|---|---|---|")
	row("CLI start: `paddock version`, no daemon", version, peer, "hello-world")
	row("CLI start: `paddock ls`, no daemon answers (exit 8)", ls, peer, "hello-world")
	row("CLI start: `paddock --help`, handed to paddockd (every verb's command built)", help, peer, "hello-world")
	row(fmt.Sprintf("floor: the CLI's %d dependencies linked, nothing run", floorPkgs), deps, peer, "hello-world")
	minus("the CLI's own share: `paddock version` minus its floor", version, deps, "floor")
	row("the whole binary: `paddockd version`, what every CLI call cost when the CLI was it", whole, peer, "hello-world")
	row(fmt.Sprintf("floor: paddockd's %d dependencies linked, nothing run", daemonFloorPkgs), wholeDeps, peer, "hello-world")
	row("the CLI against the whole binary: `paddock version` vs `paddockd version`", version, whole, "paddockd")
	row("CLI start: `paddock version` from a plain `go build ./cmd/paddock` (cgo: dynamically linked)", versionCgo, peer, "hello-world")
	minus("what cgo costs a start: `paddock version` from a plain `go build` minus as README builds it", versionCgo, version, "CGO_ENABLED=0")
	row("CLI start: `paddock version`, the same binary as the linker left it (not copied)", versionBuilt, peer, "hello-world")
	row("`paddock version`, a daemon answering (its status asked)", versionUp, peer, "hello-world")
	row("`paddock ls`, a daemon answering", lsUp, peer, "hello-world")
	row("`paddock exec RUN -- true`, a daemon answering (a confined command run)", execUp, peer, "hello-world")
	row("the CLI's exec against the whole binary's: `paddock exec RUN -- true` vs `paddockd exec RUN -- true`", execUp, wholeExecUp, "paddockd")
	fmt.Printf("| package initialisation of `paddock version` (inittrace: %d packages) | %d KiB, %d allocations | %d KiB, %d allocations (`paddockd version`, %d packages) | – |\n",
		inits, bytes>>10, allocs, wholeBytes>>10, wholeAllocs, wholeInits)
	return nil
}

// buildPrograms builds paddockd at daemon and the CLI at bin as README
// builds them (CGO_ENABLED=0), the CLI with a plain go build (cgo), and a
// hello-world; it returns the last two.
func buildPrograms(tmp, bin, daemon string) (hbin, dynamic string, err error) {
	benchutil.Step("building paddock and paddockd as README builds them (CGO_ENABLED=0), the CLI with a plain go build, and a hello-world")
	dynamic = filepath.Join(tmp, "cgo", "paddock")
	for _, b := range []struct {
		out string
		pkg string
		cgo bool
	}{{daemon, "./cmd/paddockd", false}, {bin, "./cmd/paddock", false}, {dynamic, "./cmd/paddock", true}} {
		build := exec.Command("go", "build", "-o", b.out, b.pkg)
		if !b.cgo {
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if out, err := build.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("build %s: %v\n%s", b.out, err, out)
		}
	}
	hdir := filepath.Join(tmp, "hello")
	os.Mkdir(hdir, 0o755)
	os.WriteFile(filepath.Join(hdir, "main.go"), []byte(hello), 0o644)
	os.WriteFile(filepath.Join(hdir, "go.mod"), []byte("module hello\n"), 0o644)
	hbin = filepath.Join(tmp, "hello-world")
	build := exec.Command("go", "build", "-o", hbin, ".")
	build.Dir = hdir
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build hello-world: %v\n%s", err, out)
	}
	return hbin, dynamic, nil
}

// copyWhole replaces each program with a copy written whole (see
// copyFile), keeping the linker's output beside it as name.built; it
// returns paddock's, which is also measured as the linker left it.
func copyWhole(bin string, others ...string) (built string, err error) {
	built = bin + ".built"
	if err := os.Rename(bin, built); err != nil {
		return "", err
	}
	if err := copyFile(built, bin); err != nil {
		return "", err
	}
	for _, b := range others {
		if err := os.Rename(b, b+".built"); err != nil {
			return "", err
		}
		if err := copyFile(b+".built", b); err != nil {
			return "", err
		}
	}
	return built, nil
}

// measure starts each side n+n/10 times, interleaved, and keeps the
// times of all but the first tenth, which warms the page cache.
func measure(sides []*side, env []string, n int) error {
	// Each round runs the programs in an order of its own: what runs just
	// before a call can slow it (the daemon's work after an ls, say, falls
	// on the call after it), so no program always follows the same one.
	order := slices.Clone(sides)
	shuffle := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n+n/10; i++ {
		shuffle.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, s := range order {
			cmd := exec.Command(s.argv[0], s.argv[1:]...)
			cmd.Env = append(env, s.env...)
			t0 := time.Now()
			err := cmd.Run()
			d := time.Since(t0)
			if code := cmd.ProcessState.ExitCode(); code != s.exit {
				return fmt.Errorf("%s: exit %d, want %d (%v)", strings.Join(s.argv, " "), code, s.exit, err)
			}
			if i >= n/10 { // the first tenth warms the page cache
				s.times = append(s.times, d)
				s.cpu = append(s.cpu, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
			}
		}
	}
	return nil
}

// stats are a side's times and its median CPU.
func stats(s *side) string {
	return fmt.Sprintf("%s, CPU %s", benchutil.Stats(s.times), benchutil.Round(benchutil.Median(s.cpu)))
}

// row prints a figure: ours against a peer.
func row(figure string, ours, peer *side, peerName string) {
	fmt.Printf("| %s (%d starts) | %s | %s (%s) | %s (CPU %s) |\n",
		figure, len(ours.times), stats(ours), stats(peer), peerName, benchutil.Ratio(ours.times, peer.times), benchutil.Ratio(ours.cpu, peer.cpu))
}

// minus prints a figure that is ours less a base: what ours adds to it.
func minus(figure string, ours, base *side, baseName string) {
	fmt.Printf("| %s (medians) | %s, CPU %s | %s (%s) | %s (CPU %s) |\n", figure,
		benchutil.Round(benchutil.Median(ours.times)-benchutil.Median(base.times)), benchutil.Round(benchutil.Median(ours.cpu)-benchutil.Median(base.cpu)),
		stats(base), baseName, benchutil.Ratio(ours.times, base.times), benchutil.Ratio(ours.cpu, base.cpu))
}

// copyFile writes a copy of src to dst with one write(2). How the page
// cache holds a binary changes how fast it starts: the linker writes its
// output through a shared mapping, and a binary that left the cache is
// read back in by the page faults of exec'ing it; such a file is cached
// in small folios, and starts 0.6 to 1.5 ms later here, by an amount that
// changes from one build to the next, than the same bytes written or read
// whole. Measuring copies compares the programs' code, not the luck of
// their page cache; the as-built row shows what that luck costs.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// startDaemon starts paddockd (bin) in tmp with a one-file project and a
// run of it, and returns the run's id.
func startDaemon(tmp, bin string) (*benchutil.Daemon, string, error) {
	repo := filepath.Join(tmp, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return nil, "", err
	}
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-qm", "a"}} {
		git := exec.Command("git", args...)
		git.Dir = repo
		if out, err := git.CombinedOutput(); err != nil {
			return nil, "", fmt.Errorf("git %v: %v\n%s", args, err, out)
		}
	}
	ctx := context.Background()
	d, err := benchutil.StartDaemonFrom(ctx, bin, filepath.Join(tmp, "daemon-home"))
	if err != nil {
		return nil, "", err
	}
	if _, err := d.Client.AddProject(ctx, paddock.AddProjectRequest{Path: repo}); err != nil {
		d.Stop()
		return nil, "", err
	}
	r, err := d.Client.Create(ctx, paddock.CreateRunRequest{Project: "repo"})
	if err != nil {
		d.Stop()
		return nil, "", err
	}
	return d, r.ID, nil
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
// the main package pkg links (./cmd/paddock: the CLI; ./cmd/paddockd:
// paddockd) but paddock's own and has an empty main, both built as README
// builds paddock (CGO_ENABLED=0). Its source is written in tmp and placed in the module with -overlay, so
// that it gets the module's versions without a file in the tree. Internal and vendored
// packages cannot be imported; those that paddock links come in through
// the packages that import them. It returns how many packages the floor
// imports.
func buildFloor(tmp, bin, pkg string) (int, error) {
	list := exec.Command("go", "list", "-deps", pkg)
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := list.Output()
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
	mainGo := filepath.Join(tmp, "floor-"+filepath.Base(bin)+".go")
	if err := os.WriteFile(mainGo, []byte(src.String()), 0o644); err != nil {
		return 0, err
	}
	dir := filepath.Join(modDir, "bench", "startup", "floor")
	overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(dir, "main.go"): mainGo}})
	if err != nil {
		return 0, err
	}
	overlayPath := filepath.Join(tmp, "overlay-"+filepath.Base(bin)+".json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		return 0, err
	}
	build := exec.Command("go", "build", "-overlay", overlayPath, "-o", bin, "./bench/startup/floor")
	build.Dir = modDir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("build the floor: %v\n%s", err, out)
	}
	return n, nil
}
