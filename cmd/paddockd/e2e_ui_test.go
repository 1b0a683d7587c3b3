package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/ui"
)

// TestUILoginLink: `paddock ui` on a daemon started without --listen
// gives a link on a loopback listener started for it; the link logs a
// client in once, and the cookie it sets reads the API and, with the
// session's CSRF token, changes it.
func TestUILoginLink(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, _ := reviewDaemon(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	l := decode[paddock.UILogin](t, cli(t, home, "ui", "--no-open", "--json"))
	u, err := url.Parse(l.URL)
	if err != nil || !strings.HasPrefix(u.Host, "127.0.0.1:") || u.Path != "/ui/login" {
		t.Fatalf("link %q: %v", l.URL, err)
	}
	if out := cli(t, home, "ui", "--no-open").must(t).out; !strings.Contains(out, "http://"+u.Host+"/ui/login?code=") {
		t.Fatalf("the link is on another listener, or not printed:\n%s", out)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := c.Get(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 && resp.StatusCode != 404 { // the page, once ui/dist is built
		t.Fatalf("login: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	if resp.Request.URL.Path != "/ui/" || len(jar.Cookies(u)) != 1 {
		t.Fatalf("login ended at %s with cookies %v", resp.Request.URL, jar.Cookies(u))
	}
	again, err := c.Get(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != 403 {
		t.Fatalf("a link used twice: %d", again.StatusCode)
	}
	var sess struct {
		Data struct{ CSRF string } `json:"data"`
	}
	getJSON(t, c, "http://"+u.Host+"/ui/session", &sess)
	var runs struct {
		Data []paddock.Run `json:"data"`
	}
	getJSON(t, c, "http://"+u.Host+"/v1/runs", &runs)
	if len(runs.Data) != 1 || runs.Data[0].ID != id || sess.Data.CSRF == "" {
		t.Fatalf("the runs through the page's session: %+v", runs.Data)
	}
	post := func(csrf string) int {
		req, _ := http.NewRequest("POST", "http://"+u.Host+"/v1/runs/"+id+"/retain", nil)
		if csrf != "" {
			req.Header.Set(ui.CSRFHeader, csrf)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != 403 {
		t.Fatalf("a change without the CSRF token: %d", code)
	}
	if code := post(sess.Data.CSRF); code != 200 {
		t.Fatalf("a change with it: %d", code)
	}
	if st := runState(t, home, id).State(); st != paddock.StateRetained {
		t.Fatalf("the run is %s after the page retained it", st)
	}
}

func getJSON(t *testing.T, c *http.Client, u string, v any) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(b, v) != nil {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
}

// browser is what the review page's browser tests need: node, Debian's
// chromium and playwright-core installed in ui/e2e (.ci/run installs
// them). Without them the tests skip, except under CI=true.
type browser struct{ node, chromium, script, artifacts string }

func needBrowser(t *testing.T) browser {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var b browser
	b.script = filepath.Join(root, "ui", "e2e", "review.mjs")
	missing := ""
	if b.node, err = exec.LookPath("node"); err != nil {
		missing = "node"
	} else if b.chromium, err = exec.LookPath("chromium"); err != nil {
		missing = "chromium (Debian's package)"
	} else if _, err := os.Stat(filepath.Join(root, "ui", "e2e", "node_modules", "playwright-core")); err != nil {
		missing = "playwright-core (npm ci in ui/e2e)"
	} else if _, err := os.Stat(b.script); err != nil {
		missing = "ui/e2e/review.mjs"
	}
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s is missing: .ci/run installs it", missing)
		}
		t.Skipf("the review page's browser test needs %s", missing)
	}
	b.artifacts = filepath.Join(root, "test-artifacts", "ui")
	os.MkdirAll(b.artifacts, 0o755)
	return b
}

// script starts the browser script in mode, on the login link of home's
// daemon for run id.
func (b browser) start(t *testing.T, ctx context.Context, home, mode, id string, env ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader, *bytes.Buffer) {
	t.Helper()
	l := decode[paddock.UILogin](t, cli(t, home, "ui", "--no-open", "--json"))
	cmd := exec.CommandContext(ctx, b.node, b.script)
	cmd.Dir = filepath.Dir(b.script)
	cmd.Env = append(os.Environ(), "PADDOCK_UI_URL="+l.URL, "PADDOCK_RUN="+id, "PADDOCK_MODE="+mode,
		"CHROMIUM="+b.chromium, "ARTIFACTS="+b.artifacts)
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 5 * time.Second
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, stdin, bufio.NewReader(stdout), &stderr
}

// finish waits for the script and returns its last line, failing the
// test with what it printed if it failed.
func finish(t *testing.T, cmd *exec.Cmd, out *bufio.Reader, stderr *bytes.Buffer) string {
	t.Helper()
	rest, _ := io.ReadAll(out)
	err := cmd.Wait()
	lines := strings.Split(strings.TrimSpace(string(rest)), "\n")
	if err != nil {
		t.Fatalf("the browser script failed (%v):\nstdout: %s\nstderr: %s", err, rest, stderr)
	}
	return lines[len(lines)-1]
}

// TestReviewPageInABrowser: a person reviews a run in headless Chromium:
// the page shows the change set (a modified file, a new one, a binary one,
// an executable one, one with a bidirectional override shown as such, not
// obeyed) with its risk labels; they approve it and apply it to a branch,
// and the branch holds it in git. A page whose change set was submitted
// again cannot approve what it shows; a change without the CSRF token is
// refused. Screenshots at 1280 and 390 px are kept in test-artifacts/ui.
func TestReviewPageInABrowser(t *testing.T) {
	t.Parallel() // its own daemon and state
	b := needBrowser(t)
	home, repo := reviewDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'hello, reviewed\n' > README.md && mkdir -p src && printf 'package src\n\nfunc New() int { return 42 }\n' > src/new.go &&
printf 'access \342\200\256level\n' > notes.txt && printf '\000\001\002PNG\377' > logo.bin && printf '#!/bin/sh\necho deploy\n' > run.sh && chmod +x run.sh`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	expect, _ := json.Marshal(map[string]any{
		"files":    []string{"README.md", "src/new.go", "notes.txt", "logo.bin", "run.sh"},
		"snippets": []string{"hello, reviewed", "func New() int { return 42 }"},
		"risk":     []string{"control_chars", "executable"},
		"hash":     cs.Hash,
	})
	cmd, _, out, stderr := b.start(t, ctx, home, "review", id, "PADDOCK_EXPECT="+string(expect), "PADDOCK_BRANCH=paddock/reviewed")
	t.Logf("browser: %s", finish(t, cmd, out, stderr))
	if ev := cli(t, home, "events", id, "--json").must(t).out; !strings.Contains(ev, paddock.EventApproved) || !strings.Contains(ev, "review page") {
		t.Fatalf("no approval by the page in the events:\n%s", ev)
	}
	for file, want := range map[string]string{"README.md": "hello, reviewed\n", "src/new.go": "package src\n\nfunc New() int { return 42 }\n",
		"notes.txt": "access \u202elevel\n", "logo.bin": "\x00\x01\x02PNG\xff"} {
		got, err := exec.Command("git", "-C", repo, "show", "paddock/reviewed:"+file).Output()
		if err != nil || string(got) != want {
			t.Errorf("%s on the branch: %q %v", file, got, err)
		}
	}
	for _, shot := range []string{"run-1280.png", "run-390.png"} {
		if st, err := os.Stat(filepath.Join(b.artifacts, shot)); err != nil || st.Size() < 1000 {
			t.Errorf("screenshot %s: %v", shot, err)
		}
	}

	// A newer submission than the page shows cannot be approved from it.
	id2 := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id2, "--", "sh", "-c", `printf 'first\n' > a.txt`).must(t)
	cli(t, home, "submit", id2).must(t)
	cmd, stdin, out, stderr := b.start(t, ctx, home, "stale", id2)
	line, err := out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "READY" {
		rest, _ := io.ReadAll(out)
		cmd.Wait()
		t.Fatalf("the stale script did not get ready: %q %v\n%s\n%s", line, err, rest, stderr)
	}
	cli(t, home, "exec", id2, "--", "sh", "-c", `printf 'second, unseen\n' > a.txt`).must(t)
	cs2 := decode[paddock.ChangeSet](t, cli(t, home, "submit", id2, "--json"))
	io.WriteString(stdin, "GO\n")
	t.Logf("browser: %s", finish(t, cmd, out, stderr))
	if ev := cli(t, home, "events", id2, "--json").must(t).out; strings.Contains(ev, paddock.EventApproved) {
		t.Fatalf("approved from a page showing an older change set (now %s):\n%s", cs2.Hash, ev)
	}

	// Where each hunk came from, and approving one of two hunks.
	gittest.Commit(t, repo, "a long file", map[string]string{"long.txt": "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"})
	id3 := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "tool", id3, "edit", "--arg", "path=long.txt", "--arg", "old_string=1\n2\n", "--arg", "new_string=1\ntwo\n").must(t)
	cli(t, home, "exec", id3, "--", "sh", "-c", `sed -i 's/^11$/eleven/' long.txt`).must(t)
	cs3 := decode[paddock.ChangeSet](t, cli(t, home, "submit", id3, "--json"))
	expect, _ = json.Marshal(map[string]any{"origins": map[string]string{"1": "edit long.txt", "2": "exec: sh -c sed"}, "choose": []int{1}})
	cmd, _, out, stderr = b.start(t, ctx, home, "hunks", id3, "PADDOCK_EXPECT="+string(expect))
	t.Logf("browser: %s", finish(t, cmd, out, stderr))
	cli(t, home, "apply", id3, "--to", "branch=one-hunk").must(t)
	if got := gittest.Git(t, repo, "show", "one-hunk:long.txt"); !strings.Contains(got, "two\n") || strings.Contains(got, "eleven") {
		t.Fatalf("the branch of the chosen hunk holds:\n%s (of %s)", got, cs3.Hash)
	}

	// A change from the page without its CSRF token.
	cmd, _, out, stderr = b.start(t, ctx, home, "csrf", id2)
	t.Logf("browser: %s", finish(t, cmd, out, stderr))
	if st := runState(t, home, id2).State(); st == paddock.StateRejected {
		t.Fatal("a change without the CSRF token rejected the run")
	}
}

// The test below was red team 3's attack on the review page's login as it
// landed (the report of branch red3): one that fails is a finding.

// TestLoginCodeInTheBrowsersArgv: `paddock ui` hands the one-time
// login link to the browser as an argument. A process's arguments are
// readable by every user of the machine (/proc/PID/cmdline), and the
// link is the operator's credential until the browser uses it; a
// browser takes a second or more to start, and any local user who polls
// /proc can redeem the code first and act as the operator on the
// loopback listener (which every local user can reach: the bearer token
// file was what kept them out). The code must reach the browser by a way
// only the operator can read (a 0600 file that redirects, stdin), never
// in an argument.
func TestLoginCodeInTheBrowsersArgv(t *testing.T) {
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
