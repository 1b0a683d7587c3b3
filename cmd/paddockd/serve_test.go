package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/lifecycle"
)

// TestLogsAreRedacted: the daemon's log passes the funnel too.
func TestLogsAreRedacted(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		logger, err := newLogger(&buf, "info", format)
		if err != nil {
			t.Fatal(err)
		}
		key := "AKIAIOSFODNN7EXAMPLE"
		logger.Error("request failed", "cmd", "aws s3 ls --key "+key, "err", errors.New("open /x: token "+key))
		if strings.Contains(buf.String(), key) || !strings.Contains(buf.String(), "[REDACTED:aws_access_key]") {
			t.Fatalf("%s log: %s", format, buf.String())
		}
	}
}

// TestConfigWatch: a changed log_level is in effect at once unless a flag
// set it; other keys wait for a restart, and changing them back clears that.
func TestConfigWatch(t *testing.T) {
	home := t.TempDir()
	var logs bytes.Buffer
	level := new(slog.LevelVar)
	logger, _ := newLeveledLogger(&logs, level, "text")
	started, _ := loadConfig(home, "")
	flagged := map[string]bool{}
	w := &configWatch{home: home, flags: func(f string) bool { return flagged[f] }, flagValues: serveOptions{logLevel: "info"},
		started: started, level: level, m: &lifecycle.Manager{}, log: logger}
	w.current = started
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(home, "paddock.toml"), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		w.check()
	}
	write("log_level = \"warn\"\nchangeset_max_entries = 10\n")
	if level.Level() != slog.LevelWarn || !slices.Equal(w.restartNeeded(), []string{"changeset_max_entries"}) {
		t.Fatalf("level %v, restart needed for %v", level.Level(), w.restartNeeded())
	}
	write("log_level = \"warn\"\n")
	if len(w.restartNeeded()) != 0 {
		t.Fatalf("restart needed for %v after the change was undone", w.restartNeeded())
	}
	write("log_level = \"bogus\"\n")
	if level.Level() != slog.LevelWarn || !strings.Contains(logs.String(), "cannot be used") {
		t.Fatalf("a bad file changed the level to %v:\n%s", level.Level(), logs.String())
	}
	flagged["log-level"] = true
	write("log_level = \"error\"\n")
	if level.Level() != slog.LevelInfo {
		t.Fatalf("the file's level %v overrode --log-level info", level.Level())
	}
}

// TestRunServeInProcess: runServe, called as serve calls it, serves its
// state directory's socket with its status in daemon.json, and stops when
// its context ends, taking both away.
func TestRunServeInProcess(t *testing.T) {
	home := t.TempDir()
	logs := &syncBuffer{}
	env := map[string]string{"PADDOCK_NO_AUTOSTART": "1", "HOME": "/nonexistent"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, serveOptions{home: home, getenv: func(k string) string { return env[k] }, stderr: logs})
	}()
	info := filepath.Join(home, "daemon.json")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(info); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("runServe returned %v before serving:\n%s", err, logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("runServe wrote no daemon.json within 20s:\n%s", logs)
		}
	}
	st, err := client.Unix(filepath.Join(home, "paddock.sock")).Status(ctx)
	if err != nil || st.PID != os.Getpid() || st.StateDir != home {
		t.Fatalf("status %+v, %v\n%s", st, err, logs)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runServe: %v\n%s", err, logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("runServe did not return within 30s of its context's end")
	}
	for _, f := range []string{info, filepath.Join(home, "paddock.sock")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s is left after the daemon stopped (%v)", f, err)
		}
	}
}

// syncBuffer holds a log that goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTracingAndMetricsConfig: [tracing] and metrics_listen read as
// written; a bad endpoint or ratio is refused naming the key.
func TestTracingAndMetricsConfig(t *testing.T) {
	home := t.TempDir()
	for _, c := range []struct{ toml, err string }{
		{"metrics_listen = \"127.0.0.1:9464\"\n[tracing]\notlp_endpoint = \"http://127.0.0.1:4318/v1/traces\"\nsample_ratio = 0.25\n", ""},
		{"[tracing]\notlp_endpoint = \"grpc://collector:4317\"\n", "tracing.otlp_endpoint"},
		{"[tracing]\nsample_ratio = 2.0\n", "tracing.sample_ratio"},
		{"[tracing]\nendpoint = \"http://x\"\n", "endpoint"},
	} {
		os.WriteFile(filepath.Join(home, "paddock.toml"), []byte(c.toml), 0o600)
		cfg, err := loadConfig(home, "")
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%q: %v", c.toml, err)
		case c.err == "" && (cfg.MetricsListen != "127.0.0.1:9464" || cfg.Tracing.OTLPEndpoint == "" || *cfg.Tracing.SampleRatio != 0.25):
			t.Errorf("%q read as %+v", c.toml, cfg)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want one naming %s", c.toml, err, c.err)
		}
	}
	// Off by default: no endpoint, no tracer.
	tr, stop, err := startTracing(context.Background(), tracingConfig{}, func(string) string { return "" })
	if err != nil || tr != nil {
		t.Errorf("tracing without an endpoint: %v %v", tr, err)
	}
	stop()
}

// TestWebhookConfig: [[webhook]] tables are read strictly: a URL other
// than http(s), an unknown notice type, no secret or two, a second entry
// of one name are refused naming the entry (and never the secret); a
// secret_file is read relative to paddock.toml.
func TestWebhookConfig(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "hook.secret"), []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(body string) (config, error) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(home, "paddock.toml"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return loadConfig(home, "")
	}
	c, err := load(`
[[webhook]]
name = "ci"
url = "https://ci.example/hook"
events = ["changeset.submitted", "run.rejected"]
secret = "inline-secret-value"

[[webhook]]
name = "all"
url = "http://127.0.0.1:9/x"
secret_file = "hook.secret"
`)
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := c.webhooks(home)
	if err != nil || len(hooks) != 2 || string(hooks[0].Secret) != "inline-secret-value" || string(hooks[1].Secret) != "from-a-file" ||
		len(hooks[0].Events) != 2 || len(hooks[1].Events) != 0 || hooks[1].URL != "http://127.0.0.1:9/x" {
		t.Fatalf("webhooks = %+v, %v", hooks, err)
	}
	for body, want := range map[string]string{
		`[[webhook]]` + "\n" + `name = "x"` + "\n" + `url = "ftp://h/x"` + "\n" + `secret = "s3cret-zz"`:                                                                                                               `webhook "x": url`,
		`[[webhook]]` + "\n" + `name = "x"` + "\n" + `url = "file:///etc/passwd"` + "\n" + `secret = "s3cret-zz"`:                                                                                                      `webhook "x": url`,
		`[[webhook]]` + "\n" + `name = "x"` + "\n" + `url = "https://h/x"` + "\n" + `events = ["exec"]` + "\n" + `secret = "s3cret-zz"`:                                                                                `webhook "x": events: "exec"`,
		`[[webhook]]` + "\n" + `name = "x"` + "\n" + `url = "https://h/x"`:                                                                                                                                             `webhook "x": give it a secret`,
		`[[webhook]]` + "\n" + `name = "x"` + "\n" + `url = "https://h/x"` + "\n" + `secret = "s3cret-zz"` + "\n" + `secret_file = "hook.secret"`:                                                                      `webhook "x": give it a secret`,
		`[[webhook]]` + "\n" + `name = "x"` + "\n" + `url = "https://h/x"` + "\n" + `secret_file = "missing"`:                                                                                                          `webhook "x": secret_file`,
		`[[webhook]]` + "\n" + `url = "https://h/x"` + "\n" + `secret = "s3cret-zz"`:                                                                                                                                   `webhook #1: name`,
		`[[webhook]]` + "\n" + `name = "x"` + "\n" + `url = "https://h/x"` + "\n" + `secret = "s3cret-zz"` + "\n" + `[[webhook]]` + "\n" + `name = "x"` + "\n" + `url = "https://h/y"` + "\n" + `secret = "s3cret-zz"`: `a second webhook`,
		`[[webhook]]` + "\n" + `name = "x"` + "\n" + `url = "https://h/x"` + "\n" + `secret = "s3cret-zz"` + "\n" + `retries = 3`:                                                                                      `unknown key`,
	} {
		_, err := load(body)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s\n: error %v, want one saying %q", body, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret-zz") {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}
