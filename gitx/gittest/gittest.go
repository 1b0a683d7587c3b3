// Package gittest builds git repositories for tests and fingerprints whole
// trees, .git included, for the byte-identical checks.
package gittest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Git runs git in dir for a test with a fixed identity and no user config, and
// fails the test on error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = plainEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// NewRepo makes a repository at dir (created if needed) holding files, with
// one commit on branch main, and returns dir.
func NewRepo(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	Git(t, dir, "init", "--quiet", "--initial-branch=main")
	Commit(t, dir, "initial", files)
	return dir
}

// Commit writes files (content "" with a trailing "/" in the name makes a
// directory) and commits everything.
func Commit(t testing.TB, dir, msg string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "--quiet", "--allow-empty", "-m", msg)
}

// TreeDigest hashes every entry under root, .git included: path, type,
// permission bits, and content or link target. Two trees with the same digest
// are byte-identical for the purposes of the rejection invariant. The second
// result lists the entries, for a readable diff when digests differ.
func TreeDigest(t testing.TB, root string) (string, []string) {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var content string
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			content = "-> " + target
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			content = hex.EncodeToString(h.Sum(nil))[:16]
		}
		lines = append(lines, fmt.Sprintf("%s %v %s", rel, fi.Mode(), content))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	h := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(h[:]), lines
}

// DiffLines returns the entries only in a and only in b.
func DiffLines(a, b []string) (onlyA, onlyB []string) {
	in := func(xs []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	for _, x := range a {
		if !mb[x] {
			onlyA = append(onlyA, x)
		}
	}
	for _, x := range b {
		if !ma[x] {
			onlyB = append(onlyB, x)
		}
	}
	return onlyA, onlyB
}

// RequireIdentical fails the test if root's digest differs from before.
func RequireIdentical(t testing.TB, root, beforeDigest string, beforeLines []string) {
	t.Helper()
	after, lines := TreeDigest(t, root)
	if after != beforeDigest {
		a, b := DiffLines(beforeLines, lines)
		t.Fatalf("%s changed:\n only before: %v\n only after: %v", root, a, b)
	}
}
