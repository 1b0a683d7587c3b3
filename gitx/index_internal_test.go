package gitx

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitOut runs git in repo with no config but the repository's, index as
// its index, and returns its output, its errors and how it ended.
func gitOut(repo, index string, stdin []byte, args ...string) ([]byte, []byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_INDEX_FILE="+index,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	return out, stderr.Bytes(), err
}

// plainGit is gitOut that fails the test on an error.
func plainGit(t *testing.T, repo, index string, stdin []byte, args ...string) []byte {
	t.Helper()
	out, stderr, err := gitOut(repo, index, stdin, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// bareRepo makes a bare repository at dir/repo of object format format.
func bareRepo(t *testing.T, dir, format string) string {
	t.Helper()
	repo := filepath.Join(dir, "repo")
	if out, err := exec.Command("git", "init", "-q", "--bare", "--object-format="+format, repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	return repo
}

// TestWriteIndexAsGitDoes: the index paddock writes holds what git's
// update-index makes of the same lines, given an empty index or base's
// whole one, and git's diff of it is the same bytes; lines only git
// should judge are left to it.
func TestWriteIndexAsGitDoes(t *testing.T) {
	dir := t.TempDir()
	repo := bareRepo(t, dir, "sha1")
	blob := func(s string) string {
		return strings.TrimSpace(string(plainGit(t, repo, filepath.Join(dir, "none"), []byte(s), "hash-object", "-w", "--stdin")))
	}
	long := "l/" + strings.Repeat("x", 5000) // longer than an entry's length field holds
	gitlink := strings.Repeat("ab", 20)
	var baseInfo bytes.Buffer
	for _, e := range []struct{ mode, body, path string }{
		{"100644", "a\n", "a"}, {"100644", "a-b\n", "a-b"}, {"100644", "a.b\n", "a.b"}, {"100644", "ab\n", "a0/b"},
		{"100644", "f\n", "d/e/f"}, {"100755", "#!/bin/sh\n", "exec"}, {"120000", "a", "link"},
		{"100644", "sp\n", "sp ace"}, {"100644", "u\n", "\u00fc.txt"}, {"100644", "long\n", long}, {"100644", "\x00bin\x01\n", "bin.dat"},
	} {
		indexLine(&baseInfo, e.mode, blob(e.body), e.path)
	}
	indexLine(&baseInfo, "160000", gitlink, "sub")
	made := filepath.Join(dir, "made.index")
	plainGit(t, repo, made, baseInfo.Bytes(), "update-index", "-z", "--add", "--index-info")
	tree := strings.TrimSpace(string(plainGit(t, repo, made, nil, "write-tree")))
	base := strings.TrimSpace(string(plainGit(t, repo, made, nil, "commit-tree", "-m", "base", tree)))
	bt := newBaseTree(parseTree(plainGit(t, repo, made, nil, "ls-tree", "-r", "-z", "--full-tree", base)))
	if len(bt.entries) != 12 {
		t.Fatalf("base has %d entries", len(bt.entries))
	}
	zero := strings.Repeat("0", 40)
	lines := func(ls ...[3]string) []byte {
		var b bytes.Buffer
		for _, l := range ls {
			indexLine(&b, l[0], l[1], l[2])
		}
		return b.Bytes()
	}
	changed, other := blob("changed\n"), blob("other\n")
	for name, c := range map[string]struct {
		info []byte
		ok   bool // with base's whole index; with an empty one, all but a clash with base are
	}{
		"edits": {lines([3]string{"100644", changed, "a"}, [3]string{"0", zero, "a.b"}, [3]string{"100644", other, "n/m"},
			[3]string{"100644", changed, "exec"}, [3]string{"120000", other, "link"}, [3]string{"160000", strings.Repeat("cd", 20), "sub"},
			[3]string{"100755", changed, long}, [3]string{"100644", other, "z new"}), true},
		"git's own files":              {lines([3]string{"100644", changed, ".gitignore"}, [3]string{"100644", other, ".github/workflows/ci.yml"}, [3]string{"120000", other, "d/.gitattributes"}), true},
		"a directory made a file":      {lines([3]string{"0", zero, "d/e/f"}, [3]string{"100644", changed, "d/e"}), true},
		"a file made a directory":      {lines([3]string{"0", zero, "a"}, [3]string{"100644", changed, "a/x/y"}), true},
		"removals alone":               {lines([3]string{"0", zero, "a"}, [3]string{"0", zero, "never/there"}), true},
		"out of order":                 {lines([3]string{"100644", changed, "zz"}, [3]string{"100644", other, "aa"}), true},
		"a file under base's file":     {lines([3]string{"100644", changed, "a/b/c"}), false},
		"a file over base's directory": {lines([3]string{"100644", changed, "d"}), false},
		"a path twice":                 {lines([3]string{"100644", changed, "q"}, [3]string{"100644", other, "q"}), false},
		"a .git name":                  {lines([3]string{"100644", changed, "x/.GIT/config"}), false},
		"a backslash":                  {lines([3]string{"100644", changed, "x\\.git"}), false},
		"an empty name":                {lines([3]string{"100644", changed, "x//y"}), false},
		"a link's ~ name":              {lines([3]string{"120000", changed, "gitmod~1"}), false},
		"a tree's mode":                {lines([3]string{"40000", changed, "t"}), false},
		"a short id":                   {lines([3]string{"100644", changed[:39], "t"}), false},
	} {
		for _, whole := range []bool{false, true} {
			var from *baseTree
			if whole {
				from = bt
			}
			ours, theirs := filepath.Join(dir, "ours.index"), filepath.Join(dir, "theirs.index")
			os.Remove(ours)
			os.Remove(theirs)
			want := c.ok || (!whole && strings.Contains(name, "base's"))
			ok, err := writeIndex(ours, formatSHA1, from, c.info)
			if err != nil || ok != want {
				t.Fatalf("%s (whole %v): written %v, %v; want %v", name, whole, ok, err, want)
			}
			if !ok {
				if _, err := os.Stat(ours); err == nil {
					t.Errorf("%s: an index was written where git must stage", name)
				}
				continue
			}
			if whole {
				plainGit(t, repo, theirs, nil, "read-tree", base)
			}
			plainGit(t, repo, theirs, c.info, "update-index", "-z", "--index-info")
			for _, args := range [][]string{
				{"ls-files", "--stage", "-z"},
				{"diff", "--cached", "-z", "--raw", "--patch", "--binary", "--no-renames", "--full-index", base},
			} {
				want := plainGit(t, repo, theirs, nil, args...)
				if got := plainGit(t, repo, ours, nil, args...); !bytes.Equal(got, want) {
					t.Errorf("%s (whole %v): git %s of paddock's index:\n%q\nof git's:\n%q", name, whole, args[0], got, want)
				}
			}
		}
	}
}

// TestMayRefuseCoversGit: every path git's update-index refuses (of
// names made of what git's rules look for: .git, git~1, gitmodules and
// its short names, dots, spaces, colons, backslashes, an HFS+ ignored
// code point) is one mayRefuse leaves to git.
func TestMayRefuseCoversGit(t *testing.T) {
	dir := t.TempDir()
	repo := bareRepo(t, dir, "sha1")
	oid := strings.TrimSpace(string(plainGit(t, repo, filepath.Join(dir, "none"), []byte("x\n"), "hash-object", "-w", "--stdin")))
	tokens := []string{".", "..", ".git", ".GiT", "git~1", "GIT~1", "git~2", "gitmodules", ".gitmodules", "gitmod~1", "gi7eba~1", "GI7EB~9",
		"~", "1", "g", "i", "t", " ", ":", "$INDEX_ALLOCATION", "\\", "/", "a", "x", "\u200c", "\ufeff", "m",
		".gitignore", "hub", "ignore", "attributes", ".GITMODULES", "."}
	rng := rand.New(rand.NewPCG(7, 35))
	type try struct {
		path string
		link bool
	}
	var tries []try
	var info bytes.Buffer
	for i := range 20000 {
		var name strings.Builder
		for range 1 + rng.IntN(5) {
			name.WriteString(tokens[rng.IntN(len(tokens))])
		}
		// A directory of its own for each: no path a directory of another's.
		p := fmt.Sprintf("t%05d/%s", i, name.String())
		link := rng.IntN(2) == 0
		mode := "100644"
		if link {
			mode = "120000"
		}
		tries = append(tries, try{p, link})
		indexLine(&info, mode, oid, p)
	}
	index := filepath.Join(dir, "index")
	// With macOS's rules too: mayRefuse covers both.
	gitOut(repo, index, info.Bytes(), "-c", "core.protectHFS=true", "update-index", "-z", "--add", "--index-info") // it warns of what it refuses
	kept := map[string]bool{}
	for _, p := range strings.Split(string(plainGit(t, repo, index, nil, "ls-files", "-z")), "\x00") {
		kept[p] = true
	}
	refused, left := 0, 0
	for _, c := range tries {
		if kept[c.path] {
			continue
		}
		refused++
		if !mayRefuse(c.path, c.link) {
			t.Errorf("git refuses %q (link %v); mayRefuse does not", c.path, c.link)
		}
	}
	for _, c := range tries {
		if !mayRefuse(c.path, c.link) {
			left++
		}
	}
	if refused < 500 || left < 500 {
		t.Fatalf("of %d paths git refused %d and mayRefuse takes %d as given: want at least 500 of each", len(tries), refused, left)
	}
	t.Logf("of %d paths git refused %d; mayRefuse takes %d as given", len(tries), refused, left)
}

// TestVerifyWholeRefusesWhatWasNotStaged: git's entries of a diff of an
// index made of base's whole may name no path the index was not given
// (a file of base missing from the index shows deleted).
func TestVerifyWholeRefusesWhatWasNotStaged(t *testing.T) {
	s := &staged{present: map[string]bool{"a": true}, gone: []string{"g"}}
	raw := func(entries ...string) []byte { return []byte(strings.Join(entries, "\x00") + "\x00") }
	zero, one := strings.Repeat("0", 40), strings.Repeat("1", 40)
	if err := s.verify(raw(":100644 100644 "+one+" "+one+" M", "a", ":100644 000000 "+one+" "+zero+" D", "g"), true); err != nil {
		t.Errorf("what was staged: %v", err)
	}
	extra := raw(":100644 100644 "+one+" "+one+" M", "a", ":100644 000000 "+one+" "+zero+" D", "b")
	if err := s.verify(extra, true); err == nil {
		t.Error("a deletion the index was not given is taken")
	}
	if err := s.verify(extra, false); err != nil {
		t.Errorf("an index of the paths alone: %v", err)
	}
	// A file git deleted for a directory staged in its place, and the
	// other way round.
	s = &staged{present: map[string]bool{"f/x": true, "d": true}}
	if err := s.verify(raw(":100644 000000 "+one+" "+zero+" D", "d/y", ":100644 000000 "+one+" "+zero+" D", "f"), true); err != nil {
		t.Errorf("replaced: %v", err)
	}
	if err := s.verify(raw(":100644 100644 "+one+" "+one+" M", "f"), true); err == nil {
		t.Error("a change the index was not given is taken")
	}
}
