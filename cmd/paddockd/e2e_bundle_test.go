package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
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
	startDaemon(t, homeB)
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
