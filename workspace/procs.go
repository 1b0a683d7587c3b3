package workspace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killProcessesIn kills every process of ours whose working directory is
// root or below it, and waits for them to go. A daemon killed while git was
// making a workspace leaves git's own children running (the parent-death
// signal reaches only the direct child); one still writing into the tree, or
// into the project's worktree record, would race the rollback.
func killProcessesIn(root string) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	var victims []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil {
			continue // gone, or not ours to read
		}
		if cwd == root || strings.HasPrefix(cwd, root+"/") {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				victims = append(victims, pid)
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range victims {
		for time.Now().Before(deadline) {
			// A zombie keeps its /proc entry but no longer writes anything.
			b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
			if err != nil || strings.Contains(string(b), ") Z ") {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
