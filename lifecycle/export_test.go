package lifecycle

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
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
func RunningJobs(m *Manager) int { return m.Jobs.runner.running() }

// CallToolUnbrokered runs a working tool as CallTool did before the
// broker: the run looked up, the tool run, its outcome recorded, its
// answer masked; no definition, no grants, no decision. The benchmark's
// baseline.
func CallToolUnbrokered(ctx context.Context, m *Manager, id, name string, args json.RawMessage) (any, error) {
	r, err := m.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	res, o, err := m.Broker.callTool(ctx, r, nil, name, args)
	if err != nil {
		return nil, err
	}
	red := m.redactor(r)
	o.Args = json.RawMessage(red.Bytes(o.Args))
	if err := m.Broker.recordTool(ctx, id, *o); err != nil {
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
	return m.Verifier.workspaceReports(ctx, r, manifest.Check{Name: "test", Results: results}, since)
}

// RunMemory counts, per structure, the runs whose state m keeps in
// memory: what forgetRun and runLocks must leave empty once runs are gone.
func RunMemory(m *Manager) map[string]int {
	count := func(s *sync.Map) (n int) {
		s.Range(func(any, any) bool { n++; return true })
		return n
	}
	m.Jobs.runner.mu.Lock()
	jobs := len(m.Jobs.runner.cancels)
	m.Jobs.runner.mu.Unlock()
	return map[string]int{
		"provenance states": count(&m.Provenance.provStates),
		"provenance locks":  m.Provenance.provMu.held(),
		"landing locks":     m.Queue.landMu.held(),
		"checkpoint locks":  m.Nodes.checkpointMu.held(),
		"checkpoints kept":  count(&m.Nodes.checkpointKept),
		"checkpoints due":   count(&m.Nodes.checkpointsDue),
		"adopting":          count(&m.Nodes.adopting),
		"run uses":          m.Forks.runUses.held(),
		"jobs":              jobs,
	}
}

// TrackEffects runs provenance's tracking for run r as a broker call that
// ended at seq does.
func TrackEffects(ctx context.Context, m *Manager, r *paddock.Run, seq int64) {
	m.Provenance.trackEffects(ctx, r, seq)
	m.Provenance.settle(r.ID)
}

// SettleAll waits for every look at a run's files under way (the calls'
// effects, looked at after their answers): a test that swaps the
// manager's store does it when nothing reads it in the background.
func SettleAll(m *Manager) {
	l := &m.Provenance.provMu
	l.mu.Lock()
	ids := make([]string, 0, len(l.m))
	for id := range l.m {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	SettleEffects(m, ids...)
}

// SettleEffects waits for the looks at the runs' files after their last
// calls (they run after the calls' answers).
func SettleEffects(m *Manager, ids ...string) {
	for _, id := range ids {
		m.Provenance.settle(id)
	}
}

// held is how many runs have an entry: callers holding or waiting.
func (l *runLocks) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// HarnessExec returns what runs argv in run id's sandbox as the executor
// hands it to the harness, and nothing else: its view worked out once, no
// broker, no limits, no events. The exec benchmark's baseline.
func HarnessExec(ctx context.Context, m *Manager, id string) (func(argv []string) error, error) {
	r, err := m.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	_, spec, err := m.executor.commandView(ctx, r, nil)
	if err != nil {
		return nil, err
	}
	spec.Env = baseEnv()
	return func(argv []string) error {
		s := spec
		s.Argv = argv
		_, err := m.executor.runCommand(ctx, id, s)
		return err
	}, nil
}

// ReleaseHarness gives back run id's harness: its next command starts one.
func ReleaseHarness(m *Manager, id string) { m.executor.releaseHarness(id) }

// WatchTreesFrom makes m's looks after each command watch a run's tree
// from n files (watchFrom): 0 watches every tree.
func WatchTreesFrom(m *Manager, n int) { m.Provenance.watches.from = n }

// WatchBudget gives m's looks budget watches in all, and has a run whose
// watches ran out try again retry after (before any tree is watched).
func WatchBudget(m *Manager, budget int, retry time.Duration) {
	m.Provenance.watches.budget, m.Provenance.watches.retry = budget, retry
}

// TreeLook is what run id's journal last said of its tree and what a
// walk of it finds now (path → blob, "" for a base file gone; neither
// holds what is as the base has it), and how many of its looks so far
// the kernel told (treelook.go), once the look after its last call is done.
func TreeLook(ctx context.Context, m *Manager, id string) (journal, walked map[string]string, told int, err error) {
	pv := m.Provenance
	defer pv.provMu.lock(id)()
	r, err := m.Run(ctx, id)
	if err != nil {
		return nil, nil, 0, err
	}
	st := pv.provStateOf(id)
	journal = map[string]string{}
	for p, b := range st.last {
		if b != "base" {
			journal[p] = b
		}
	}
	fresh := &provState{last: map[string]string{}, seen: map[string]upperFile{}, base: st.base,
		tree: treeWatch{off: true, linked: map[string]bool{}, pending: map[string]bool{}}}
	walked, err = pv.treeNow(r, fresh)
	return journal, walked, st.tree.touches, err
}

// JudgeLayersAhead judges the stillness of an overlay's directories
// (layerwalk.go) d ahead of the clock until t ends: listings are kept at
// once.
func JudgeLayersAhead(t testing.TB, d time.Duration) {
	layerAhead.Store(int64(d))
	t.Cleanup(func() { layerAhead.Store(0) })
}
