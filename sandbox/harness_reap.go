//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// harnessProcs finds the harness processes of the pool whose directory is
// dir by their command lines (HarnessArg and the socket's path, which
// start writes there), whether their sockets are still there or not: a
// socket is removed once its harness is given back, or replaced, even
// when the harness did not answer. It maps each run's key to their pids.
func harnessProcs(dir string) map[string][]int {
	dir = filepath.Clean(dir)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := map[string][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if key, ok := harnessKey(pid, dir); ok {
			out[key] = append(out[key], pid)
		}
	}
	return out
}

// harnessKey says whether process pid is a harness of the pool whose
// directory is dir, and for which run.
func harnessKey(pid int, dir string) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "", false
	}
	argv := strings.Split(string(bytes.TrimSuffix(b, []byte{0})), "\x00")
	if len(argv) != 3 || argv[1] != HarnessArg || filepath.Dir(argv[2]) != dir {
		return "", false
	}
	return strings.CutSuffix(filepath.Base(argv[2]), ".sock")
}

// killHarness kills harness process pid, if it is still the harness of
// key in dir (a pid may have been reused since it was read), and waits up
// to 5 seconds for it to be gone. It is the first process of its pid
// namespace: its commands die with it, and its mounts with its mount
// namespace.
func killHarness(pid int, dir, key string) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if errors.Is(err, unix.ENOSYS) {
		// A kernel before 5.3: checked just before the signal instead.
		if k, ok := harnessKey(pid, filepath.Clean(dir)); ok && k == key {
			unix.Kill(pid, unix.SIGKILL)
			waitPidGone(pid, 5*time.Second)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("sandbox: harness %d: %w", pid, err)
	}
	defer unix.Close(fd)
	// Checked once the pidfd holds the process: a pid reused after the
	// check could not receive the signal.
	if k, ok := harnessKey(pid, filepath.Clean(dir)); !ok || k != key {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("sandbox: killing harness %d: %w", pid, err)
	}
	waitPidGone(pid, 5*time.Second)
	return nil
}
