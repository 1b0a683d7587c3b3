package python_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// python is Debian's interpreter: the one python3-httpx, python3-pytest
// and python3-build install for.
const python = "/usr/bin/python3"

// TestPythonSDK runs the Python SDK's pytest suite against a daemon built
// from this tree: the suite's fixtures start it ($PADDOCK_BIN serve) on a
// temporary state directory and stop it, and its tests cover every
// operation of openapi.json, the error codes, the event stream resumed
// across cut connections, exec streamed with stdin, an MCP session, the
// examples and the package's build. Without the Python packages it needs
// the test is skipped, saying which; in CI (CI=true) that is a failure.
func TestPythonSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("the Python SDK's suite starts a daemon and takes a minute; not with -short")
	}
	if missing := missingPython(); missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs the Python SDK's packages: %s", missing)
		}
		t.Skipf("the Python SDK's suite needs %s", missing)
	}
	root := repoRoot(t)
	bin := filepath.Join(t.TempDir(), "paddockd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/paddockd")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/paddockd: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "sdk/python/tests")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PADDOCK_BIN="+bin, "PYTHONDONTWRITEBYTECODE=1")
	// pytest's output goes into the test's log line by line, as it comes.
	w := &logWriter{t: t}
	cmd.Stdout, cmd.Stderr = w, w
	// A timeout ends pytest with SIGTERM first, so its fixtures stop the
	// daemons they started (each in a session of its own).
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	w.flush()
	if err != nil {
		t.Fatalf("pytest sdk/python/tests: %v", err)
	}
}

// missingPython names what the suite needs and this machine lacks: the
// interpreter, or one of its modules.
func missingPython() string {
	if _, err := os.Stat(python); err != nil {
		return python
	}
	var missing []string
	for _, m := range []struct{ module, pkg string }{
		{"httpx", "python3-httpx"}, {"pytest", "python3-pytest"},
		{"pytest_asyncio", "python3-pytest-asyncio"}, {"build", "python3-build"},
	} {
		if exec.Command(python, "-c", "import "+m.module).Run() != nil {
			missing = append(missing, m.pkg)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return strings.Join(missing, ", ") + " (apt-get install " + strings.Join(missing, " ") + ")"
}

// repoRoot is the directory of go.mod: the test runs in sdk/python.
func repoRoot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		t.Fatalf("go env GOMOD: %q %v", gomod, err)
	}
	return filepath.Dir(gomod)
}

// logWriter writes what it is given to the test's log, a line at a time.
type logWriter struct {
	t   *testing.T
	buf bytes.Buffer
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err == io.EOF {
			w.buf.WriteString(line) // not a whole line yet
			return len(p), nil
		}
		w.t.Log(strings.TrimRight(line, "\n"))
	}
}

func (w *logWriter) flush() {
	if w.buf.Len() > 0 {
		w.t.Log(w.buf.String())
		w.buf.Reset()
	}
}
