package main

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/paddock-dev/paddock/bench/internal/benchutil"
)

func newRand(seed int64, i int) *rand.Rand {
	return rand.New(rand.NewSource(seed*1_000_003 + int64(i)))
}

// makeRepo makes the project: a copy of --repo, or a repository of its
// own (20 tracked files under src/, three commits, a tag, a second
// branch, an ignored file and an untracked one in the working tree, so
// that "as it was" covers more than one commit's tree). Either way the
// copy gets a committer identity of its own.
func (s *soak) makeRepo() error {
	s.tracked = 20
	if s.cfg.Repo != "" {
		if err := os.MkdirAll(filepath.Dir(s.repo), 0o755); err != nil {
			return err
		}
		if out, err := exec.Command("cp", "-a", s.cfg.Repo, s.repo).CombinedOutput(); err != nil {
			return fmt.Errorf("copying %s: %w: %s", s.cfg.Repo, err, out)
		}
		// A copied repository may hold no src/fN.txt: runs then create them.
	} else {
		if err := os.MkdirAll(filepath.Join(s.repo, "src"), 0o755); err != nil {
			return err
		}
		if _, err := benchutil.Git("", "init", "-q", "-b", "main", s.repo); err != nil {
			return err
		}
		for c := range 3 {
			for i := range s.tracked {
				body := fmt.Sprintf("file %d, commit %d\n%s", i, c, strings.Repeat("a line of text\n", 20+i))
				if err := os.WriteFile(filepath.Join(s.repo, "src", fmt.Sprintf("f%d.txt", i)), []byte(body), 0o644); err != nil {
					return err
				}
			}
			if err := os.WriteFile(filepath.Join(s.repo, ".gitignore"), []byte("*.log\n"), 0o644); err != nil {
				return err
			}
			if _, err := benchutil.Git(s.repo, "add", "-A"); err != nil {
				return err
			}
			if _, err := benchutil.Git(s.repo, "commit", "-qm", fmt.Sprintf("commit %d", c)); err != nil {
				return err
			}
			if c == 0 {
				if _, err := benchutil.Git(s.repo, "branch", "old"); err != nil {
					return err
				}
			}
		}
		if _, err := benchutil.Git(s.repo, "tag", "v1"); err != nil {
			return err
		}
		for name, body := range map[string]string{"build.log": "ignored\n", "notes.txt": "untracked\n"} {
			if err := os.WriteFile(filepath.Join(s.repo, name), []byte(body), 0o644); err != nil {
				return err
			}
		}
	}
	for _, kv := range [][2]string{{"user.name", "soak"}, {"user.email", "soak@example.com"}} {
		if _, err := benchutil.Git(s.repo, "config", kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// repoState is what the checks compare: the refs, HEAD, the index and
// every file of the working tree (outside .git) by its blob id.
type repoState struct {
	refs  map[string]string
	head  string
	index string
	files map[string]string // path → blob id (a symlink: "link:" + its target)
}

func readRepo(repo string) (*repoState, error) {
	st := &repoState{refs: map[string]string{}, files: map[string]string{}}
	out, err := benchutil.Git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(out, "\n") {
		if name, obj, ok := strings.Cut(l, " "); ok {
			st.refs[name] = obj
		}
	}
	if st.head, err = benchutil.Git(repo, "rev-parse", "--symbolic-full-name", "HEAD"); err != nil {
		return nil, err
	}
	if h, err := benchutil.Git(repo, "rev-parse", "HEAD"); err == nil {
		st.head += " " + h
	}
	if st.index, err = benchutil.Git(repo, "ls-files", "-s"); err != nil {
		return nil, err
	}
	var paths []string
	err = filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repo, p)
		if rel == ".git" {
			return filepath.SkipDir
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			st.files[rel] = "link:" + t
		case d.Type().IsRegular():
			paths = append(paths, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the working tree: %w", err)
	}
	// git hash-object, in batches: the blob ids a change set names.
	for len(paths) > 0 {
		n := min(len(paths), 500)
		cmd := exec.Command("git", append([]string{"hash-object", "--no-filters", "--"}, paths[:n]...)...)
		cmd.Dir = repo
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("git hash-object: %w", err)
		}
		ids := strings.Fields(string(b))
		if len(ids) != n {
			return nil, fmt.Errorf("git hash-object gave %d ids for %d files", len(ids), n)
		}
		for i, p := range paths[:n] {
			st.files[p] = ids[i]
		}
		paths = paths[n:]
	}
	return st, nil
}
