package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWrappersDifferential holds the broker's reading of wrappers, shells
// and redirections to the real programs (GNU coreutils, util-linux,
// findutils, GNU time, bash, dash): each line of
// testdata/wrapped_commands.txt runs for real with recording shims on
// PATH, and what ran (argv, environment) and what it wrote must be what
// the broker read from the line (see the file for the expectations).
func TestWrappersDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real programs; -short skips it")
	}
	if out, err := exec.Command("env", "--version").Output(); err != nil || !bytes.Contains(out, []byte("GNU coreutils")) {
		t.Skip("env is not GNU coreutils' here: the lines are read with its grammar")
	}
	cases := readWrappedCommands(t, filepath.Join("testdata", "wrapped_commands.txt"))
	shims := t.TempDir()
	logs := filepath.Join(shims, "log")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	writeShims(t, shims, logs)
	for _, tc := range cases {
		t.Run(tc.name(), func(t *testing.T) {
			argv := tc.argv(shims)
			cmds, err := commandsOf(argv)
			if tc.expect == "!" {
				if err == nil {
					t.Fatalf("read, want refused: %v", describe(cmds))
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.runner != "argv" {
				if _, err := os.Stat(shellShims[tc.runner]); err != nil {
					t.Skipf("%s is not installed here", shellShims[tc.runner])
				}
			}
			if tc.runner == "sh" || slices.ContainsFunc(cmds, func(c command) bool { return len(c.words) > 0 && c.words[0].lit == "sh" }) {
				if sh, _ := filepath.EvalSymlinks("/bin/sh"); path.Base(sh) != "dash" {
					t.Skipf("/bin/sh is %s here, not dash: the broker reads sh as dash (Debian's)", sh)
				}
			}
			for _, c := range cmds {
				if len(c.words) > 0 && c.words[0].known && realPrograms[path.Base(c.words[0].lit)] {
					if _, err := exec.LookPath(c.words[0].lit); err != nil {
						t.Skipf("%s is not installed here", c.words[0].lit)
					}
				}
			}
			runs, wrote, start := runRecorded(t, argv, shims, logs)
			compareRuns(t, tc.expect, cmds, runs)
			compareEnv(t, tc.expect, cmds, runs, start)
			compareWrites(t, cmds, wrote)
		})
	}
}

// wrappedCommand is one line of the corpus.
type wrappedCommand struct {
	lineNo         int
	expect, runner string
	line           string
}

func (c wrappedCommand) name() string {
	return fmt.Sprintf("%03d %s %s", c.lineNo, c.runner, c.line)
}

func (c wrappedCommand) argv(shims string) []string {
	line := strings.ReplaceAll(c.line, "SHIMDIR", shims)
	if c.runner == "argv" {
		var argv []string
		if err := json.Unmarshal([]byte(line), &argv); err != nil {
			panic(fmt.Sprintf("line %d: %v", c.lineNo, err))
		}
		return argv
	}
	return []string{c.runner, "-c", line}
}

func readWrappedCommands(t *testing.T, file string) []wrappedCommand {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []wrappedCommand
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		fields := strings.SplitN(l, " ", 3)
		if len(fields) != 3 || !strings.Contains("=>P!", fields[0]) || !slices.Contains([]string{"bash", "sh", "dash", "argv"}, fields[1]) {
			t.Fatalf("%s:%d: want EXPECT RUNNER LINE: %q", file, n, l)
		}
		out = append(out, wrappedCommand{lineNo: n, expect: fields[0], runner: fields[1], line: fields[2]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The shims: evil and prog only record; the shells record and run the
// real shell (a script a shell runs is read by the broker in its place).
var (
	leafShims  = []string{"evil", "prog"}
	shellShims = map[string]string{"sh": "/bin/sh", "bash": "/bin/bash", "dash": "/bin/dash"}
	// realPrograms are the programs a line may need that a system may
	// lack: its case is skipped without them.
	realPrograms = map[string]bool{"env": true, "nice": true, "nohup": true, "timeout": true, "stdbuf": true, "setsid": true,
		"xargs": true, "find": true, "time": true, "dash": true, "bash": true}
)

func writeShims(t *testing.T, dir, logs string) {
	// Absolute paths: a line may clear PATH (env -i).
	record := func(name string) string {
		return strings.NewReplacer("LOGS", logs, "NAME", name).Replace(`#!/bin/sh
f=$(/usr/bin/mktemp LOGS/rec.XXXXXXXX) || exit 97
printf '%s\0' NAME "$@" > "$f.argv"
/bin/cat /proc/$$/environ > "$f.env"
`)
	}
	for _, n := range leafShims {
		writeExec(t, filepath.Join(dir, n), record(n)+"exit 0\n")
	}
	for n, real := range shellShims {
		if _, err := os.Stat(real); err != nil {
			continue
		}
		writeExec(t, filepath.Join(dir, n), record(n)+"exec "+real+` "$@"`+"\n")
	}
}

func writeExec(t *testing.T, name, text string) {
	if err := os.WriteFile(name, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
}

// recordedRun is one exec of a shim: its name, arguments and environment.
type recordedRun struct {
	name string
	args []string
	env  map[string]string
}

func (r recordedRun) String() string { return strings.Join(append([]string{r.name}, r.args...), " ") }

// baseEnvOf is the environment a line starts with.
func baseEnvOf(shims, home string) []string {
	return []string{"PATH=" + shims + ":/usr/bin:/bin", "HOME=" + home, "LANG=C"}
}

// runRecorded runs argv in a fresh directory and returns the shims' runs,
// the files it wrote (relative to the directory) and the environment it
// started with.
func runRecorded(t *testing.T, argv []string, shims, logs string) ([]recordedRun, []string, map[string]string) {
	entries, _ := os.ReadDir(logs)
	for _, e := range entries {
		os.Remove(filepath.Join(logs, e.Name()))
	}
	dir := t.TempDir()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeExec(t, filepath.Join(dir, "docs", "x.sh"), "prog from-bash-env\n")
	before := filesUnder(t, dir)
	env := baseEnvOf(shims, home)
	prog, err := lookPathIn(argv[0], shims+":/usr/bin:/bin")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("timed out: %s", out)
	}
	t.Logf("exit %v, output:\n%s", err, out)
	var runs []recordedRun
	entries, err = os.ReadDir(logs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".argv")
		if !ok {
			continue
		}
		a, err1 := os.ReadFile(filepath.Join(logs, e.Name()))
		en, err2 := os.ReadFile(filepath.Join(logs, base+".env"))
		if err1 != nil || err2 != nil {
			t.Fatalf("a shim's record: %v %v", err1, err2)
		}
		fields := strings.Split(strings.TrimSuffix(string(a), "\x00"), "\x00")
		r := recordedRun{name: fields[0], args: fields[1:], env: map[string]string{}}
		for _, kv := range strings.Split(string(en), "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				r.env[k] = v
			}
		}
		runs = append(runs, r)
	}
	var wrote []string
	after := filesUnder(t, dir)
	for name, data := range after {
		if old, ok := before[name]; !ok || old != data {
			wrote = append(wrote, name)
		}
	}
	slices.Sort(wrote)
	start := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		start[k] = v
	}
	return runs, wrote, start
}

func lookPathIn(name, dirs string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range filepath.SplitList(dirs) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not in %s", name, dirs)
}

func filesUnder(t *testing.T, dir string) map[string]string {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// leaf: a run the broker must have read as a command: a shim that only
// records, or a shell that runs no -c script (it runs a file).
func leaf(r recordedRun) bool {
	if _, ok := shellShims[r.name]; !ok {
		return true
	}
	args := make([]word, len(r.args))
	for i, a := range r.args {
		args[i] = known(a)
	}
	_, ok, err := shellScript(r.name, args)
	return err != nil || !ok
}

// believedLeaves are the commands the broker read that are shims' runs.
func believedLeaves(cmds []command) []command {
	var out []command
	for _, c := range cmds {
		if len(c.words) == 0 || !c.words[0].known {
			continue
		}
		n := path.Base(c.words[0].lit)
		if _, shell := shellShims[n]; slices.Contains(leafShims, n) || shell {
			out = append(out, c)
		}
	}
	return out
}

// runMatches: a command the broker read is this run. A word it could not
// know (a file name find puts in, what xargs reads) stands for any number
// of words.
func runMatches(c command, r recordedRun) bool {
	if path.Base(c.words[0].lit) != r.name {
		return false
	}
	var match func(ws []word, args []string) bool
	match = func(ws []word, args []string) bool {
		if len(ws) == 0 {
			return len(args) == 0
		}
		if !ws[0].known {
			for n := 0; n <= len(args); n++ {
				if match(ws[1:], args[n:]) {
					return true
				}
			}
			return false
		}
		return len(args) > 0 && ws[0].lit == args[0] && match(ws[1:], args[1:])
	}
	return match(c.words[1:], r.args)
}

func compareRuns(t *testing.T, expect string, cmds []command, runs []recordedRun) {
	leaves := believedLeaves(cmds)
	if expect != "P" {
		for _, r := range runs {
			if leaf(r) && !slices.ContainsFunc(leaves, func(c command) bool { return runMatches(c, r) }) {
				t.Errorf("ran %q, which the broker did not read; it read %v", r, describe(cmds))
			}
		}
	}
	if expect == "=" {
		for _, c := range leaves {
			if !slices.ContainsFunc(runs, func(r recordedRun) bool { return leaf(r) && runMatches(c, r) }) {
				t.Errorf("the broker read %q, which did not run; ran %v", c.String(), runs)
			}
		}
	}
	if expect == "P" && !slices.ContainsFunc(cmds, func(c command) bool {
		return slices.ContainsFunc(c.assigns, func(a assign) bool { return Protected(a.name) })
	}) {
		t.Errorf("the broker read no protected variable: %v", describe(cmds))
	}
}

// compareEnv: every variable a run got that the line did not start with
// (or got another value) is one the broker read the line setting. (What
// the shells and stdbuf set themselves aside.)
func compareEnv(t *testing.T, expect string, cmds []command, runs []recordedRun, start map[string]string) {
	var set []string
	for _, c := range cmds {
		for _, a := range c.assigns {
			set = append(set, a.name)
		}
	}
	for _, r := range runs {
		if !leaf(r) && expect != "P" {
			continue
		}
		for k, v := range r.env {
			switch {
			case start[k] == v && v != "":
			case k == "PWD" || k == "OLDPWD" || k == "SHLVL" || k == "_":
				// the shells' own
			case strings.HasPrefix(k, "_STDBUF_") || k == "LD_PRELOAD" && strings.Contains(v, "libstdbuf"):
				// stdbuf's own
			case !slices.Contains(set, k):
				t.Errorf("%q ran with %s=%s, which the broker did not read the line setting (it read %q)", r, k, v, set)
			}
		}
	}
}

func compareWrites(t *testing.T, cmds []command, wrote []string) {
	var writes []string
	chdir := false
	for _, c := range cmds {
		chdir = chdir || c.chdir
		for _, w := range c.writes {
			if w.known {
				writes = append(writes, path.Clean(w.lit))
			}
		}
	}
	for _, f := range wrote {
		if slices.Contains(writes, f) || chdir && slices.ContainsFunc(writes, func(w string) bool { return path.Base(w) == path.Base(f) }) {
			continue
		}
		t.Errorf("wrote %s, which the broker did not read the line writing (it read %q)", f, writes)
	}
}

func describe(cmds []command) string {
	var b strings.Builder
	for i, c := range cmds {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "[%s]", c.String())
		for _, a := range c.assigns {
			fmt.Fprintf(&b, " %s=", a.name)
		}
		for _, w := range c.writes {
			fmt.Fprintf(&b, " >%s", w.lit)
		}
		if c.chdir {
			b.WriteString(" (cd)")
		}
	}
	return b.String()
}
