package lifecycle

import (
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/paddock-dev/paddock/internal/projquota"
)

// diskQuotas put an overlay run's upper layer under the state file
// system's own project quota, where it has one (XFS with pquota, ext4 with
// the quota and project features mounted prjquota): a write past the run's
// quota then fails (EDQUOT) as it happens, instead of the command being
// killed at the watchdog's next look (disk.go). Elsewhere the watchdog
// stays, and each exec's enforcement says which held the quota.
type diskQuotas struct {
	dir   string // on the state file system
	limit int64
	log   func() *slog.Logger

	probe     sync.Once
	supported error // nil: the file system enforces project quotas

	mu   sync.Mutex
	runs map[string]*runQuota
}

// runQuota is one run's mark: made once (per daemon), outside the lock of
// every run, and a failure kept (the watchdog bounds that run instead)
// rather than walked again at every look.
type runQuota struct {
	mu          sync.Mutex
	tried, held bool
}

func (rq *runQuota) heldNow() bool {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	return rq.held
}

func newDiskQuotas(dir string, limit int64, log func() *slog.Logger) *diskQuotas {
	return &diskQuotas{dir: dir, limit: limit, log: log, runs: map[string]*runQuota{}}
}

// available says whether the state file system enforces project quotas.
func (q *diskQuotas) available() error {
	q.probe.Do(func() {
		q.supported = projquota.Supported(q.dir)
		if q.supported == nil {
			q.log().Info("disk quotas: each overlay run's upper layer gets the file system's project quota", "dir", q.dir, "quota", q.limit)
		}
	})
	return q.supported
}

// hold puts run id's upper layer under its project quota (once per run
// per daemon: a restarted daemon marks it again, what the run wrote
// meanwhile included), and says whether the kernel holds the quota. The
// mark covers the layer's parent, its overlay work directory with it:
// overlayfs makes each new file there and renames it into the upper
// layer, and ext4 refuses (EXDEV) a rename into a directory of another
// project.
func (q *diskQuotas) hold(id, upper string) bool {
	if q.available() != nil {
		return false
	}
	q.mu.Lock()
	rq := q.runs[id]
	if rq == nil {
		rq = &runQuota{}
		q.runs[id] = rq
	}
	q.mu.Unlock()
	rq.mu.Lock()
	defer rq.mu.Unlock()
	if !rq.tried {
		rq.tried = true
		if err := projquota.Set(filepath.Dir(upper), projquota.ID(id), q.limit); err != nil {
			q.log().Warn("disk quotas: the watchdog bounds this run instead", "run", id, "error", err)
		} else {
			rq.held = true
		}
	}
	return rq.held
}

// held says whether run id's quota is the kernel's now.
func (q *diskQuotas) held(id string) bool {
	q.mu.Lock()
	rq := q.runs[id]
	q.mu.Unlock()
	return rq != nil && rq.heldNow()
}

// forget lifts run id's project limit once the run is gone from this node
// (its files went with its workspace).
func (q *diskQuotas) forget(id string) {
	q.mu.Lock()
	rq := q.runs[id]
	delete(q.runs, id)
	q.mu.Unlock()
	if rq != nil && rq.heldNow() {
		if err := projquota.Clear(q.dir, projquota.ID(id)); err != nil {
			q.log().Warn("disk quotas: lifting a gone run's limit", "run", id, "error", err)
		}
	}
}
