package lifecycle

import (
	"testing"
	"time"
)

// SetJobTimings shortens the job timings for a test and restores them after.
func SetJobTimings(t *testing.T, renew, endRetry, cancel time.Duration) {
	oldRenew, oldEnd, oldFirst, oldCancel := leaseRenew, endRetryFor, endRetryFirst, cancelWait
	leaseRenew, endRetryFor, endRetryFirst, cancelWait = renew, endRetry, time.Millisecond, cancel
	t.Cleanup(func() { leaseRenew, endRetryFor, endRetryFirst, cancelWait = oldRenew, oldEnd, oldFirst, oldCancel })
}

// SetTestHook lets the tests of package lifecycle_test run code at a named
// point of an apply into a working tree ("commit", "verify").
func SetTestHook(m *Manager, f func(point string)) { m.testHook = f }

// RunningJobs is how many jobs m's runner runs: started, their end not yet
// recorded.
func RunningJobs(m *Manager) int { return m.runner.running() }
