package gittest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// History makes a repository at dir (created if needed) with commits
// commits on branch main, checked out, over files files (src/fileNNNN.txt):
// the first commit adds them all, each later one rewrites one of them. It writes the
// history as one git fast-import stream, so 60,000 commits take seconds,
// not the hours of as many `git commit`s. The same (files, commits) give
// the same commits, byte for byte, on every machine.
//
// It takes no testing.TB so that benchmarks can build the same repositories.
func History(dir string, commits, files int) error {
	if commits < 1 || files < 1 {
		return fmt.Errorf("gittest: history needs at least one commit and one file")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := plainGit(dir, "init", "--quiet", "--initial-branch=main"); err != nil {
		return err
	}
	// Always one pack, even for a few objects (git unpacks small imports
	// into loose objects by default): tests count pack reads.
	cmd := exec.Command("git", "-c", "fastimport.unpackLimit=1", "fast-import", "--quiet", "--done")
	cmd.Dir = dir
	// glibc's malloc gives memory back after each object by default, and
	// fast-import then spends most of its time in brk: 10 s instead of 2
	// for 60,000 commits.
	cmd.Env = append(plainEnv(), "MALLOC_TOP_PAD_=67108864", "MALLOC_TRIM_THRESHOLD_=268435456")
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("gittest: git fast-import: %w", err)
	}
	w := bufio.NewWriterSize(in, 1<<20)
	data := func(s string) { fmt.Fprintf(w, "data %d\n%s\n", len(s), s) }
	// Two versions of each file, written once; commits name them by mark,
	// so a commit costs git a commit and two trees, not a new blob.
	for i := 0; i < files; i++ {
		for v := 0; v < 2; v++ {
			fmt.Fprintf(w, "blob\nmark :%d\n", 1+2*i+v)
			data(fmt.Sprintf("file %d, version %d\n", i, v))
		}
	}
	const epoch = 1767225600 // 2026-01-01T00:00:00Z
	for c := 0; c < commits; c++ {
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter Test <test@example.com> %d +0000\n", epoch+c)
		data(fmt.Sprintf("change %d", c))
		if c == 0 {
			for i := 0; i < files; i++ {
				fmt.Fprintf(w, "M 100644 :%d src/file%04d.txt\n", 1+2*i, i)
			}
			continue
		}
		i := c % files
		fmt.Fprintf(w, "M 100644 :%d src/file%04d.txt\n", 1+2*i+(c/files)%2, i)
	}
	fmt.Fprintf(w, "done\n")
	werr := w.Flush()
	in.Close()
	if err := cmd.Wait(); err != nil || werr != nil {
		return fmt.Errorf("gittest: git fast-import: %v %v: %s", err, werr, stderr.String())
	}
	return plainGit(dir, "reset", "--quiet", "--hard", "main")
}

// plainEnv is the environment of the fixtures' git: no user or system
// config, a fixed identity.
func plainEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z")
}

func plainGit(dir string, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = plainEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gittest: git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
