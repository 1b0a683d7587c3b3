package lifecycle

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"golang.org/x/sys/unix"
)

// Disk limits.
//
// A run's commands could fill the state directory's disk (many 1 GiB files,
// each under the file size limit): every other run, and the daemon's own
// state, would then fail. The daemon watches while a command runs, every
// DiskPoll:
//
//   - the state file system keeps DiskLimits.Reserve free: a command of any
//     run that brings it lower is killed;
//   - an overlay run's upper layer (all the run has written, its git
//     included) stays within DiskLimits.RunQuota: a command that takes
//     it past is killed, as is any command that is still running at a poll
//     while the layer is over (a quick rm, or the delete tool, gets the run
//     back under it).
//
// This is a watchdog, not the kernel's accounting: a command can overshoot
// by what it writes in one poll before it is killed (bounded by the file
// size limit and the disk's speed). A clone or worktree run's own usage is
// not measured (walking a whole checkout every poll would cost more than it
// guards); the reserve still holds for them. The result says so
// (ExecResult.Killed, Enforcement.Disk).

// DiskLimits bound what runs may write to the state directory's disk.
type DiskLimits struct {
	// RunQuota bounds an overlay run's upper layer, bytes (0: 10 GiB).
	RunQuota int64
	// Reserve is what the state file system keeps free, bytes (0: the
	// smaller of 1 GiB and 5% of it).
	Reserve int64
}

// DiskPoll is how often a running command's disk use is looked at.
var DiskPoll = 500 * time.Millisecond

func (l DiskLimits) quota() int64 {
	if l.RunQuota > 0 {
		return l.RunQuota
	}
	return 10 << 30
}

func (l DiskLimits) reserve(st *unix.Statfs_t) int64 {
	if l.Reserve > 0 {
		return l.Reserve
	}
	return min(1<<30, int64(st.Blocks)*st.Bsize/20)
}

// diskWatch watches one command; stop ends it and says why the command
// was killed, if it was.
type diskWatch struct {
	stop   func() string
	reason string
}

// usage sums the bytes held by what is under dir (blocks, as the disk
// counts them): all the run wrote, its own git included.
func usage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil {
			n += st.Blocks * 512
		}
		return nil
	})
	return n
}

// diskCheck says why a command of run r may not run now, or "": the
// state disk's reserve, and, unless starting, the run's quota.
func (ex *executor) diskCheck(r *paddock.Run, starting bool) string {
	var st unix.Statfs_t
	if unix.Statfs(ex.WorkspacesDir, &st) == nil {
		if free := int64(st.Bavail) * st.Bsize; free < ex.DiskLimits.reserve(&st) {
			ex.heldReserve().release(ex.log())
			return fmt.Sprintf("the state directory's disk has %d bytes free, under the %d it keeps in reserve", free, ex.DiskLimits.reserve(&st))
		}
		ex.heldReserve().hold(&st, ex.DiskLimits.reserve(&st))
	}
	up := ex.upperOf(r)
	if up != "" && ex.quotas.hold(r.ID, up) {
		return "" // the file system's project quota holds it (quota.go)
	}
	if up != "" && !starting {
		if n := usage(up); n > ex.DiskLimits.quota() {
			return fmt.Sprintf("the run has written %d bytes, over its disk quota of %d; remove files to go on", n, ex.DiskLimits.quota())
		}
	}
	return ""
}

func (ex *executor) upperOf(r *paddock.Run) string {
	if r.Workspace == nil || r.Workspace.Kind != paddock.KindOverlay {
		return ""
	}
	ov, ok := ex.overlayProvider()
	if !ok {
		return ""
	}
	return ov.LayersOf(r.Project, r.Workspace).Upper
}

// watchDisk cancels the command (through cancel) when the run or the disk
// goes past its limits while it runs (a command that writes nothing, run
// on a disk under its reserve, is let be: it can only free room). The watchdog is the Manager's: Close
// waits for it to stop (w.stop stops it, not waiting for a poll under
// way). Once Close has begun there is none: no command runs then.
func (ex *executor) watchDisk(r *paddock.Run, cancel context.CancelFunc, writesNothing bool) *diskWatch {
	w := &diskWatch{}
	done := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	ex.life.goBackground(func() {
		t := time.NewTicker(DiskPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if why := ex.diskCheck(r, false); why != "" && !writesNothing {
				mu.Lock()
				w.reason = why
				mu.Unlock()
				cancel()
				return
			}
		}
	})
	w.stop = func() string {
		once.Do(func() { close(done) })
		mu.Lock()
		defer mu.Unlock()
		return w.reason
	}
	return w
}

// diskEnforcement says what disk limits a command of run r had.
func (ex *executor) diskEnforcement(r *paddock.Run) string {
	if ex.upperOf(r) != "" {
		if ex.quotas.held(r.ID) {
			return fmt.Sprintf("run quota %d bytes held by the file system's project quota (a write past it fails); state disk reserve kept free (watched every %s)", ex.DiskLimits.quota(), DiskPoll)
		}
		return fmt.Sprintf("run quota %d bytes, state disk reserve kept free (watched every %s)", ex.DiskLimits.quota(), DiskPoll)
	}
	return fmt.Sprintf("state disk reserve kept free (watched every %s); this kind's own usage is not bounded", DiskPoll)
}
