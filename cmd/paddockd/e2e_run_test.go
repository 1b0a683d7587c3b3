package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"golang.org/x/sys/unix"
)

// TestRunVerb: paddock run, as a developer types it in a repository: the
// project registered on first use, the command run in a new run, its change
// set and checks shown, then submitted for review (no terminal), or
// approved and applied at the terminal's prompt; a command that changed
// nothing leaves nothing behind; a failing one's exit code comes back.
func TestRunVerb(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "calc"), map[string]string{
		"go.mod":       "module example.com/calc\n\ngo 1.22\n",
		"calc.go":      "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 2) != 4 {\n\t\tt.Fatal(Add(2, 2))\n\t}\n}\n",
	})
	startDaemon(t, home)

	// No terminal: submitted for review, with the command that approves it.
	r := cli(t, home, "run", "--project", filepath.Join(repo, "."), "--", "sh", "-c", "echo 'package calc\n\n// Sub subtracts.\nfunc Sub(a, b int) int { return a - b }' > sub.go")
	if r.code != 0 || !strings.Contains(r.out, "sub.go") || !strings.Contains(r.out, "submitted for review: paddock approve") || !strings.Contains(r.err, "paddock: ran go") {
		t.Fatalf("run: %d\n%s\n%s", r.code, r.out, r.err)
	}
	if ps := decode[[]*paddock.Project](t, cli(t, home, "project", "ls", "--json")); len(ps) != 1 || ps[0].Root != repo {
		t.Fatalf("projects: %+v", ps)
	}
	m := regexp.MustCompile(`paddock approve (r-\S+) --hash (\S+)`).FindStringSubmatch(r.out)
	if m == nil || !strings.Contains(r.out, "change set "+m[2]+": passed") {
		t.Fatalf("the change set's checks: %s", r.out)
	}
	cli(t, home, "approve", m[1], "--hash", m[2]).must(t)

	// Nothing changed: nothing kept.
	if r := cli(t, home, "run", "--project", repo, "--", "true"); r.code != 0 || !strings.Contains(r.err, "changed nothing") {
		t.Fatalf("a run that changes nothing: %d %s", r.code, r.err)
	}
	// The command's failure is the verb's exit code; its work is still up
	// for review.
	if r := cli(t, home, "run", "--project", repo, "--no-verify", "--", "sh", "-c", "echo half > half.txt; exit 3"); r.code != 3 || !strings.Contains(r.out, "half.txt") {
		t.Fatalf("a failing command: %d %s %s", r.code, r.out, r.err)
	}

	// At a terminal: approve and apply to a branch, from the prompt.
	out := cliOnTerminalIn(t, home, "a\n", "run", "--project", repo, "--no-verify", "--apply", "branch=feature", "--", "sh", "-c", "echo from-the-agent > agent.txt")
	if !strings.Contains(out, "[a]pprove and apply, [r]eject, [k]eep for later, or [d]iff, [s]tat, [v]erify, [?] help? ") || !strings.Contains(out, "applied to") {
		t.Fatalf("the prompt:\n%s", out)
	}
	if got := gittest.Git(t, repo, "show", "feature:agent.txt"); got != "from-the-agent" {
		t.Fatalf("the branch holds %q", got)
	}
	// The checkout itself was never written.
	if _, err := os.Stat(filepath.Join(repo, "agent.txt")); !os.IsNotExist(err) {
		t.Fatalf("the checkout got agent.txt: %v", err)
	}
	// Reject at the prompt: the run is gone from the listing's live runs.
	out = cliOnTerminalIn(t, home, "r\n", "run", "--project", repo, "--no-verify", "--", "sh", "-c", "echo no > no.txt")
	if !strings.Contains(out, "rejected r-") {
		t.Fatalf("reject at the prompt:\n%s", out)
	}
	if r := cli(t, home, "run", "--project", base, "--", "true"); r.code != execFailed || !strings.Contains(r.err, "not in a git repository") {
		t.Fatalf("outside a repository: %d %s", r.code, r.err)
	}
}

// TestRunOnATerminal: paddock run, the real binary, at a terminal (a
// pseudo-terminal whose controlling process it is, as in a shell): CMD
// gets a terminal of the window's size with the CLI's TERM, and a resize
// of the window reaches it as SIGWINCH; its prompt shows before its line
// ends; what is typed (Enter sends CR, as
// a keyboard does) reaches it; then the CLI's terminal is back in the mode
// it had, and the prompt that follows reads the next key typed.
func TestRunOnATerminal(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "app"), map[string]string{"README.md": "hello\n"})
	startDaemon(t, home)

	master, slave := openTestPTY(t)
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 33, Col: 101}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	script := `test -t 0 && test -t 1 && test -t 2 && echo "TTY yes"
echo "TERM=$TERM SIZE=$(stty size </dev/tty)"
trap 'w=1' WINCH
echo READY
i=0; while [ -z "$w" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
echo "RESIZED $w $(stty size)"
printf 'name? '; IFS= read -r l; echo "GOT $l"; echo "$l" > typed.txt`
	exited, scr := onTerminal(t, home, master, slave, "TERM=screen-256color", "run", "--project", repo, "--no-verify", "--", "sh", "-c", script)
	scr.waitFor(t, "READY")
	// The window grows: the kernel tells paddock (SIGWINCH), paddock the run.
	if err := unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
		t.Fatal(err)
	}
	scr.waitFor(t, "RESIZED")
	scr.waitFor(t, "name? ") // a prompt shows before its line ends
	master.WriteString("hello there\r")
	scr.waitFor(t, "[?] help? ")
	master.WriteString("k\n")
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("paddock run: %v\n%s", err, scr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("paddock run did not end:\n%s", scr)
	}
	// What the CLI wrote last may still be on its way from the
	// pseudo-terminal to the screen's reader when it has exited.
	scr.waitFor(t, "kept: paddock approve r-")
	out := scr.String()
	for _, want := range []string{"TTY yes\r\n", "TERM=screen-256color SIZE=33 101\r\n", "RESIZED 1 40 120\r\n", "GOT hello there\r\n", "typed.txt", "kept: paddock approve r-"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal does not show %q:\n%q", want, out)
		}
	}
	after, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if after.Iflag != before.Iflag || after.Oflag != before.Oflag || after.Lflag != before.Lflag || after.Cflag != before.Cflag || after.Cc != before.Cc {
		t.Fatalf("the terminal's mode is not restored:\nbefore %+v\nafter  %+v", before, after)
	}
}

// onTerminal starts the paddock binary with args as the controlling
// process of the terminal slave (with home, and term in its environment),
// and copies what the terminal shows into a screenBuffer. The process is
// killed when the test ends, if it has not ended; exited says how it did.
func onTerminal(t *testing.T, home string, master, slave *os.File, term string, args ...string) (<-chan error, *screenBuffer) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.Env = []string{"PADDOCK_HOME=" + home, "PADDOCK_NO_AUTOSTART=1", "HOME=/nonexistent", "PATH=" + os.Getenv("PATH"), term}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		close(done)
		exited <- err
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	})
	scr := &screenBuffer{}
	go io.Copy(scr, master)
	return exited, scr
}

// openTestPTY opens a pseudo-terminal for a test, or skips saying why.
func openTestPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlocking a pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("naming a pseudo-terminal: %v", err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// screenBuffer is what a terminal shows, written as it comes.
type screenBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *screenBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *screenBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *screenBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !strings.Contains(s.String(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the terminal never showed %q:\n%q", want, s.String())
		}
	}
}

// TestExecOnATerminal: paddock exec -t gives the command this terminal (a
// shell in the run, say): its size, typed input, its exit code back, the
// terminal's mode restored; -t without a terminal, or with --json, is
// refused as exec refuses a bad command line (125, with how to write it).
func TestExecOnATerminal(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "app"), map[string]string{"README.md": "hello\n"})
	startDaemon(t, home)
	cli(t, home, "project", "add", repo, "--name", "app").must(t)
	run := decode[paddock.Run](t, cli(t, home, "create", "--project", "app", "--json"))
	if r := cli(t, home, "exec", "-t", run.ID, "--", "true"); r.code != execFailed || !strings.Contains(r.err, "-t needs a terminal") {
		t.Fatalf("exec -t with no terminal: %d %s", r.code, r.err)
	}
	if r := cli(t, home, "exec", "-t", "--json", run.ID, "--", "true"); r.code != execFailed || !strings.Contains(r.err, "neither --json") {
		t.Fatalf("exec -t --json: %d %s", r.code, r.err)
	}

	master, slave := openTestPTY(t)
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 90}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	exited, scr := onTerminal(t, home, master, slave, "TERM=xterm", "exec", "-t", run.ID, "--", "sh", "-c", `test -t 0 && echo "TTY $(stty size)"; printf 'cmd? '; IFS= read -r l; echo "RAN $l"; exit 7`)
	scr.waitFor(t, "cmd? ")
	master.WriteString("ls -la\r")
	var werr error
	select {
	case werr = <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("paddock exec -t did not end:\n%s", scr)
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("paddock exec -t ended with %v, want exit 7:\n%s", werr, scr)
	}
	scr.waitFor(t, "RAN ls -la\r\n") // the last output may trail the exit
	out := scr.String()
	for _, want := range []string{"TTY 24 90\r\n", "RAN ls -la\r\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal does not show %q:\n%q", want, out)
		}
	}
	after, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag {
		t.Fatalf("the terminal's mode is not restored:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestRunFindsTheAgent: paddock run with an agent's CLI installed the way
// users install one, outside the system directories (#30 item 2): a
// command in a user's npm-style prefix (bin/NAME, a link to a script in
// lib/node_modules/PKG) whose #! names, through env, an interpreter in
// yet another directory of the caller's PATH. The run shows each of those
// read-only, says so, and the command starts, with its interpreter found,
// in the subdirectory of the run the caller is in (item 7); it can read
// its package and write none of it. A command found nowhere makes no run
// (item 8).
func TestRunFindsTheAgent(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	if err := os.MkdirAll(filepath.Join(repo, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(repo, "sub", "keep.txt"), []byte("x\n"), 0o644)
	gittest.Git(t, repo, "add", "-A")
	gittest.Git(t, repo, "commit", "-qm", "sub")
	startDaemon(t, home)

	prefix := filepath.Join(base, "npm-global")
	pkg := filepath.Join(prefix, "lib", "node_modules", "fake-agent")
	tools := filepath.Join(base, "tools", "bin")
	for _, d := range []string{filepath.Join(prefix, "bin"), pkg, tools} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dash, err := exec.LookPath("dash")
	if err != nil {
		dash = "/bin/sh"
	}
	b, err := os.ReadFile(dash)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, "agentsh"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(pkg, "VERSION"), []byte("1.2.3\n"), 0o644)
	script := "#!/usr/bin/env agentsh\n" +
		"echo \"agent $(cat \"$(dirname \"$(readlink -f \"$0\")\")/VERSION\") in $(pwd)\" > found.txt\n" +
		"echo tamper > \"$(dirname \"$(readlink -f \"$0\")\")/VERSION\" 2>/dev/null && echo WROTE-ITS-PACKAGE >> found.txt\n" +
		"exit 0\n"
	if err := os.WriteFile(filepath.Join(pkg, "cli.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../lib/node_modules/fake-agent/cli.sh", filepath.Join(prefix, "bin", "fake-agent")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{base, filepath.Dir(prefix)} {
		os.Chmod(d, 0o755) // the sandbox's uid walks to them
	}

	run := func(args ...string) result {
		var out, errb bytes.Buffer
		env := map[string]string{"PADDOCK_HOME": home, "PADDOCK_NO_AUTOSTART": "1", "HOME": "/nonexistent",
			"PATH": filepath.Join(prefix, "bin") + ":" + tools + ":/usr/bin:/bin"}
		code := paddockd(nil, &out, &errb, func(k string) string { return env[k] }).Run(context.Background(), args)
		return result{out.String(), errb.String(), code}
	}
	// From the repository's subdirectory.
	wd, _ := os.Getwd()
	if err := os.Chdir(filepath.Join(repo, "sub")); err != nil {
		t.Fatal(err)
	}
	r := run("run", "--no-verify", "--", "fake-agent")
	os.Chdir(wd)
	if r.code != 0 {
		t.Fatalf("run: %d\n%s\n%s", r.code, r.out, r.err)
	}
	for _, want := range []string{"fake-agent is " + filepath.Join(prefix, "bin", "fake-agent"), "run by " + filepath.Join(tools, "agentsh"), "shown read-only in the run: "} {
		if !strings.Contains(r.err, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.err)
		}
	}
	m := regexp.MustCompile(`paddock approve (r-\S+) --hash`).FindStringSubmatch(r.out)
	if m == nil {
		t.Fatalf("not submitted:\n%s\n%s", r.out, r.err)
	}
	got := cli(t, home, "tool", m[1], "read", "--arg", "path=sub/found.txt").must(t).out
	if !strings.Contains(got, "agent 1.2.3 in ") || !strings.Contains(got, "/sub") || strings.Contains(got, "WROTE-ITS-PACKAGE") {
		t.Fatalf("what the agent wrote: %s", got)
	}
	if v, _ := os.ReadFile(filepath.Join(pkg, "VERSION")); string(v) != "1.2.3\n" {
		t.Fatalf("the agent's package was written: %q", v)
	}
	// Not found: no run is made.
	before := len(decode[[]*paddock.Run](t, cli(t, home, "ls", "--all", "--json")))
	if r := run("run", "--project", repo, "--", "no-such-agent"); r.code != execFailed || !strings.Contains(r.err, "no-such-agent is not on your PATH") || !strings.Contains(r.err, "nothing was made") {
		t.Fatalf("a command found nowhere: %d %s", r.code, r.err)
	}
	if after := len(decode[[]*paddock.Run](t, cli(t, home, "ls", "--all", "--json"))); after != before {
		t.Fatalf("a command found nowhere left %d run(s)", after-before)
	}
	// A mount that would show the daemon's state is refused, and makes nothing.
	if r := run("run", "--project", repo, "--mount-ro", base, "--", "fake-agent"); r.code != execFailed || !strings.Contains(r.err, "daemon's state") {
		t.Fatalf("a mount of the state's parent: %d %s", r.code, r.err)
	}
}

// TestRunReviewKeys: the review step after paddock run, at a terminal,
// takes one key, no Enter (#30 item 6): ? lists the keys, s shows the
// change set's files again, d its diff through $PAGER, v runs the checks,
// k keeps it; then ls and show say it awaits review (ls --to-review), and
// after an approve, that it is approved.
func TestRunReviewKeys(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	startDaemon(t, home)
	pager := filepath.Join(base, "pager")
	os.WriteFile(pager, []byte("#!/bin/sh\necho PAGER-START; cat; echo PAGER-END\n"), 0o755)
	out := cliOnTerminalEnv(t, home, map[string]string{"PAGER": pager}, "?sdvk", "run", "--project", repo, "--no-verify", "--",
		"sh", "-c", "echo keyed > keyed.txt")
	for _, want := range []string{"d  show the diff in $PAGER", "keyed.txt", "PAGER-START", "+keyed", "PAGER-END", "kept: paddock approve"} {
		if !strings.Contains(out, want) {
			t.Errorf("the review step lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "[?] help? ") != 5 {
		t.Errorf("want the prompt five times (?, s, d, v, then k):\n%s", out)
	}
	m := regexp.MustCompile(`paddock approve (r-\S+) --hash (sha256:[0-9a-f]{64})`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no approve line:\n%s", out)
	}
	id := m[1]
	if ls := cli(t, home, "ls", "--to-review").must(t).out; !strings.Contains(ls, id) || !strings.Contains(ls, "REVIEW") || !strings.Contains(ls, "submitted") {
		t.Fatalf("ls --to-review:\n%s", ls)
	}
	if show := cli(t, home, "show", id).must(t).out; !strings.Contains(show, "review:          submitted\n") {
		t.Fatalf("show:\n%s", show)
	}
	cli(t, home, "approve", id, "--hash", m[2]).must(t)
	if ls := cli(t, home, "ls", "--to-review").must(t).out; strings.Contains(ls, id) {
		t.Fatalf("an approved run awaits review:\n%s", ls)
	}
	if runs := decode[[]*paddock.Run](t, cli(t, home, "ls", "--json")); len(runs) != 1 || runs[0].Review != paddock.ReviewApproved {
		t.Fatalf("ls --json after the approve: %+v", runs)
	}
}

// TestRunIncludeUncommitted: paddock run warns that the checkout's
// uncommitted changes are not in the run, and --include-uncommitted puts
// them in its base (#30 item 7): the command sees them, its change set
// holds only its own work, and the project is left as it was.
func TestRunIncludeUncommitted(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	startDaemon(t, home)
	os.WriteFile(filepath.Join(repo, "README.md"), []byte("edited, not committed\n"), 0o644)
	before, _ := gittest.TreeDigest(t, repo)
	r := cli(t, home, "run", "--project", repo, "--no-verify", "--", "sh", "-c", "cat README.md > seen.txt")
	if r.code != 0 || !strings.Contains(r.err, "uncommitted change(s)") || !strings.Contains(r.err, "--include-uncommitted") {
		t.Fatalf("a run without them: %d\n%s", r.code, r.err)
	}
	r = cli(t, home, "run", "--project", repo, "--no-verify", "--include-uncommitted", "--", "sh", "-c", "cat README.md > seen.txt")
	if r.code != 0 || strings.Contains(r.err, "uncommitted change(s)") {
		t.Fatalf("a run with them: %d\n%s\n%s", r.code, r.out, r.err)
	}
	m := regexp.MustCompile(`paddock approve (r-\S+) --hash`).FindStringSubmatch(r.out)
	if m == nil {
		t.Fatalf("not submitted:\n%s", r.out)
	}
	cs := decode[paddock.ChangeSet](t, cli(t, home, "diff", m[1], "--json"))
	if len(cs.Entries) != 1 || cs.Entries[0].Path != "seen.txt" || !strings.Contains(cs.Diff, "+edited, not committed") {
		t.Fatalf("the change set: %+v\n%s", cs.Entries, cs.Diff)
	}
	if after, _ := gittest.TreeDigest(t, repo); after != before {
		t.Fatal("the project changed")
	}
}
