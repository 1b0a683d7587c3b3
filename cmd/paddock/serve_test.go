package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
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
