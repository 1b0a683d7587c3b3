package main

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeBuildIsStatic: README's start command builds paddock without
// cgo, as TestMain builds the binary every test here runs, and that binary
// is static: no program interpreter, no shared library. A dynamically
// linked binary starts glibc's loader first, whose probing of the CPU
// costs every CLI call about a millisecond where cpuid traps to a
// hypervisor (bench/startup).
func TestReadmeBuildIsStatic(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const want = "CGO_ENABLED=0 go build -o bin/paddock ./cmd/paddock && bin/paddock serve"
	if !strings.Contains(string(readme), "\n"+want+"\n") {
		t.Errorf("README's start command is not %q; TestMain builds the binary the tests run as README does", want)
	}
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("paddock built with CGO_ENABLED=0 has a %v program header: it is dynamically linked", p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("paddock built with CGO_ENABLED=0 needs shared libraries %v (%v)", libs, err)
	}
}

// TestStartupInitBudget: what `paddock version` runs before main stays
// small. Every command starts the same binary as the daemon and the
// sandbox helper, so any package-level work (a regular expression
// compiled at init, a seccomp library's syscall tables, a driver's set-up)
// is paid by every CLI call, `paddock exec` from an agent's shell loop
// included. The budgets are in bytes and allocations, which do not drift
// with the machine's load as times do; the times are bench/startup's.
func TestStartupInitBudget(t *testing.T) {
	const (
		ownBytes, ownAllocs     = 16 << 10, 100  // each of paddock's own packages
		otherBytes, otherAllocs = 100 << 10, 400 // each dependency
		totalBytes, totalAllocs = 320 << 10, 2500
	)
	cmd := exec.Command(binary, "version")
	cmd.Env = append(os.Environ(), "PADDOCK_HOME="+t.TempDir(), "PADDOCK_NO_AUTOSTART=1", "GODEBUG=inittrace=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("paddock version: %v\n%s", err, stderr.String())
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
		maxB, maxA := int64(otherBytes), int64(otherAllocs)
		if strings.HasPrefix(pkg, "github.com/paddock-dev/paddock") {
			maxB, maxA = ownBytes, ownAllocs
		}
		if b > maxB || a > maxA {
			t.Errorf("package %s allocates %d bytes in %d allocations at init for paddock version (budget %d, %d): make it lazy (sync.OnceValue, internal/lazyre) or keep it out of the binary",
				pkg, b, a, maxB, maxA)
		}
	}
	if n < 50 {
		t.Fatalf("inittrace reported %d packages; is GODEBUG=inittrace=1 still honoured?\n%s", n, stderr.String())
	}
	if sumBytes > totalBytes || sumAllocs > totalAllocs {
		t.Errorf("paddock version allocates %d bytes in %d allocations at init in all (budget %d, %d)", sumBytes, sumAllocs, totalBytes, totalAllocs)
	}
	t.Logf("%d packages initialised: %d bytes, %d allocations", n, sumBytes, sumAllocs)
}
