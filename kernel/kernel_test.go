package kernel

import (
	"os"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	checks := Probe()
	if len(checks) != 5 {
		t.Fatalf("%d checks", len(checks))
	}
	for _, c := range checks {
		if c.Name == "" || c.Detail == "" || (c.Status != OK && c.Status != Warn && c.Status != Fail) {
			t.Errorf("malformed check %+v", c)
		}
		if c.Status != OK && c.Fix == "" {
			t.Errorf("%s is %s without a fix", c.Name, c.Status)
		}
	}
}

// TestLandlockABIMatchesSysfs cross-checks the syscall probe against the
// LSM list the kernel publishes.
func TestLandlockABIMatchesSysfs(t *testing.T) {
	lsm, err := os.ReadFile("/sys/kernel/security/lsm")
	if err != nil {
		t.Skipf("cannot read the LSM list: %v", err)
	}
	enabled := false
	for _, name := range strings.FieldsFunc(string(lsm), func(r rune) bool { return r == ',' || r == '\n' }) {
		enabled = enabled || name == "landlock"
	}
	if abi := LandlockABI(); enabled != (abi > 0) {
		t.Fatalf("LSM list says landlock=%v, probe says ABI %d", enabled, abi)
	}
}
