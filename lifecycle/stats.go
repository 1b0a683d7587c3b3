package lifecycle

import (
	"context"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/internal/projquota"
	"github.com/paddock-dev/paddock/metrics"
)

// Observer is told what the services do as they do it, for the daemon's
// metrics (package metrics). Config.Observer; nil observes nothing.
type Observer interface {
	// ToolCall: a call the broker decided (and ran, when allowed), exec
	// included, from the decision to the recorded answer, and how it
	// ended (err nil: answered).
	ToolCall(tool string, access paddock.Access, decision paddock.Decision, rule string, err error, d time.Duration)
	// Exec: a command the sandbox ran to its end; ExecFailed: one it
	// could not run.
	Exec(access paddock.Access, mode string, degraded, oomKilled bool, d time.Duration)
	ExecFailed(err error)
	// WebhookAttempt: one delivery attempt of a webhook (its name, from
	// paddock.toml), and whether the receiver took it.
	WebhookAttempt(webhook string, delivered bool, d time.Duration)
	// CallStage: how long one stage of a call through the broker took
	// (Stage*), each as the call passes it: where a call's time goes
	// under load.
	CallStage(tool, stage string, d time.Duration)
}

// The stages of a call through the broker, in their order
// (Observer.CallStage), each observed as the call ends it: one the broker
// refuses ends after its read (and claim), with no call or record stage
// (its refusal's event is not timed as a stage); one that fails in queue,
// read or claim is not observed in it, while call and record are observed
// whether or not they succeed. What follows the record (the answer's
// masking, the look's lock) is in no stage, so the stages add up to a
// little less than ToolCall's duration, and more: ToolCall's begins after
// the claim.
const (
	// StageQueue is the wait for the run to be the call's: for a call
	// that can change its files, the look at them after the run's last
	// such call (each call's effects are its own); for a call with an
	// expected seq, the lock it checks its seq under (one of a few shared
	// by hash across runs: calls with an expected seq on the same run, or
	// on another, for their whole length), and before it the call's key's
	// claim, if it is keyed.
	StageQueue = "queue"
	// StageRead is the read of the run, its grants and its project.
	StageRead = "read"
	// StageClaim is the wait for the call's idempotency key to be claimed
	// after the run was read (the HTTP API claims a keyed exec's or tool
	// call's key beside that read); only a keyed call through those routes
	// passes it (one with an expected seq waited in queue, and passes it at
	// once).
	StageClaim = "claim"
	// StageCall is the call itself, its decision included: for a command,
	// its view, its run in the sandbox and its output.
	StageCall = "call"
	// StageRecord is the durable append of the call's events, before it
	// is answered.
	StageRecord = "record"
)

type noObserver struct{}

func (noObserver) ToolCall(string, paddock.Access, paddock.Decision, string, error, time.Duration) {}
func (noObserver) Exec(paddock.Access, string, bool, bool, time.Duration)                          {}
func (noObserver) WebhookAttempt(string, bool, time.Duration)                                      {}
func (noObserver) ExecFailed(error)                                                                {}
func (noObserver) CallStage(string, string, time.Duration)                                         {}

// observer is Config.Observer, or one that observes nothing.
func (kn *kernel) observer() Observer {
	if kn.Observer == nil {
		return noObserver{}
	}
	return kn.Observer
}

// Stats reads the state a metrics scrape reports: runs by project and
// state, jobs by state, pending access requests, the merge queue, and
// what live overlay runs wrote against their disk quota.
type Stats struct {
	*kernel
	// the services it calls
	queue    *Queue
	executor *executor

	mu   sync.Mutex
	disk map[string]diskSample // by run: a walk of an upper layer is not done at every scrape
}

// diskSample is a run's disk use as last measured.
type diskSample struct {
	at   time.Time
	used int64
}

// diskSampleAge is how long a walked run's disk use is reported before it
// is walked again.
const diskSampleAge = 30 * time.Second

// State reads the state, in one read transaction: of the runs this node
// holds (all, on a store of its own), so that nodes sharing a store each
// report their own and a sum over them is the cluster's; the queue is
// each node's document.
func (s *Stats) State(ctx context.Context) (*metrics.State, error) {
	st := &metrics.State{Jobs: map[string]int{}, Queue: map[string]int{}}
	var alive []*paddock.Run
	err := s.Store.View(ctx, func(tx paddock.Tx) error {
		runs, err := tx.Runs(ctx, paddock.RunFilter{})
		if err != nil {
			return err
		}
		counts := map[[2]string]int{}
		held := map[string]bool{}
		for _, r := range runs {
			if !s.mine(r) {
				continue
			}
			held[r.ID] = true
			counts[[2]string{r.Project, string(r.State())}]++
			if r.Workspace != nil && live(r.State()) {
				alive = append(alive, r)
				reqs, err := tx.AccessRequests().List(ctx, r.ID)
				if err != nil {
					return err
				}
				for _, q := range reqs {
					if q.State == paddock.RequestPending {
						st.AccessPending++
					}
				}
			}
		}
		for k, n := range counts {
			st.Runs = append(st.Runs, metrics.RunCount{Project: k[0], State: k[1], N: n})
		}
		jobs, err := tx.Jobs(ctx, "", "")
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if held[j.RunID] {
				st.Jobs[string(j.State)]++
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	entries, err := s.queue.Queue(ctx, "", true)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		st.Queue[e.State]++
	}
	st.Disk = s.diskUse(alive)
	return st, nil
}

// diskUse is what each live overlay run of this node wrote against its
// quota: the file system's own count where a project quota holds it,
// else a walk of its upper layer at most every diskSampleAge.
func (s *Stats) diskUse(runs []*paddock.Run) []metrics.DiskUse {
	quota := s.DiskLimits.quota()
	var out []metrics.DiskUse
	seen := map[string]bool{}
	for _, r := range runs {
		if !s.mine(r) {
			continue
		}
		up := s.executor.upperOf(r)
		if up == "" {
			continue
		}
		seen[r.ID] = true
		if s.executor.quotas.held(r.ID) {
			if used, _, err := projquota.Usage(up, projquota.ID(r.ID)); err == nil {
				out = append(out, metrics.DiskUse{Used: used, Quota: quota})
				continue
			}
		}
		s.mu.Lock()
		d, ok := s.disk[r.ID]
		s.mu.Unlock()
		if !ok || time.Since(d.at) > diskSampleAge {
			d = diskSample{at: time.Now(), used: usage(up)}
			s.mu.Lock()
			if s.disk == nil {
				s.disk = map[string]diskSample{}
			}
			s.disk[r.ID] = d
			s.mu.Unlock()
		}
		out = append(out, metrics.DiskUse{Used: d.used, Quota: quota})
	}
	s.mu.Lock()
	for id := range s.disk {
		if !seen[id] {
			delete(s.disk, id) // a run no longer live
		}
	}
	s.mu.Unlock()
	return out
}
