package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
)

// TestExecEndToEnd runs confined commands through the CLI against a real
// daemon (which, as root, runs them as uid 65534).
func TestExecEndToEnd(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 3)
	d := startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	if out := cli(t, home, "doctor").out; !strings.Contains(out, "sandbox") {
		t.Fatalf("doctor: %s", out)
	}
	if r := cli(t, home, "doctor", "--json"); !strings.Contains(r.out, `"name": "sandbox"`) || strings.Contains(r.out, `"status": "fail"`) {
		if os.Getenv("CI") == "true" || !strings.Contains(r.out, "unsupported") {
			t.Fatalf("the sandbox does not work here:\n%s", r.out)
		}
		t.Skipf("the sandbox cannot run here:\n%s", r.out)
	}
	// A clone: its workspace is a host directory the test can look into.
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
	r := cli(t, home, "exec", id, "--", "sh", "-c", "echo hi; cat README.md; echo made > made.txt; echo oops >&2")
	if r.code != 0 || r.out != "hi\nhello\n" || r.err != "oops\n" {
		t.Fatalf("exec: exit %d\n%s\n%s", r.code, r.out, r.err)
	}
	run := decode[*paddock.Run](t, cli(t, home, "show", id, "--json"))
	if b, _ := os.ReadFile(filepath.Join(run.Workspace.Root, "made.txt")); string(b) != "made\n" {
		t.Fatal("the command's write did not land in the workspace")
	}
	if r := cli(t, home, "exec", id, "--output", "100", "--", "sh", "-c", "yes | head -c 100000"); r.code != 0 || len(r.out) != 100 || !strings.Contains(r.err, "cut at the limit") {
		t.Fatalf("output limit: exit %d, %d bytes", r.code, len(r.out))
	}
	if r := cli(t, home, "exec", id, "--timeout", "300ms", "--", "sleep", "30"); r.code == 0 || !strings.Contains(r.err, "time limit") {
		t.Fatalf("wall limit: exit %d %s", r.code, r.err)
	}
	cli(t, home, "exec", id, "--cpu", "soon", "--", "true").wantCode(t, execFailed, "cpu limit")
	if r := cli(t, home, "exec", id, "--", "sh", "-c", "exit 7"); r.code != 7 {
		t.Fatalf("exit code passthrough: %d", r.code)
	}
	if r := cli(t, home, "exec", id, "--", "no-such-command"); r.code != execNotFound {
		t.Fatalf("missing command: %d %s", r.code, r.err)
	}
	// The clone's .git is the run's own git; the project's is out of reach.
	projectConfig, _ := os.ReadFile(filepath.Join(repo, ".git", "config"))
	if r := cli(t, home, "exec", id, "--", "sh", "-c", "echo '[core]' >> .git/config && git status --short && cat "+repo+"/README.md"); r.code == 0 || r.out == "" {
		t.Fatalf("the run's git, or the project's path: exit %d %q %q", r.code, r.out, r.err)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, ".git", "config")); string(b) != string(projectConfig) {
		t.Fatal("the project's .git/config changed")
	}
	var res struct {
		ExitCode    int `json:"exit_code"`
		Enforcement struct {
			Namespaces []string `json:"namespaces"`
			Landlock   int      `json:"landlock_abi"`
			Seccomp    bool     `json:"seccomp"`
			UID        int      `json:"uid"`
			Net        string   `json:"net"`
			Mode       string   `json:"mode"`
			HarnessPID int      `json:"harness_pid"`
		} `json:"enforcement"`
	}
	execJSON := func(id string, argv ...string) {
		t.Helper()
		res.Enforcement.HarnessPID = 0
		if err := json.Unmarshal([]byte(cli(t, home, append([]string{"exec", id, "--json", "--"}, argv...)...).must(t).out), &res); err != nil {
			t.Fatal(err)
		}
	}
	execJSON(id, "id", "-u")
	e := res.Enforcement
	if res.ExitCode != 0 || e.Landlock < 6 || !e.Seccomp || e.UID == 0 || e.Net != "none" || len(e.Namespaces) != 6 {
		t.Fatalf("enforcement: %+v", res)
	}
	// Every command of the run is forked from the run's one harness.
	if e.Mode != "resident" || e.HarnessPID == 0 {
		t.Fatalf("not run through a harness: %+v", e)
	}
	// Every exec is recorded with what it got.
	evs := decodeLines(t, cli(t, home, "events", id, "--json").must(t).out)
	execs, enforced := 0, 0
	for _, ev := range evs {
		switch ev.Type {
		case "exec":
			execs++
		case "sandbox.enforced":
			enforced++
		}
	}
	if execs != 7 || enforced != 6 { // the missing command never reached the sandbox
		t.Fatalf("%d exec and %d sandbox.enforced events", execs, enforced)
	}

	// An allow-list network: a name off the list is refused by the proxy,
	// and the decision is an event.
	if r := cli(t, home, "exec", id, "--net", "allow=.example.org", "--", "curl", "-sS", "-f", "--max-time", "10", "http://denied.example.com/"); r.code == 0 {
		t.Fatalf("a name off the allow-list was reached: %s", r.out)
	}
	cli(t, home, "exec", id, "--net", "allow=not a domain", "--", "true").wantCode(t, execFailed, "not a domain name")
	found := false
	for _, ev := range decodeLines(t, cli(t, home, "events", id, "--json").must(t).out) {
		if ev.Type == "network.connection" && strings.Contains(string(ev.Data), `"host":"denied.example.com"`) && strings.Contains(string(ev.Data), `"allowed":false`) {
			found = true
		}
	}
	if !found {
		t.Fatal("the proxy's refusal was not recorded")
	}

	// The harness outlives a daemon killed with -9: the next daemon
	// re-attaches to it; reject gives it back.
	execJSON(id, "true") // the allow-list command above had a harness of its own
	harness := res.Enforcement.HarnessPID
	d.kill9()
	startDaemon(t, home)
	cli(t, home, "resume", id).must(t)
	execJSON(id, "true")
	if res.Enforcement.HarnessPID != harness || res.Enforcement.Mode != "resident" {
		t.Fatalf("after kill -9 the run's harness is %d (%s), was %d", res.Enforcement.HarnessPID, res.Enforcement.Mode, harness)
	}
	cli(t, home, "reject", id).must(t)
	for end := time.Now().Add(5 * time.Second); syscall.Kill(harness, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", harness)); strings.Contains(string(b), ") Z ") || time.Now().After(end) {
			if time.Now().After(end) {
				t.Fatal("reject left the run's harness running")
			}
			break
		}
	}

	ro := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--access", "read").must(t).out)
	// A read run's commands write a throwaway layer: it works, and is gone.
	if r := cli(t, home, "exec", ro, "--", "sh", "-c", "cat README.md && touch new && ls new"); r.code != 0 || !strings.Contains(r.out, "hello") {
		t.Fatalf("read run: exit %d %s %s", r.code, r.out, r.err)
	}
	if r := cli(t, home, "exec", ro, "--", "ls", "new"); r.code == 0 {
		t.Fatal("a read run's write outlived its command")
	}
	none := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--access", "none").must(t).out)
	if r := cli(t, home, "exec", none, "--", "true"); r.code != execFailed || !strings.Contains(r.err, "no workspace") {
		t.Fatalf("none run: %d %s", r.code, r.err)
	}
}

// TestRootlessDaemon runs the daemon as an unprivileged user, as it should
// be deployed: it makes workspaces and confines commands through user
// namespaces alone.
func TestRootlessDaemon(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the other tests already run the daemon unprivileged; this one needs root to become another user")
	}
	const nobody = 65534
	base := t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(filepath.Dir(base), 0o755)
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 3)
	filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, nobody, nobody)
		}
		return nil
	})
	startDaemonAs(t, home, &syscall.Credential{Uid: nobody, Gid: nobody})
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
	r := cli(t, home, "exec", id, "--", "sh", "-c", "id -u; echo x > made; cat /etc/shadow")
	if r.out != "65534\n" || r.code == 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.out, r.err)
	}
	run := decode[*paddock.Run](t, cli(t, home, "show", id, "--json"))
	if _, err := os.Stat(filepath.Join(run.Workspace.Root, "made")); err != nil {
		t.Fatal("the command's write did not land")
	}
	cli(t, home, "reject", id).must(t)

	// The default kind: an unprivileged daemon mounts overlays inside the
	// sandbox's user namespace only.
	id = strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	if k := decode[*paddock.Run](t, cli(t, home, "show", id, "--json")).Workspace.Kind; k != paddock.KindOverlay {
		t.Fatalf("an unprivileged daemon's default kind here is %s, want overlay", k)
	}
	cli(t, home, "exec", id, "--", "sh", "-c", "echo x > made").must(t)
	if r := cli(t, home, "tool", id, "read", "--arg", "path=made"); r.code != 0 || !strings.Contains(r.out, "x") {
		logb, _ := os.ReadFile(filepath.Join(home, "test-daemon.log"))
		t.Fatalf("a tool of the overlay run does not see the command's write: %d %s %s\n%s", r.code, r.out, r.err, logb)
	}
	if r := cli(t, home, "diff", id, "--stat"); r.code != 0 || !strings.Contains(r.out, "made") {
		t.Fatalf("diff of the overlay run: %d %s %s", r.code, r.out, r.err)
	}
	cli(t, home, "reject", id).must(t)
}

// TestSecrets: a declared secret reaches the run's commands and never
// appears unmasked in what paddock returns or records; an undeclared one
// does not reach them at all.
func TestSecrets(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	os.MkdirAll(filepath.Join(home, "secrets"), 0o700)
	const value = "tok-5e3f9a1c-very-secret"
	os.WriteFile(filepath.Join(home, "secrets", "API_TOKEN"), []byte(value+"\n"), 0o600)
	os.WriteFile(filepath.Join(home, "secrets", "OTHER"), []byte("other-secret-value"), 0o600)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	cli(t, home, "create", "-p", "app", "--secret", "MISSING").wantCode(t, exitUsage, "no secret named MISSING")
	cli(t, home, "create", "-p", "app", "--secret", "bad name").wantCode(t, exitUsage, "secret name")
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--secret", "API_TOKEN").must(t).out)
	r := cli(t, home, "exec", id, "--", "sh", "-c", `echo "$API_TOKEN"; printf %s "$API_TOKEN" | base64; echo "other=$OTHER"; test -n "$API_TOKEN"`)
	if r.code != 0 || strings.Contains(r.out, value) || strings.Count(r.out, "[REDACTED:API_TOKEN]") != 2 || !strings.Contains(r.out, "other=\n") {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
	cli(t, home, "exec", id, "--", "echo", value).must(t)
	// Credential shapes are masked whoever they belong to, streamed or not.
	shape := "ghp_" + strings.Repeat("A", 36)
	if r := cli(t, home, "exec", id, "--", "echo", shape); strings.Contains(r.out, shape) || !strings.Contains(r.out, "[REDACTED:github_token]") {
		t.Fatalf("streamed: %s", r.out)
	}
	if r := cli(t, home, "exec", id, "--json", "--", "echo", shape); strings.Contains(r.out, shape) {
		t.Fatalf("json: %s", r.out)
	}
	// An error that quotes the command's arguments, streamed, attached
	// or not; the events as they stream.
	var answers strings.Builder
	for _, args := range [][]string{{"exec", id, "--", "/bin/" + value}, {"exec", id, "--json", "--", "/bin/" + value},
		{"exec", id, "--dir", "d" + value, "--", "true"}} {
		r := cli(t, home, args...)
		answers.WriteString(r.out + r.err)
		if r.code == 0 || !strings.Contains(r.out+r.err, "[REDACTED:API_TOKEN]") {
			t.Errorf("%v: exit %d, %s%s", args[3:], r.code, r.out, r.err)
		}
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(home, "paddock.sock"))
	}}}
	// A host made of the secret (refused by the proxy: no network is
	// reached), and an access request that quotes it: both are stored.
	cli(t, home, "exec", id, "--net", "allow=example.com", "--", "sh", "-c", `curl -m 5 -s "http://$API_TOKEN.example.org/" >/dev/null; true`).must(t)
	body := `{"kind":"command","command":["curl","` + value + `"],"reason":"to reach ` + value + `"}`
	if resp, err := hc.Post("http://paddock/v1/runs/"+id+"/requests", "application/json", strings.NewReader(body)); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("access request: %d %s", resp.StatusCode, b)
		}
		answers.Write(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://paddock/v1/runs/"+id+"/events/stream", nil)
	if resp, err := hc.Do(req); err != nil {
		t.Fatal(err)
	} else {
		sse, _ := io.ReadAll(resp.Body) // until the timeout
		resp.Body.Close()
		if !strings.Contains(string(sse), `"type":"exec"`) || !strings.Contains(string(sse), "network.connection") || !strings.Contains(string(sse), "access.requested") {
			t.Fatalf("the event stream: %s", sse)
		}
		answers.Write(sse)
	}
	all := cli(t, home, "events", id, "--json").must(t).out + cli(t, home, "show", id, "--json").must(t).out
	if strings.Contains(all, value) || strings.Contains(all, "other-secret-value") || strings.Contains(all, "ghp_AAAA") {
		t.Fatal("a secret value reached the events or the run record")
	}
	// Nothing paddock keeps holds it either: the events are stored masked.
	requireNoValue(t, home, answers.String()+all, value)
}

// TestExecStreams: output reaches the client while the command still runs.
func TestExecStreams(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 1)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	c := client.Unix(filepath.Join(home, "paddock.sock"))
	start := time.Now()
	var firstAt time.Duration
	out := writerFunc(func(p []byte) (int, error) {
		if firstAt == 0 && strings.Contains(string(p), "first") {
			firstAt = time.Since(start)
		}
		return len(p), nil
	})
	res, err := c.ExecStream(context.Background(), id, paddock.ExecRequest{Argv: []string{"sh", "-c", "echo first; sleep 2; echo second"}}, out, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if total := time.Since(start); firstAt == 0 || total-firstAt < time.Second {
		t.Fatalf("the first line came at %v of %v: not streamed", firstAt, total)
	}
}

// TestExecAttachEndToEnd: the client's attached exec against a real
// daemon: stdin streams in as the command answers (the command reads its
// first line before the rest is written), the output streams out, the end
// of stdin is the command's; and a caller that goes ends the command.
func TestExecAttachEndToEnd(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 1)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	c := client.Unix(filepath.Join(home, "paddock.sock"))
	inR, inW := io.Pipe()
	defer inW.Close()
	scr, errs := &screenBuffer{}, &screenBuffer{}
	done := make(chan error, 1)
	var res *paddock.ExecResult
	go func() {
		var err error
		res, err = c.ExecAttach(context.Background(), id, paddock.ExecRequest{Argv: []string{"sh", "-c", "test -t 0 || echo pipe; read -r a; echo \"got $a\"; cat; echo end >&2"}},
			paddock.ExecIO{Stdin: inR, Stdout: scr, Stderr: errs})
		done <- err
	}()
	io.WriteString(inW, "one\n")
	scr.waitFor(t, "got one\n")
	io.WriteString(inW, "two")
	inW.Close()
	if err := <-done; err != nil || res.ExitCode != 0 || scr.String() != "pipe\ngot one\ntwo" || errs.String() != "end\n" {
		t.Fatalf("attached: %v %+v %q %q", err, res, scr.String(), errs.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.ExecAttach(ctx, id, paddock.ExecRequest{Argv: []string{"sleep", "60"}}, paddock.ExecIO{}); err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("a caller that went: %v after %v", err, time.Since(start))
	}
	// The daemon ended the command: its exec is recorded, killed.
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		evs := cli(t, home, "events", id, "--json").must(t).out
		if strings.Contains(evs, `"argv":["sleep","60"]`) && strings.Count(evs, `"type":"exec"`) >= 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("no record of the command its caller left: %s", evs)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestCreateShowsProgress: making the first overlay run of a base builds its
// snapshot; the run's events record the progress and create shows it on the
// terminal while it waits. The next run at that base builds nothing.
func TestCreateShowsProgress(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 4000)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	start := time.Now()
	r := cli(t, home, "create", "-p", "app", "--kind", "overlay")
	took := time.Since(start)
	if r.code != 0 {
		if strings.Contains(r.err, "unsupported") && os.Getenv("CI") != "true" {
			t.Skipf("overlay workspaces do not work here: %s", r.err)
		}
		t.Fatalf("create: %d %s", r.code, r.err)
	}
	id := strings.TrimSpace(r.out)
	var progress []string
	for _, ev := range decodeLines(t, cli(t, home, "events", id, "--json").must(t).out) {
		if ev.Type == "workspace.progress" {
			progress = append(progress, string(ev.Data))
		}
	}
	if len(progress) < 2 || !strings.Contains(progress[0], "building the snapshot") || !strings.Contains(progress[len(progress)-1], "entries") {
		t.Fatalf("progress events: %v", progress)
	}
	t.Logf("create took %v; its stderr: %q", took, r.err)
	// It looks every 200 ms: a create that took a second must have shown it.
	if took > time.Second && !strings.Contains(r.err, "building the snapshot") {
		t.Fatalf("create showed no progress on its stderr: %q", r.err)
	}
	again := cli(t, home, "create", "-p", "app", "--kind", "overlay").must(t)
	if strings.Contains(again.err, "building") {
		t.Fatalf("the second run built the snapshot again: %q", again.err)
	}
}

// TestOverlayAcrossADaemonCrash: an overlay run's files live in its upper
// layer and its merged view in its harness; after kill -9 of the daemon the
// restarted one re-attaches to the harness and sees the same bytes.
func TestOverlayAcrossADaemonCrash(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 3)
	d := startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	r := cli(t, home, "create", "-p", "app", "--kind", "overlay")
	if r.code != 0 {
		if strings.Contains(r.err, "unsupported") && os.Getenv("CI") != "true" {
			t.Skipf("overlay workspaces do not work here: %s", r.err)
		}
		t.Fatalf("create: %d %s", r.code, r.err)
	}
	id := strings.TrimSpace(r.out)
	var res paddock.ExecResult
	if err := json.Unmarshal([]byte(cli(t, home, "exec", id, "--json", "--", "sh", "-c", "echo kept > kept.txt").must(t).out), &res); err != nil {
		t.Fatal(err)
	}
	harness := res.Enforcement.HarnessPID
	d.kill9()
	startDaemon(t, home)
	cli(t, home, "resume", id).must(t)
	if r := cli(t, home, "tool", id, "read", "--arg", "path=kept.txt"); r.code != 0 || !strings.Contains(r.out, "kept") {
		t.Fatalf("after the crash a tool does not see the run's file: %d %s %s", r.code, r.out, r.err)
	}
	if err := json.Unmarshal([]byte(cli(t, home, "exec", id, "--json", "--", "cat", "kept.txt").must(t).out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "kept\n" || res.Enforcement.HarnessPID != harness {
		t.Fatalf("after the crash: %q from harness %d, was %d", res.Stdout, res.Enforcement.HarnessPID, harness)
	}
	if r := cli(t, home, "diff", id, "--stat"); r.code != 0 || !strings.Contains(r.out, "kept.txt") {
		t.Fatalf("diff after the crash: %d %s %s", r.code, r.out, r.err)
	}
	cli(t, home, "reject", id).must(t)
}

// TestMCP: an agent that speaks MCP gets the run's working tools from
// `paddock mcp RUN`: the offered set, calls that land in the workspace, and
// refusals as tool errors it can read.
func TestMCP(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 3)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
	ro := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone", "--access", "read").must(t).out)
	ctx := context.Background()
	connect := func(run string) *mcp.ClientSession {
		t.Helper()
		cmd := exec.Command(binary, "mcp", run, "--home", home)
		cmd.Env = append(os.Environ(), "PADDOCK_NO_AUTOSTART=1")
		s, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := connect(id)
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	// The built-in coder's nine working tools and its seven control tools.
	if len(names) != 16 || !slices.Contains(names, "write") || !slices.Contains(names, "capabilities") || !slices.Contains(names, "verify") {
		t.Fatalf("tools: %v", names)
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "write", Arguments: map[string]any{"path": "from-mcp.txt", "content": "hello over MCP\n"}})
	if err != nil || res.IsError {
		t.Fatalf("write: %+v %v", res, err)
	}
	run := decode[*paddock.Run](t, cli(t, home, "show", id, "--json"))
	if b, _ := os.ReadFile(filepath.Join(run.Workspace.Root, "from-mcp.txt")); string(b) != "hello over MCP\n" {
		t.Fatalf("the write did not land: %q", b)
	}
	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": "../../etc/passwd"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "forbidden") {
		t.Fatalf("an escape over MCP: %+v %v", res, err)
	}
	if evs := cli(t, home, "events", id).must(t).out; !strings.Contains(evs, "from-mcp.txt") {
		t.Fatalf("the MCP call is not an event:\n%s", evs)
	}
	// Arguments reach the daemon as sent, and are read one way only: a key
	// twice in two cases, a key in the wrong case, bytes that are not UTF-8
	// and a path that names a directory are refused; bytes go in base64.
	for raw, want := range map[string]string{
		`{"path":"a.txt","Path":"b.txt","content":"x"}`:      `"key":"Path"`,
		`{"PATH":"a.txt","content":"x"}`:                     `"key":"PATH"`,
		`{"path":"bad` + "\xff" + `.txt","content":"x"}`:     `"key":"path"`,
		`{"path":"a.txt","content":"` + "\xc3\x28" + `"}`:    `"key":"content"`,
		`{"path":"from-mcp.txt/","content":"overwritten\n"}`: `not_regular_file`,
	} {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "write", Arguments: json.RawMessage(raw)})
		// The error is structured content (a tool error's text is its
		// code and one line).
		var structured []byte
		if err == nil {
			structured, _ = json.Marshal(res.StructuredContent)
		}
		if err != nil || !res.IsError || !strings.Contains(string(structured), want) {
			t.Errorf("write %q over MCP: %+v %v, want a refusal with %s", raw, res, err, want)
		}
	}
	if ents, _ := os.ReadDir(run.Workspace.Root); slices.ContainsFunc(ents, func(e os.DirEntry) bool {
		return strings.HasPrefix(e.Name(), "bad") || e.Name() == "a.txt" || e.Name() == "b.txt"
	}) {
		t.Errorf("a refused call over MCP wrote a file: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(run.Workspace.Root, "from-mcp.txt")); string(b) != "hello over MCP\n" {
		t.Fatalf("a path with a trailing slash overwrote the file: %q", b)
	}
	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "write", Arguments: map[string]any{"path": "latin1.txt", "content_base64": "Y2Fm6Qo="}})
	if b, _ := os.ReadFile(filepath.Join(run.Workspace.Root, "latin1.txt")); err != nil || res.IsError || string(b) != "caf\xe9\n" {
		t.Fatalf("bytes over MCP: %+v %v %q", res, err, b)
	}
	// A read run (the built-in reviewer) is offered only the read tools,
	// and its control tools.
	rtools, err := connect(ro).ListTools(ctx, nil)
	if err != nil || len(rtools.Tools) != 11 || slices.ContainsFunc(rtools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "write" }) {
		t.Fatalf("a read run's tools over MCP: %+v %v", rtools, err)
	}
}
