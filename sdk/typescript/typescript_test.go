package typescript_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestTypeScriptSDK builds paddock, builds the SDK (npm run build), runs
// its suite (npm test: node's test runner against a daemon of that
// binary, which the suite starts on temporary state directories and
// stops) and packs it (npm pack). Without node and npm, or without the
// npm registry to install from, it is skipped; under CI=true it fails
// instead.
func TestTypeScriptSDK(t *testing.T) {
	unavailable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable("node is not installed: the TypeScript SDK's suite runs on node (20 or later)")
	}
	if out, err := exec.Command(node, "-p", "process.versions.node").Output(); err != nil {
		t.Fatalf("node -p process.versions.node: %v", err)
	} else if major, _, _ := strings.Cut(strings.TrimSpace(string(out)), "."); atoi(major) < 20 {
		unavailable("node %s is too old: the TypeScript SDK needs node 20 or later", strings.TrimSpace(string(out)))
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		unavailable("npm is not installed: the TypeScript SDK is built and tested with npm")
	}
	sdk, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	bin := filepath.Join(t.TempDir(), "paddock")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/paddockd")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/paddockd: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(sdk, "node_modules")); errors.Is(err, os.ErrNotExist) {
		// CI installs them first (npm ci --prefix sdk/typescript); a
		// checkout without them installs them here, from the lock file.
		if err := run(ctx, t, sdk, nil, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"); err != nil {
			unavailable("npm ci could not install the SDK's dependencies (is the npm registry reachable?): %v", err)
		}
	}
	if err := run(ctx, t, sdk, nil, npm, "run", "build"); err != nil {
		t.Fatalf("npm run build: %v", err)
	}
	if err := run(ctx, t, sdk, []string{"PADDOCK_BIN=" + bin}, npm, "test"); err != nil {
		t.Fatalf("npm test: %v", err)
	}

	// Packaging: the tarball npm pack makes holds the compiled SDK and its
	// types, and none of the tests, the sources' build or the modules.
	dest := t.TempDir()
	pack := exec.CommandContext(ctx, npm, "pack", "--json", "--pack-destination", dest)
	pack.Dir = sdk
	stderr := logWriter(t, "npm pack")
	pack.Stderr = stderr
	out, err := pack.Output()
	stderr.Close()
	if err != nil {
		t.Fatalf("npm pack: %v\n%s", err, out)
	}
	var packed []struct {
		Filename string `json:"filename"`
		Files    []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	if err := json.Unmarshal(out, &packed); err != nil || len(packed) != 1 {
		t.Fatalf("npm pack --json: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dest, packed[0].Filename)); err != nil {
		t.Fatalf("the packed SDK: %v", err)
	}
	files := map[string]bool{}
	for _, f := range packed[0].Files {
		files[f.Path] = true
		if strings.HasPrefix(f.Path, "build/") || strings.HasPrefix(f.Path, "node_modules/") || strings.HasPrefix(f.Path, "test/") {
			t.Errorf("the package holds %s", f.Path)
		}
	}
	for _, want := range []string{"package.json", "README.md", "dist/index.js", "dist/index.d.ts", "dist/schema.d.ts", "dist/client.js"} {
		if !files[want] {
			t.Errorf("the package lacks %s (it holds %d files)", want, len(files))
		}
	}
}

// atoi is s as a number, 0 if it is none.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// repoRoot is the module's root, where go.mod is.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if gomod := strings.TrimSpace(string(out)); err == nil && gomod != "" && gomod != os.DevNull {
		return filepath.Dir(gomod)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// run runs name with args in dir, its output streamed into the test's
// log, in a process group of its own: whatever it started (the suite's
// daemons among them) is killed with it when it ends, fails or times out.
func run(ctx context.Context, t *testing.T, dir string, env []string, name string, args ...string) error {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	w := logWriter(t, filepath.Base(name)+" "+strings.Join(args, " "))
	defer w.Close()
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	pgid := cmd.Process.Pid
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			// The suite stops its daemons on SIGTERM; whatever is left a
			// little later is killed.
			syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				syscall.Kill(-pgid, syscall.SIGKILL)
			}
		case <-done:
		}
	}()
	err := cmd.Wait()
	close(done)
	// Nothing of the group outlives it (a daemon a crashed test left).
	syscall.Kill(-pgid, syscall.SIGKILL)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// logWriter writes each line written to it into t's log, prefixed.
func logWriter(t *testing.T, prefix string) io.WriteCloser {
	r, w := io.Pipe()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			t.Logf("%s: %s", prefix, sc.Text())
		}
		io.Copy(io.Discard, r)
	}()
	return &lineLog{w: w, wait: wg.Wait}
}

type lineLog struct {
	w    *io.PipeWriter
	wait func()
}

func (l *lineLog) Write(p []byte) (int, error) { return l.w.Write(p) }

// Close ends the log and waits until every line is in it.
func (l *lineLog) Close() error {
	l.w.Close()
	l.wait()
	return nil
}
