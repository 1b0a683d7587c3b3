package lifecycle

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/manifest"
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

// CallToolUnbrokered runs a working tool as CallTool did before the
// broker: the run looked up, the tool run, its outcome recorded, its
// answer masked; no definition, no grants, no decision. The benchmark's
// baseline.
func CallToolUnbrokered(ctx context.Context, m *Manager, id, name string, args json.RawMessage) (any, error) {
	r, err := m.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	res, o, err := m.callTool(ctx, r, name, args)
	if err != nil {
		return nil, err
	}
	red := m.redactor(r)
	o.Args = json.RawMessage(red.Bytes(o.Args))
	if err := m.recordTool(ctx, id, *o); err != nil {
		return nil, err
	}
	return redactValue(red, res)
}

// WorkspaceReports reads the reports a check with this Results field left
// in run id's workspace since then.
func WorkspaceReports(ctx context.Context, m *Manager, id, results string, since time.Time) (manifest.Counts, bool) {
	r, err := m.Run(ctx, id)
	if err != nil {
		return manifest.Counts{}, false
	}
	return m.workspaceReports(ctx, r, manifest.Check{Name: "test", Results: results}, since)
}
