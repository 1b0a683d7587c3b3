package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
