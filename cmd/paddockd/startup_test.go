package main

import (
	"bufio"
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/paddockcli"
)

// readmeBuilds are README's build commands: paddock, the CLI alone
// (cmd/paddock), and paddockd beside it, the whole binary (this package:
// the daemon, the sandbox's harness and helper, every verb).
var readmeBuilds = []string{
	"go build -o bin/ ./cmd/paddock ./cmd/paddockd",
}

// readmeBuild is readmeBuilds as arguments of go, building into dir from
// this package's directory (cmd/paddockd); TestMain builds the binaries
// every test runs with them.
func readmeBuild(dir string) [][]string {
	var out [][]string
	for _, c := range readmeBuilds {
		args := strings.Fields(strings.TrimPrefix(c, "go "))
		for i, a := range args {
			switch {
			case strings.HasPrefix(a, "bin/"):
				args[i] = filepath.Join(dir, strings.TrimPrefix(a, "bin/")) + "/"
			case a == "./cmd/paddock":
				args[i] = "../paddock"
			case a == "./cmd/paddockd":
				args[i] = "."
			}
		}
		out = append(out, args)
	}
	return out
}

// TestReadmeBuildIsStatic: README's start command builds both binaries
// without cgo, as TestMain builds the binaries every test here runs, and
// they are static: no program interpreter, no shared library. A
// dynamically linked binary starts glibc's loader first, whose probing of
// the CPU costs every CLI call about a millisecond where cpuid traps to a
// hypervisor (bench/startup).
func TestReadmeBuildIsStatic(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, c := range readmeBuilds {
		want += "CGO_ENABLED=0 " + c + "\n"
	}
	want += "bin/paddock serve\n"
	if !strings.Contains(string(readme), "\n"+want) {
		t.Errorf("README's start commands are not\n%s\nTestMain builds the binaries the tests run as README does", want)
	}
	for _, bin := range []string{binary, filepath.Join(filepath.Dir(binary), daemonName)} {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s built with CGO_ENABLED=0 has a %v program header: it is dynamically linked", filepath.Base(bin), p.Type)
			}
		}
		if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
			t.Errorf("%s built with CGO_ENABLED=0 needs shared libraries %v (%v)", filepath.Base(bin), libs, err)
		}
	}
}

// TestClientLinksNoDaemon: the paddock a user types links the client
// verbs and what they need, nothing of the daemon's: not its store
// (modernc.org's SQLite, pgx), not the MCP SDK, not the sandbox (Landlock,
// seccomp, libcap), not the HTTP API, not the lifecycle, not the change
// set's computation (gitx, confine, golang.org/x/text), and not net/http
// (the client speaks HTTP/1.1 itself: client/wire.go). Go initialises
// every package a binary links before main, and the runtime's set-up and
// the page faults of a start grow with the binary (bench/startup). The
// lists below are what the CLI may link; adding to them is a decision
// about every CLI call's start.
func TestClientLinksNoDaemon(t *testing.T) {
	own := map[string]bool{ // paddock's packages, under the module path
		"": true, "cmd/paddock": true, "internal/paddockcli": true, "client": true, "termsafe": true, "strictjson": true,
		"fakeagent":       true, // a scripted orchestrator: the client alone
		"changeset/hunks": true, // diff --blame's numbering, approve --hunks' list
		"approval":        true, // an approval policy in words (project show, approve's answer)
	}
	modules := map[string]bool{
		"github.com/spf13/cobra": true, "github.com/spf13/pflag": true, "golang.org/x/sys": true,
	}
	// Standard packages whose initialisation or size the CLI does without:
	// TLS and certificates, HTTP/2 and mime come with net/http.
	all := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../paddock")
	all.Env = append(os.Environ(), "CGO_ENABLED=0")
	allOut, err := all.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, std := range []string{"net/http", "crypto/tls", "crypto/x509", "mime", "compress/flate", "archive/tar", "hash/crc32"} {
		if slices.Contains(strings.Fields(string(allOut)), std) {
			t.Errorf("the CLI (cmd/paddock) links %s", std)
		}
	}
	list := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "../paddock")
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/paddock-dev/paddock"
	n := 0
	for _, p := range strings.Fields(string(out)) {
		if p == mod || strings.HasPrefix(p, mod+"/") {
			n++
			if rel := strings.TrimPrefix(strings.TrimPrefix(p, mod), "/"); !own[rel] {
				t.Errorf("the CLI (cmd/paddock) links %s: hand its verb to %s (internal/paddockcli's daemonVerbs, and this package's), or keep the package out of the client verbs' imports", p, daemonName)
			}
		}
	}
	if n < 3 {
		t.Fatalf("go list found %d of paddock's packages in the CLI:\n%s", n, out)
	}
	// The binary the tests run, as built: its modules.
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if !paddockcli.IsCLIBuild(bi) {
		t.Errorf("%s is not a build of cmd/paddock but of %s: not the CLI", binary, bi.Path)
	}
	for _, d := range bi.Deps {
		if !modules[d.Path] {
			t.Errorf("the CLI links module %s", d.Path)
		}
	}
}

// TestCLIHandsTheRestToPaddockd: the CLI answers the verbs it holds
// itself, every one with the help paddockd gives it, and hands paddockd
// the others and every line that names no verb, with the same output and
// exit code; without a paddockd beside it, those fail saying so, and the
// rest still work.
func TestCLIHandsTheRestToPaddockd(t *testing.T) {
	daemon := filepath.Join(filepath.Dir(binary), daemonName)
	env := append(os.Environ(), "PADDOCK_HOME="+t.TempDir(), "PADDOCK_NO_AUTOSTART=1")
	run := func(bin string, args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	lines := [][]string{nil, {"--help"}, {"help", "ls"}, {"bogus"}, {"completion", "bash"}, {"__complete", "l"},
		{"serve", "--bogus"}, {"doctor", "--help"}, {"mcp"}, {"ls"}, {"version", "--json", "extra"}}
	for _, v := range paddockcli.VerbNames() {
		lines = append(lines, []string{v, "--help"})
	}
	for _, args := range lines {
		got, gotCode := run(binary, args...)
		want, wantCode := run(daemon, args...)
		if got != want || gotCode != wantCode {
			t.Errorf("paddock %q: exit %d\n%s\npaddockd: exit %d\n%s", args, gotCode, got, wantCode, want)
		}
	}

	// Alone, the CLI still answers its own verbs, and says what is missing.
	alone := filepath.Join(t.TempDir(), "paddock")
	b, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, code := run(alone, "version"); code != 0 || !strings.Contains(out, "daemon  not running") {
		t.Errorf("paddock version without paddockd: exit %d, %s", code, out)
	}
	for _, args := range [][]string{{"serve"}, {"--help"}, {"doctor"}} {
		out, code := run(alone, args...)
		if code != exitInternal || !strings.Contains(out, daemonName) || !strings.Contains(out, "README") {
			t.Errorf("paddock %q without paddockd: exit %d, %s", args, code, out)
		}
	}
}

// TestStartupInitBudget: what a binary runs before main stays small. Any
// package-level work (a regular expression compiled at init, a seccomp
// library's syscall tables, a driver's set-up) is paid by every start:
// the CLI's at every call, `paddock exec` from an agent's shell loop
// included, and paddockd's at every daemon, `paddock mcp` and per-exec
// sandbox helper. The CLI's budget is paddockd's less what it does not
// link (about 270 KiB and 1,900 allocations before the daemon's metrics
// and traces; the CLI's, 24 KiB and 150). Those two (prometheus's client,
// OpenTelemetry's SDK and OTLP exporter, with the protobuf and gRPC
// packages they link) added about 440 KiB and 3,200 allocations to every
// paddockd start, about 6 ms (inittrace's clock, summed): the price of
// the task's named dependencies, paid by a per-exec helper too; a sandbox
// binary of its own would not pay it. heavyInit names the dependencies
// over the per-package budget, and why. The budgets are in
// bytes and allocations, which do not drift with the machine's load as
// times do; the times are bench/startup's.
func TestStartupInitBudget(t *testing.T) {
	for _, b := range []struct {
		bin                     string
		ownBytes, ownAllocs     int64 // each of paddock's own packages
		otherBytes, otherAllocs int64 // each dependency
		totalBytes, totalAllocs int64
	}{
		{"paddock", 16 << 10, 100, 16 << 10, 100, 48 << 10, 300},
		{daemonName, 16 << 10, 100, 100 << 10, 400, 800 << 10, 5600},
	} {
		t.Run(b.bin, func(t *testing.T) {
			initBudget(t, filepath.Join(filepath.Dir(binary), b.bin), b.ownBytes, b.ownAllocs, b.otherBytes, b.otherAllocs, b.totalBytes, b.totalAllocs)
		})
	}
}

// heavyInit are the dependencies allowed more than the per-package budget
// at init (bytes, allocations), each for what needs it.
var heavyInit = map[string][2]int64{
	// Its tables of /proc's fields; the prometheus package links it for
	// the process metrics whether or not they are collected.
	"github.com/prometheus/procfs": {128 << 10, 1000},
	// Linked by the OTLP exporter's generated service types (the trace
	// service's gRPC stubs ride along with its HTTP client's messages).
	"google.golang.org/grpc": {48 << 10, 600},
}

// initBudget runs bin version with GODEBUG=inittrace=1 and holds each
// package's initialisation, and their sum, to the budgets.
func initBudget(t *testing.T, bin string, ownBytes, ownAllocs, otherBytes, otherAllocs, totalBytes, totalAllocs int64) {
	t.Helper()
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "PADDOCK_HOME="+t.TempDir(), "PADDOCK_NO_AUTOSTART=1", "GODEBUG=inittrace=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s version: %v\n%s", filepath.Base(bin), err, stderr.String())
	}
	var sumBytes, sumAllocs int64
	n := 0
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		// init net/http @1.2 ms, 0.01 ms clock, 4712 bytes, 49 allocs
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] != "init" {
			continue
		}
		pkg := f[1]
		b, err1 := strconv.ParseInt(f[7], 10, 64)
		a, err2 := strconv.ParseInt(f[9], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("unreadable inittrace line %q", sc.Text())
		}
		n++
		sumBytes, sumAllocs = sumBytes+b, sumAllocs+a
		maxB, maxA := otherBytes, otherAllocs
		if h, ok := heavyInit[pkg]; ok {
			maxB, maxA = h[0], h[1]
		}
		if strings.HasPrefix(pkg, "github.com/paddock-dev/paddock") {
			maxB, maxA = ownBytes, ownAllocs
		}
		if b > maxB || a > maxA {
			t.Errorf("package %s allocates %d bytes in %d allocations at init for %s version (budget %d, %d): make it lazy (sync.OnceValue, internal/lazyre) or keep it out of the binary",
				pkg, b, a, filepath.Base(bin), maxB, maxA)
		}
	}
	if n < 20 {
		t.Fatalf("inittrace reported %d packages; is GODEBUG=inittrace=1 still honoured?\n%s", n, stderr.String())
	}
	if sumBytes > totalBytes || sumAllocs > totalAllocs {
		t.Errorf("%s version allocates %d bytes in %d allocations at init in all (budget %d, %d)", filepath.Base(bin), sumBytes, sumAllocs, totalBytes, totalAllocs)
	}
	t.Logf("%d packages initialised: %d bytes, %d allocations", n, sumBytes, sumAllocs)
}
