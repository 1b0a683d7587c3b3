// Package testenv says what the tests that need more than Go (podman, a
// Debian packager, qemu and kernels) do when it is missing: skip, saying
// what is missing, except in CI (CI=true), where what .ci/run installs
// must be there, so they fail instead. Standard library only.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// Need stops t for want of what format and args say: a failure in CI, a
// skip elsewhere.
func Need(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
