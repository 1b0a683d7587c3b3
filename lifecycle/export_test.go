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
