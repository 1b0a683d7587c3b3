package lifecycle

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The reserve, held.
//
// The watchdog (disk.go) notices a full disk only at its next poll, and a
// command writes fast: a clone run wrote 390 MB in 0.47 s and filled its
// state disk first, after which the daemon's own database failed and every
// call of the run with it, the agent's own rm included (#29 item 8). So a
// part of the reserve is held as a file of paddock's (allocated, not
// sparse) on the state disk: when the disk is full it is let go, and the
// daemon's state has that room to go on (a failed write of the state that
// says the disk is full is tried once more after it); it is taken again
// once the disk has room. And on a disk under its reserve a command still
// runs, writing nothing (disk.go): deleting is always allowed.

// heldReserveMax bounds the file that holds part of the reserve.
const heldReserveMax = 64 << 20

// heldReservePath is the file that holds part of the state disk's reserve.
func (m *Manager) heldReservePath() string {
	return filepath.Join(filepath.Dir(m.WorkspacesDir), "disk-reserve")
}

// heldReserveSize is what the file holds on a file system st describes.
func (m *Manager) heldReserveSize(st *unix.Statfs_t) int64 {
	return min(heldReserveMax, m.DiskLimits.reserve(st)/2)
}

// releaseReserve lets the held reserve go, for the daemon's own state; it
// says whether there was one.
func (m *Manager) releaseReserve() bool {
	if err := os.Remove(m.heldReservePath()); err != nil {
		return false
	}
	m.log().Warn("the state disk is full: its held reserve is released for paddock's own state; runs' commands write nothing until files are removed")
	return true
}

// holdReserve takes the held reserve again where it is not held and the
// disk has room for it beside the reserve itself.
func (m *Manager) holdReserve(st *unix.Statfs_t) {
	p := m.heldReservePath()
	if _, err := os.Lstat(p); err == nil || m.WorkspacesDir == "" {
		return
	}
	size := m.heldReserveSize(st)
	if size <= 0 || int64(st.Bavail)*st.Bsize < m.DiskLimits.reserve(st)+size {
		return
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// A file system without fallocate holds no reserve this way.
		os.Remove(p)
	}
}

// diskFull says whether err is the state store's write failing for want
// of room.
func diskFull(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "database or disk is full") ||
		strings.Contains(err.Error(), "no space left on device"))
}
