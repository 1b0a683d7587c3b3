package workspace

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/internal/durable"
)

// A run's own git.
//
// An agent runs git constantly (status, diff, log, stash, commit), so every
// kind of workspace gives it a repository of its own at the base revision,
// on the branch paddock/RUN: its index, refs, config and new objects live
// in the run (its upper layer, its clone, its auxiliary directory), and it
// borrows the project's objects from a read-only view of them at
// ObjectsInView. The project's .git is never written, whatever the agent's
// git does; and the daemon never runs git with a run's git directory (its
// config and hooks are the agent's), so nothing planted there runs on the
// host. The change set stays the workspace against the base: the run's
// .git is never part of it.

// ObjectsInView is where a run's sandbox shows the project's object store
// (read-only): at its own host path, so that the same alternates serve
// the run's git in its view and a person's on the host (a retained clone
// keeps working there), unless that path lies where the view has the
// host's own directories, which cannot hold a mount.
func ObjectsInView(objects string) string {
	for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc", "/proc", "/dev", "/run/paddock"} {
		if objects == d || strings.HasPrefix(objects, d+"/") {
			return "/run/paddock/git/objects"
		}
	}
	return objects
}

// GitDirInView is where a worktree run's sandbox shows its git directory
// (its workspace's .git file points there).
const GitDirInView = "/run/paddock/git/dir"

// RunBranch is the branch a run's git starts on.
func RunBranch(runID string) string { return "paddock/" + runID }

// gitConfig suits a repository seen through an overlay, where a file's
// inode, device and ctime differ from what an index made elsewhere holds:
// checkStat=minimal compares mtime and size, so git status need not read
// every file again.
const gitConfig = `[core]
	repositoryformatversion = 0
	filemode = true
	bare = false
	logallrefupdates = true
	checkStat = minimal
	trustctime = false
`

// WriteGitDir makes dir a run's git directory: HEAD on RunBranch(runID) at
// base, objects borrowed from the project's (commonDir's) where the view
// shows them, the index copied from index (if given) and the project's
// shallow list, if any, all owned by owner (if not 0).
func WriteGitDir(dir, runID, base, index, commonDir string, owner int) error {
	objects, _ := ProjectObjects(commonDir)
	if err := gitx.CheckRef(base); err != nil || len(base) < 40 {
		return fmt.Errorf("workspace: git dir: bad base %q", base)
	}
	files := map[string]string{
		"HEAD":                           "ref: refs/heads/" + RunBranch(runID) + "\n",
		"config":                         gitConfig,
		"description":                    "a paddock run\n",
		"objects/info/alternates":        ObjectsInView(objects) + "\n",
		"refs/heads/" + RunBranch(runID): base + "\n",
	}
	for _, d := range []string{"objects/pack", "objects/info", "refs/heads/paddock", "refs/tags", "info"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("workspace: git dir: %w", err)
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("workspace: git dir: %w", err)
		}
	}
	if index != "" {
		if err := copyFile(index, filepath.Join(dir, "index")); err != nil {
			return fmt.Errorf("workspace: git dir: index: %w", err)
		}
	}
	if err := copyFile(filepath.Join(commonDir, "shallow"), filepath.Join(dir, "shallow")); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("workspace: git dir: shallow: %w", err)
	}
	return chownAll(dir, owner)
}

// PointAtView turns an existing git directory (a clone's, borrowing the
// objects of the project at commonDir) into a run's: on RunBranch(runID)
// at base, borrowing the objects where the view shows them.
func PointAtView(gitDir, runID, base, commonDir string) error {
	objects, _ := ProjectObjects(commonDir)
	for name, content := range map[string]string{
		"HEAD":                           "ref: refs/heads/" + RunBranch(runID) + "\n",
		"objects/info/alternates":        ObjectsInView(objects) + "\n",
		"refs/heads/" + RunBranch(runID): base + "\n",
	} {
		p := filepath.Join(gitDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("workspace: git dir: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("workspace: git dir: %w", err)
		}
	}
	return nil
}

// ProjectObjects is the project's object store, which a run's view shows
// at ObjectsInView; alternates of the project's own are not followed
// there, and are reported.
func ProjectObjects(commonDir string) (dir string, alternates []string) {
	dir = filepath.Join(commonDir, "objects")
	f, err := os.Open(filepath.Join(dir, "info", "alternates"))
	if err != nil {
		return dir, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			alternates = append(alternates, l)
		}
	}
	return dir, alternates
}

func copyFile(src, dst string) error { return durable.CopyFile(src, dst, 0o644) }

func chownAll(dir string, owner int) error {
	if owner == 0 {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, owner, owner)
	})
}

// DetachHead puts the HEAD of a run's git directory at commit itself, on
// no branch (a review run's: it sees the change set it reviews as a
// detached HEAD), and removes the run's branch.
func DetachHead(gitDir, runID, commit string) error {
	if err := gitx.CheckRef(commit); err != nil || len(commit) < 40 {
		return fmt.Errorf("workspace: git dir: bad commit %q", commit)
	}
	if err := os.WriteFile(filepath.Join(gitDir, "HEAD"), []byte(commit+"\n"), 0o644); err != nil {
		return fmt.Errorf("workspace: git dir: %w", err)
	}
	if err := os.Remove(filepath.Join(gitDir, "refs", "heads", RunBranch(runID))); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("workspace: git dir: %w", err)
	}
	return nil
}

// AddAlternate adds an object directory (as a run's view shows it) to the
// alternates of a run's git directory: a review run borrows its own store,
// which holds the commit under review, beside the project's.
func AddAlternate(gitDir, objects string) error {
	p := filepath.Join(gitDir, "objects", "info", "alternates")
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("workspace: git dir: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == objects {
			return nil
		}
	}
	if len(b) > 0 && !strings.HasSuffix(string(b), "\n") {
		b = append(b, '\n')
	}
	fi, statErr := os.Stat(p)
	if err := os.WriteFile(p, append(b, objects+"\n"...), 0o644); err != nil {
		return fmt.Errorf("workspace: git dir: %w", err)
	}
	if statErr == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			os.Lchown(p, int(st.Uid), int(st.Gid))
		}
	}
	return nil
}
