package paddockcli

import (
	"errors"
	"os"
	"syscall"

	"github.com/paddock-dev/paddock"
)

// prepareHome creates the state directory (0700), closes one that others
// could enter, and proves it writable. It holds the shared base snapshots,
// owned by the sandbox's uid so that an overlay can copy them up: a path
// to them open to that uid would let any process of it on the machine
// change what every run sees as its base.
func prepareHome(home string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return paddock.Errorf(paddock.CodeBadRequest, "cannot create state directory %s: %v", home, errors.Unwrap(err))
	}
	fi, err := os.Stat(home)
	if err != nil {
		return paddock.Errorf(paddock.CodeBadRequest, "state directory %s: %v", home, errors.Unwrap(err))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return paddock.Errorf(paddock.CodeBadRequest, "state directory %s belongs to uid %d, not to this user (%d); paddock keeps its state where only it can enter", home, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(home, 0o700); err != nil {
			return paddock.Errorf(paddock.CodeBadRequest, "state directory %s is open to others (%v) and cannot be closed: %v", home, fi.Mode().Perm(), errors.Unwrap(err))
		}
	}
	f, err := os.CreateTemp(home, ".probe-*")
	if err != nil {
		return paddock.Errorf(paddock.CodeBadRequest, "state directory %s is not writable: %v", home, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}
