package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/internal/paddockcli"
	"github.com/paddock-dev/paddock/manifest"
)

// TestToolArgsBySchema: --arg values are typed by the tool's schema, not
// guessed from how they look, and --arg-file and --args - carry content
// too large or too awkward for a command line.
func TestToolArgsBySchema(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cat := func(path string) string {
		t.Helper()
		return cli(t, home, "exec", id, "--", "cat", path).must(t).out
	}

	// A string field takes what looks like a number, a boolean or JSON as text.
	for _, v := range []string{"42", "true", `{"a":1}`, `"quoted"`, "[1, 2]"} {
		cli(t, home, "tool", id, "write", "--arg", "path=v.txt", "--arg", "content="+v).must(t)
		if got := cat("v.txt"); got != v {
			t.Fatalf("--arg content=%s wrote %q", v, got)
		}
	}
	// Integer and boolean fields are parsed, and a value that is neither is refused here.
	cli(t, home, "tool", id, "write", "--arg", "path=lines.txt", "--arg", "content=a\nb\nc\n").must(t)
	if out := cli(t, home, "tool", id, "read", "--arg", "path=lines.txt", "--arg", "offset=2", "--arg", "limit=1").must(t).out; !strings.Contains(out, `"content": "b\n"`) {
		t.Fatalf("read with integer args: %s", out)
	}
	cli(t, home, "tool", id, "read", "--arg", "path=lines.txt", "--arg", "limit=ten").wantCode(t, exitUsage, "not an integer")
	cli(t, home, "tool", id, "write", "--arg", "path=t.txt", "--arg", "content=true").must(t)
	if out := cli(t, home, "tool", id, "grep", "--arg", "pattern=true", "--arg", "literal=true").must(t).out; !strings.Contains(out, "t.txt") {
		t.Fatalf("grep for the text true: %s", out)
	}
	cli(t, home, "tool", id, "grep", "--arg", "pattern=x", "--arg", "literal=yes").wantCode(t, exitUsage, "not true or false")
	cli(t, home, "tool", id, "write", "--arg", "path=a", "--arg", "path=b").wantCode(t, exitUsage, "given already")

	// --arg-file: text for a string field, bytes for a base64 one.
	big := strings.Repeat("0123456789abcde\n", 40<<10) // 640 KiB: past one argument's limit
	bigFile := filepath.Join(base, "big.txt")
	os.WriteFile(bigFile, []byte(big), 0o644)
	cli(t, home, "tool", id, "write", "--arg", "path=big.txt", "--arg-file", "content="+bigFile).must(t)
	if out := cli(t, home, "exec", id, "--", "wc", "-c", "big.txt").must(t).out; out != strconv.Itoa(len(big))+" big.txt\n" {
		t.Fatalf("wc -c big.txt: %q", out)
	}
	bin := filepath.Join(base, "bin")
	os.WriteFile(bin, []byte{0xff, 0x00, 0xfe, 'x'}, 0o644)
	cli(t, home, "tool", id, "write", "--arg", "path=bin", "--arg-file", "content="+bin).wantCode(t, exitUsage, "--arg-file content_base64=PATH")
	cli(t, home, "tool", id, "write", "--arg", "path=bin", "--arg-file", "content_base64="+bin).must(t)
	if out := cli(t, home, "exec", id, "--", "od", "-An", "-tx1", "bin").must(t).out; strings.Join(strings.Fields(out), "") != "ff00fe78" {
		t.Fatalf("bin holds %q", out)
	}
	cli(t, home, "tool", id, "write", "--arg", "path=x", "--arg-file", "content="+filepath.Join(base, "missing")).wantCode(t, exitUsage, "no such file")

	// --args -: the whole object on stdin; and --arg-file k=- reads stdin.
	in := strings.NewReader(`{"path":"s.txt","content":"from stdin\n"}`)
	cliIn(context.Background(), t, home, in, "tool", id, "write", "--args", "-").must(t)
	if got := cat("s.txt"); got != "from stdin\n" {
		t.Fatalf("--args - wrote %q", got)
	}
	cliIn(context.Background(), t, home, strings.NewReader("piped\n"), "tool", id, "write", "--arg", "path=p.txt", "--arg-file", "content=-").must(t)
	if got := cat("p.txt"); got != "piped\n" {
		t.Fatalf("--arg-file content=- wrote %q", got)
	}
	cliIn(context.Background(), t, home, strings.NewReader("[1]"), "tool", id, "write", "--args", "-").wantCode(t, exitUsage, "one JSON object")
}

// TestExecStdin: exec gives the command the CLI's stdin when it is not a
// terminal (bounded, and recorded by size only), and a command line
// written without -- says how to write it.
func TestExecStdin(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	for _, kind := range []string{"auto", "clone"} {
		id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", kind).must(t).out)
		data := bytes.Repeat([]byte("stdin-marker-0123456789\n"), 3<<17) // 9 MiB
		r := cliIn(context.Background(), t, home, bytes.NewReader(data), "exec", id, "--", "sh", "-c", "wc -c; echo end")
		if r.code != 0 || strings.Fields(r.out)[0] != strconv.Itoa(len(data)) {
			t.Fatalf("%s: wc -c of %d bytes of stdin: exit %d %q %s", kind, len(data), r.code, r.out, r.err)
		}
		if r := cliIn(context.Background(), t, home, strings.NewReader("hello\n"), "exec", id, "--", "tr", "a-z", "A-Z").must(t); r.out != "HELLO\n" {
			t.Fatalf("%s: tr of stdin: %q", kind, r.out)
		}
		if r := cliIn(context.Background(), t, home, strings.NewReader("unread\n"), "exec", "--stdin=false", id, "--", "cat").must(t); r.out != "" {
			t.Fatalf("%s: --stdin=false still gave stdin: %q", kind, r.out)
		}
		// A command that reads none of it ends as it would.
		cliIn(context.Background(), t, home, bytes.NewReader(data), "exec", id, "--", "true").must(t)
		evs := cli(t, home, "events", id, "--json").must(t).out
		if strings.Contains(evs, "stdin-marker") || !strings.Contains(evs, `"stdin_bytes":`+strconv.Itoa(len(data))) {
			t.Fatalf("%s: the exec events record stdin's content, or not its size", kind)
		}
		over := bytes.Repeat([]byte("x"), 16<<20+1)
		cliIn(context.Background(), t, home, bytes.NewReader(over), "exec", id, "--", "true").wantCode(t, execFailed, "more than an exec takes (16 MiB)")
		// A job keeps its request in state: it takes no stdin.
		_, err := client.Unix(paddockcli.SocketPath(home)).StartJob(context.Background(), id, paddock.StartJobRequest{Kind: paddock.JobExec,
			Exec: &paddock.ExecRequest{Argv: []string{"cat"}, Stdin: []byte("x")}})
		if paddock.ErrorCode(err) != paddock.CodeBadRequest {
			t.Fatalf("%s: a job with stdin: %v", kind, err)
		}
		cli(t, home, "reject", id).must(t)
	}
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "ls", "-la").wantCode(t, execFailed, "-- ls -la")
	cli(t, home, "exec", id).wantCode(t, execFailed, "exec needs a command")
	cli(t, home, "exec", id, "--").wantCode(t, execFailed, "exec needs a command")
	if out := cli(t, home, "exec", id, "echo", "no-dash").must(t).out; out != "no-dash\n" {
		t.Fatalf("a command without flags needs no --: %q", out)
	}
}

// TestErrorsHaveOnePrefix: whatever fails, the CLI prints "paddock: " once;
// the client's errors carry no prefix of their own (here a daemon that
// closes every connection without an answer).
func TestErrorsHaveOnePrefix(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "token"), []byte("tok\n"), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			c.Read(buf)
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	for _, args := range [][]string{
		{"ls"}, {"show", "r-x"}, {"exec", "r-x", "--", "true"}, {"exec", "r-x", "--json", "--", "true"},
		{"diff", "r-x"}, {"events", "r-x"}, {"tool", "r-x", "read", "--arg", "path=x"}, {"approve", "r-x", "--hash", "x"},
	} {
		r := cli(t, home, append([]string{"--addr", addr}, args...)...)
		if r.code == 0 || !strings.HasPrefix(r.err, "paddock: ") || strings.Count(r.err, "paddock:") != 1 {
			t.Errorf("paddock %s: exit %d, stderr %q: want one paddock: prefix", strings.Join(args, " "), r.code, r.err)
		}
		t.Logf("paddock %s: %s", strings.Join(args, " "), r.err)
	}
}

// TestCreateOnADirtyCheckout: a run starts at its base revision, so the
// checkout's uncommitted changes are not in it; create says so on stderr
// (and not when there are none), without touching the project.
func TestCreateOnADirtyCheckout(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	// (Progress lines may come first on a loaded machine: the snapshot
	// takes longer than the first look at it.)
	if r := cli(t, home, "create", "-p", "app").must(t); strings.Contains(r.err, "uncommitted") || strings.Contains(r.err, "not in it") {
		t.Fatalf("create on a clean checkout says: %s", r.err)
	}
	os.WriteFile(filepath.Join(repo, "README.md"), []byte("edited, not committed\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "notes.txt"), []byte("untracked\n"), 0o644)
	before, lines := gittest.TreeDigest(t, repo)
	r := cli(t, home, "create", "-p", "app", "--kind", "clone").must(t)
	id := strings.TrimSpace(r.out)
	for _, want := range []string{"starts at the base revision (HEAD = ", "2 uncommitted change(s) in " + repo, "not in it"} {
		if !strings.Contains(r.err, want) {
			t.Fatalf("create on a dirty checkout: stderr misses %q:\n%s", want, r.err)
		}
	}
	if !strings.HasPrefix(id, "r-") || strings.Contains(id, "\n") {
		t.Fatalf("stdout is no longer just the run id: %q", r.out)
	}
	if out := cli(t, home, "exec", id, "--", "cat", "README.md").must(t).out; out != "hello\n" {
		t.Fatalf("the run has %q: the note is wrong", out)
	}
	gittest.RequireIdentical(t, repo, before, lines)
	if r := cli(t, home, "create", "-p", "app", "--access", "none").must(t); r.err != "" {
		t.Fatalf("a run without a workspace gets the note: %s", r.err)
	}
}

// TestOverlayRunIsNotAHostPath: an overlay workspace's root holds only
// its upper and work layers on the host; ls and show say where the view
// is (inside the sandbox) instead of printing that path as the workspace,
// and --json names the layers.
func TestOverlayRunIsNotAHostPath(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	r := cli(t, home, "create", "-p", "app", "--kind", "overlay")
	if r.code == exitUnsupported {
		t.Skipf("no overlay workspaces here: %s", r.err)
	}
	id := strings.TrimSpace(r.must(t).out)
	run := decode[*paddock.Run](t, cli(t, home, "show", id, "--json"))
	w := run.Workspace
	l := w.OverlayLayers
	if l == nil || l.Upper != filepath.Join(w.Root, "upper") || l.Work != filepath.Join(w.Root, "work") || !strings.HasPrefix(l.Lower, home) {
		t.Fatalf("overlay_layers = %+v (root %s)", l, w.Root)
	}
	if _, err := os.Stat(filepath.Join(l.Lower, "README.md")); err != nil {
		t.Fatalf("the lower layer is not the base's snapshot: %v", err)
	}
	ls := cli(t, home, "ls").must(t).out
	show := cli(t, home, "show", id).must(t).out
	if strings.Contains(ls, w.Root) || !strings.Contains(ls, "overlay (seen inside the run's sandbox)") {
		t.Fatalf("ls shows the overlay run's host directory as its workspace:\n%s", ls)
	}
	if !strings.Contains(show, " overlay (seen inside the run's sandbox) at "+w.Root+"\n") || !strings.Contains(show, "upper layer:") || !strings.Contains(show, l.Upper) {
		t.Fatalf("show:\n%s", show)
	}
	// A clone's workspace is a host path, shown as one.
	clone := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
	cw := runState(t, home, clone).Workspace
	if cw.OverlayLayers != nil || !strings.Contains(cli(t, home, "ls").must(t).out, cw.Root) {
		t.Fatalf("a clone's workspace: %+v", cw)
	}
}

// TestShortSecretIsRefused: a declared secret too short to be masked is
// refused where a run declares it (create, bootstrap) and where it would be
// injected (exec, when its value shrank since), with an error that names
// the rule and never the value; it is not handed over unmasked.
func TestShortSecretIsRefused(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	secrets := filepath.Join(home, "secrets")
	os.MkdirAll(secrets, 0o700)
	os.WriteFile(filepath.Join(secrets, "PIN"), []byte("735\n"), 0o600)
	os.WriteFile(filepath.Join(secrets, "TOKEN"), []byte("long-enough-token\n"), 0o600)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	r := cli(t, home, "create", "-p", "app", "--secret", "PIN")
	r.wantCode(t, exitUsage, "secret PIN is shorter than 4 characters")
	if strings.Contains(r.err, "735") || !strings.Contains(r.err, "rule: secret_too_short") {
		t.Fatalf("the refusal tells the value or not the rule:\n%s", r.err)
	}
	_, err := client.Unix(paddockcli.SocketPath(home)).Bootstrap(context.Background(), paddock.BootstrapRequest{Project: "app", Task: "t",
		Agent: paddock.AgentDefinition{Name: "a", Secrets: []string{"PIN"}}})
	if paddock.ErrorCode(err) != paddock.CodeBadRequest || !strings.Contains(paddock.ErrorMessage(err), "too short to be masked") {
		t.Fatalf("bootstrap with a short secret: %v", err)
	}
	if runs := decode[[]*paddock.Run](t, cli(t, home, "ls", "--json")); len(runs) != 0 {
		t.Fatalf("a refused secret left runs: %d", len(runs))
	}
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--secret", "TOKEN").must(t).out)
	os.WriteFile(filepath.Join(secrets, "TOKEN"), []byte("ab\n"), 0o600)
	r = cli(t, home, "exec", id, "--", "sh", "-c", `echo "[$TOKEN]"`)
	r.wantCode(t, execFailed, "secret TOKEN is shorter than 4 characters")
	if strings.Contains(r.out, "[ab]") {
		t.Fatalf("an unmaskable secret reached a command and its output: %q", r.out)
	}
}

// TestShowJobsAndPlan: show says where a run's jobs stand (idle before the
// first) and the plan its agent gave last, given with paddock tool plan.
func TestShowJobsAndPlan(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
	show := cli(t, home, "show", id).must(t).out
	if !strings.Contains(show, "jobs:            idle\n") || strings.Contains(show, "plan:") {
		t.Fatalf("show of a run with no job and no plan:\n%s", show)
	}
	cli(t, home, "tool", id, "plan", "--args", `{"explanation":"two steps","steps":[{"step":"read the code","status":"completed"},{"step":"fix \u001b[31mparse","status":"in_progress"},{"step":"verify","status":"pending"}]}`).must(t)
	show = cli(t, home, "show", id).must(t).out
	for _, want := range []string{"plan:            revision 1, ", "  two steps\n", "  [x] read the code\n", "  [ ] verify\n", "  [>] fix "} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	if strings.Contains(show, "\x1b") {
		t.Errorf("show printed the plan's escape sequence raw:\n%q", show)
	}
}

// TestVerifyHelpNamesItsDefault: what `paddock verify --help` (and the
// verb's line in `paddock --help`) says runs when no check is named is
// what the daemon runs then, manifest.VerifyOrder.
func TestVerifyHelpNamesItsDefault(t *testing.T) {
	home := t.TempDir()
	byDefault := regexp.MustCompile(`([a-z-]+(?:, [a-z-]+)*(?:,? and [a-z-]+)?) by default`)
	for _, args := range [][]string{{"verify", "--help"}, {"--help"}} {
		out := cli(t, home, args...).must(t).out
		if args[0] == "--help" {
			i := strings.Index(out, "\n  verify ")
			if i < 0 {
				t.Fatalf("paddock --help lists no verify:\n%s", out)
			}
			out, _, _ = strings.Cut(out[i+1:], "\n")
		}
		m := byDefault.FindStringSubmatch(out)
		if m == nil {
			t.Errorf("%v does not say which checks run by default:\n%s", args, out)
			continue
		}
		named := strings.FieldsFunc(strings.ReplaceAll(m[1], " and ", ","), func(r rune) bool { return r == ',' || r == ' ' })
		if !slices.Equal(named, manifest.VerifyOrder) {
			t.Errorf("%v says %v run by default; the daemon runs %v", args, named, manifest.VerifyOrder)
		}
	}
}
