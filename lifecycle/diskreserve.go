package lifecycle

import (
	"errors"
	"log/slog"
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

// heldReserve is the file, at this path, that holds part of the state
// disk's reserve.
type heldReserve string

// heldReserve is the state disk's held reserve.
func (kn *kernel) heldReserve() heldReserve {
	return heldReserve(filepath.Join(filepath.Dir(kn.WorkspacesDir), "disk-reserve"))
}

// release lets the held reserve go, for the daemon's own state; it says
// whether there was one.
func (h heldReserve) release(log *slog.Logger) bool {
	if err := os.Remove(string(h)); err != nil {
		return false
	}
	log.Warn("the state disk is full: its held reserve is released for paddock's own state; runs' commands write nothing until files are removed")
	return true
}

// hold takes the held reserve again where it is not held and the disk,
// which st describes, has room for it beside the reserve itself.
func (h heldReserve) hold(st *unix.Statfs_t, reserve int64) {
	if _, err := os.Lstat(string(h)); err == nil {
		return
	}
	size := min(heldReserveMax, reserve/2)
	if size <= 0 || int64(st.Bavail)*st.Bsize < reserve+size {
		return
	}
	f, err := os.OpenFile(string(h), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// A file system without fallocate holds no reserve this way.
		os.Remove(string(h))
	}
}

// diskFull says whether err is the state store's write failing for want
// of room.
func diskFull(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "database or disk is full") ||
		strings.Contains(err.Error(), "no space left on device"))
}
