package main

import (
	"github.com/paddock-dev/paddock"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestRedforkPickAcrossProjects: pick puts together the files of sibling
// runs only. Two projects made from one repository share its commits, so
// a run of each is at the same base revision; a pick that mixes them, or
// writes one project's run's files --into the other's, takes files across
// a project boundary (another policy, other protections, other
// operators' review) and must be refused, as runs at different bases are.
func TestRedforkPickAcrossProjects(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	home := filepath.Join(base, "home")
	src := filepath.Join(base, "src", "calc")
	gittest.NewRepo(t, src, map[string]string{"README.md": "hi\n"})
	startDaemon(t, home)
	cli(t, home, "project", "add", src).must(t)
	// A clone of it, declared as another project: the same commits.
	src2 := filepath.Join(base, "src", "other")
	if out, err := exec.Command("git", "clone", "-q", src, src2).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v %s", err, out)
	}
	cli(t, home, "project", "add", src2, "--name", "other").must(t)
	a := strings.TrimSpace(cli(t, home, "create", "-p", "calc", "--kind", "clone").must(t).out)
	b := strings.TrimSpace(cli(t, home, "create", "-p", "other", "--kind", "clone").must(t).out)
	cli(t, home, "exec", a, "--", "sh", "-c", "echo from-calc > a.txt").must(t)
	cli(t, home, "exec", b, "--", "sh", "-c", "echo from-other > b.txt").must(t)

	if r := cli(t, home, "pick", a+":a.txt", "--into", b); r.code == 0 {
		t.Errorf("pick from project calc's run %s --into project other's run %s succeeded:\n%s", a, b, r.out)
	}
	if r := cli(t, home, "pick", a+":a.txt", b+":b.txt"); r.code == 0 {
		t.Errorf("pick mixing runs of projects calc and other succeeded (the new run: %s)", strings.TrimSpace(r.out))
	}
}

// TestRedforkPickLeavesNoRunOnFailure: a pick that fails after it made
// its new run (here: two siblings made "x" a file and a directory, and the
// second write cannot land) must not leave a half-filled run behind for
// someone to review as if whole.
func TestRedforkPickLeavesNoRunOnFailure(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	home := filepath.Join(base, "home")
	src := filepath.Join(base, "src", "calc")
	gittest.NewRepo(t, src, map[string]string{"README.md": "hi\n"})
	startDaemon(t, home)
	cli(t, home, "project", "add", src).must(t)
	a := strings.TrimSpace(cli(t, home, "create", "-p", "calc", "--kind", "clone").must(t).out)
	b := strings.TrimSpace(cli(t, home, "create", "-p", "calc", "--kind", "clone").must(t).out)
	cli(t, home, "exec", a, "--", "sh", "-c", "echo 1 > x").must(t)
	cli(t, home, "exec", b, "--", "sh", "-c", "mkdir x; echo 2 > x/y").must(t)
	before := cli(t, home, "ls", "--json").must(t).out
	r := cli(t, home, "pick", a+":x", b+":x/y")
	if r.code == 0 {
		t.Skipf("the pick went through: %s", r.out)
	}
	after := cli(t, home, "ls", "--json").must(t).out
	if n, m := strings.Count(before, `"id": "r-`), strings.Count(after, `"id": "r-`); n != m {
		t.Fatalf("a failed pick (%d: %s) left a new run behind: %d runs before, %d after", r.code, strings.TrimSpace(r.err), n, m)
	}
}

// TestRedforkPickSecretEncodings: pick refuses a file holding a declared
// secret's value (it cannot be copied exactly, and the new run is given
// no secret). The labeller finds the value plain, base64 (any alignment),
// hex and past 4 MiB; reversed, gzipped, base32 or split by a newline it
// does not, and pick carries the secret into a run never given it.
func TestRedforkPickSecretEncodings(t *testing.T) {
	t.Parallel()
	home, _ := reviewDaemon(t)
	os.WriteFile(filepath.Join(home, "secrets", "API_TOKEN"), []byte(contractSecret+"\n"), 0o600)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--secret", "API_TOKEN").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf '%s' "$API_TOKEN" | base64 > b64.txt; printf '%s' "$API_TOKEN" | od -An -tx1 | tr -d ' \n' > hex.txt; head -c 4194300 /dev/zero | tr '\0' a > big.txt; printf '%s\n' "$API_TOKEN" >> big.txt
printf 'x%s' "$API_TOKEN" | base64 -w0 > b64s1.txt; printf 'xy%s' "$API_TOKEN" | base64 -w0 > b64s2.txt
printf '%s' "$API_TOKEN" | rev > rev.txt; printf '%s' "$API_TOKEN" | gzip -n > gz.bin
printf '%s' "$API_TOKEN" | base32 > b32.txt
printf '%s' "$API_TOKEN" | sed 's/./&\n/8' > split.txt; printf '%s' "$API_TOKEN" | od -An -tx1 | tr -d ' \n' | tr a-f A-F > HEX.txt`).must(t)
	for _, f := range []string{"b64.txt", "hex.txt", "big.txt", "b64s1.txt", "b64s2.txt", "rev.txt", "gz.bin", "b32.txt", "split.txt", "HEX.txt"} {
		r := cli(t, home, "pick", id+":"+f)
		t.Logf("pick %s: %d %s", f, r.code, strings.TrimSpace(r.err))
		if r.code == 0 {
			t.Errorf("pick copied %s, which holds API_TOKEN's value, into run %s (given no secret)", f, strings.TrimSpace(r.out))
		}
	}
}

// TestRedforkPickOddPaths: files with odd names (a leading dash, a space,
// a colon, a newline, a backslash, non-ASCII) are picked byte for byte,
// and a selector that climbs out (RUN:../x) or names nothing is refused.
func TestRedforkPickOddPaths(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	home := filepath.Join(base, "home")
	src := filepath.Join(base, "src", "calc")
	gittest.NewRepo(t, src, map[string]string{"README.md": "hi\n"})
	startDaemon(t, home)
	cli(t, home, "project", "add", src).must(t)
	a := strings.TrimSpace(cli(t, home, "create", "-p", "calc", "--kind", "clone").must(t).out)
	names := []string{"-rf", "a b.txt", "c:d.txt", "new\nline.txt", `back\slash.txt`, "ü/é.txt"}
	for _, n := range names {
		cli(t, home, "tool", a, "write", "--arg", "path="+n, "--arg", "content="+n).must(t)
	}
	for _, n := range names {
		r := cli(t, home, "pick", a+":"+n)
		if r.code != 0 {
			t.Errorf("pick %q: %d %s", n, r.code, r.err)
		}
	}
	for _, sel := range []string{"../x", "../" + filepath.Base(src) + "/README.md", "/etc/passwd"} {
		if r := cli(t, home, "pick", a+":"+sel); r.code == 0 {
			t.Errorf("pick %q went through: %s", sel, r.out)
		}
	}
}

// TestRedforkPickIntoReviewRun: a review run holds a submitted change
// set for a reviewer to read; pick --into it must not change that set.
func TestRedforkPickIntoReviewRun(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	home := filepath.Join(base, "home")
	src := filepath.Join(base, "src", "calc")
	gittest.NewRepo(t, src, map[string]string{"README.md": "hi\n"})
	startDaemon(t, home)
	cli(t, home, "project", "add", src).must(t)
	a := strings.TrimSpace(cli(t, home, "create", "-p", "calc", "--kind", "clone").must(t).out)
	b := strings.TrimSpace(cli(t, home, "create", "-p", "calc", "--kind", "clone").must(t).out)
	cli(t, home, "exec", a, "--", "sh", "-c", "echo a > a.txt").must(t)
	cli(t, home, "exec", b, "--", "sh", "-c", "echo b > b.txt").must(t)
	cli(t, home, "submit", a).must(t)
	rv := decode[paddock.Run](t, cli(t, home, "review", a, "--json"))
	before := decode[paddock.ChangeSet](t, cli(t, home, "diff", rv.ID, "--json")).Hash
	r := cli(t, home, "pick", b+":b.txt", "--into", rv.ID)
	after := decode[paddock.ChangeSet](t, cli(t, home, "diff", rv.ID, "--json")).Hash
	if r.code == 0 || before != after {
		t.Fatalf("pick into review run %s: %d %s; its change set changed: %v", rv.ID, r.code, strings.TrimSpace(r.err), before != after)
	}
}
