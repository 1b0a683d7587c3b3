//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/paddock-dev/paddock"
)

// testLandlockBelow, when set, makes runSpec's commands use no Landlock ABI
// from it up (Spec.LandlockBelow).
var testLandlockBelow int

// TestOlderKernelsLandlock runs the escape and work tests with the Landlock
// of older kernels (none: a kernel before 5.13 or booted without it; ABI 1,
// 5.13; ABI 2, Debian 12's 6.1; ABI 4, 6.7), per exec and, for none and
// ABI 2, through a harness: every escape still fails, the work still
// works, and each command's record says what held each property. The VM
// tests (package vmtest) run the same on those kernels themselves.
func TestOlderKernelsLandlock(t *testing.T) {
	skipUnlessSandbox(t)
	if kernelABI() < 4 {
		t.Skipf("this kernel offers Landlock ABI %d; the test lowers it from 4 up", kernelABI())
	}
	defer func() { testLandlockBelow = 0 }()
	for _, abi := range []int{0, 1, 2, 4} {
		for _, resident := range []bool{false, true} {
			if resident && abi != 0 && abi != 2 {
				continue
			}
			name := fmt.Sprintf("abi-%d", abi)
			if resident {
				name += "-resident"
			}
			t.Run(name, func(t *testing.T) {
				testLandlockBelow = abi + 1
				if resident {
					testPool = &Pool{Dir: t.TempDir()}
					defer func() { testPool.Close(); testPool = nil }()
				}
				t.Run("Escapes", TestEscapes)
				t.Run("AllowedWork", TestAllowedWork)
				t.Run("ReadOnlyRun", TestReadOnlyRun)
				t.Run("Binds", TestBinds)
				ws, _ := newWorkspace(t)
				res := run(t, ws, "true")
				checkHolds(t, res.Enforcement, abi)
			})
		}
	}
}

// checkHolds: the record names Landlock at abi and the view for writes and
// reads, the namespaces for the network, signals and abstract sockets, and
// Landlock's scope only from ABI 6.
func checkHolds(t *testing.T, e Enforcement, abi int) {
	t.Helper()
	if e.Landlock != abi {
		t.Errorf("landlock_abi %d, want %d", e.Landlock, abi)
	}
	by := map[string][]string{}
	for _, h := range e.Holds {
		by[h.Property] = h.HeldBy
	}
	for _, p := range []string{paddock.PropWrites, paddock.PropReads} {
		if !slices.Contains(by[p], paddock.MechMountView) || slices.Contains(by[p], paddock.MechLandlockFS) != (abi > 0) {
			t.Errorf("%s held by %v at ABI %d", p, by[p], abi)
		}
	}
	want := map[string]string{paddock.PropNetwork: paddock.MechNetNS, paddock.PropSignals: paddock.MechPIDNS,
		paddock.PropAbstractSockets: paddock.MechNetNS, paddock.PropPrivileges: paddock.MechNoNewPrivs, paddock.PropSyscalls: paddock.MechSeccomp}
	for p, m := range want {
		if !slices.Contains(by[p], m) {
			t.Errorf("%s held by %v, want %s among them", p, by[p], m)
		}
	}
	if slices.Contains(by[paddock.PropSignals], paddock.MechLandlockScope) != (abi >= 6) {
		t.Errorf("signals held by %v at ABI %d", by[paddock.PropSignals], abi)
	}
}

// TestHostNetworkNeedsAScope: a command with the host's network shares the
// host's abstract sockets but where Landlock scopes them; before ABI 6 it
// is refused, or runs recorded as degraded when the spec allows that.
func TestHostNetworkNeedsAScope(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	spec := Spec{Argv: []string{"true"}, Workspace: ws, UID: sandboxUID(), Net: NetHost, LandlockBelow: 6,
		Env: []string{"PATH=/usr/bin:/bin"}}
	_, err := Run(context.Background(), spec)
	var pe *paddock.Error
	if !errors.As(err, &pe) || pe.Code != paddock.CodeUnsupported {
		t.Fatalf("host network at ABI 5: %v, want unsupported", err)
	}
	spec.AllowDegraded = true
	res, err := Run(context.Background(), spec)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("degraded: %v %+v", err, res)
	}
	if len(res.Enforcement.Degraded) == 0 {
		t.Errorf("nothing recorded as degraded: %+v", res.Enforcement)
	}
	for _, h := range res.Enforcement.Holds {
		if h.Property == paddock.PropAbstractSockets && (len(h.HeldBy) != 0 || h.Note == "") {
			t.Errorf("abstract sockets: %+v", h)
		}
	}
	if kernelABI() >= 6 {
		spec.AllowDegraded, spec.LandlockBelow = false, 0
		res, err = Run(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range res.Enforcement.Holds {
			if h.Property == paddock.PropAbstractSockets && !slices.Equal(h.HeldBy, []string{paddock.MechLandlockScope}) {
				t.Errorf("abstract sockets with the host's network: %+v", h)
			}
		}
	}
}

func TestRightsFor(t *testing.T) {
	prev := uint64(0)
	for abi := 1; abi <= 7; abi++ {
		r := rightsFor(abi)
		if r.fs&prev != prev || r.fs < prev {
			t.Errorf("ABI %d drops rights of ABI %d", abi, abi-1)
		}
		prev = r.fs
		if (r.net != 0) != (abi >= 4) || (r.scoped != 0) != (abi >= 6) {
			t.Errorf("ABI %d: %+v", abi, r)
		}
	}
	if r := rightsFor(0); r.fs != 0 || r.net != 0 || r.scoped != 0 {
		t.Errorf("no Landlock: %+v", r)
	}
	if rightsFor(2).fs&accessWrite != accessWrite&^(1<<14|1<<15) {
		t.Errorf("ABI 2 misses a write right of its own")
	}
}
