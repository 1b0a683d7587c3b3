package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// contractSecret is the secret the contract's first run declares: long
// enough to be masked, with characters its URL and base64 forms change.
const contractSecret = "pdk-s3cr3t/Value+42"

// secretForms are the forms of v a command is likely to write: as is,
// base64 in both alphabets with and without padding, URL-encoded, hex.
func secretForms(v string) []string {
	b := []byte(v)
	return []string{v, base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
		url.QueryEscape(v), url.PathEscape(v), hex.EncodeToString(b)}
}

// requireNoSecret fails if the contract's secret, in any of its forms,
// is in the answers a client got or anywhere paddock keeps state: the
// database and its log, events, artifacts (change sets and their diffs
// on disk, job logs and results), logs. What is exempt holds the agent's
// work as bytes, the secret included, by design: the workspaces, the
// frozen blobs an apply writes, git's own object caches of them (zlib),
// and the secrets directory itself.
func requireNoSecret(t *testing.T, home, answers string) {
	t.Helper()
	requireNoValue(t, home, answers, contractSecret)
}

// requireNoValue is requireNoSecret for the secret API_TOKEN's value v.
func requireNoValue(t *testing.T, home, answers, v string) {
	t.Helper()
	forms := secretForms(v)
	for _, f := range forms {
		if strings.Contains(answers, f) {
			i := strings.Index(answers, f)
			t.Fatalf("an answer holds the secret as %q: …%s…", f, answers[max(0, i-200):min(len(answers), i+100)])
		}
	}
	if !strings.Contains(answers, "[REDACTED:API_TOKEN]") {
		t.Fatal("no answer shows the secret masked: the script did not exercise it")
	}
	exempt := func(rel string) bool {
		parts := strings.Split(rel, string(filepath.Separator))
		switch {
		case parts[0] == "workspaces" || parts[0] == "snapshots" || parts[0] == "secrets":
			return true
		case len(parts) > 2 && parts[0] == "artifacts" && (parts[2] == "blobs" || parts[2] == "gitcache"):
			return true
		}
		return false
	}
	checked := 0
	filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(home, p)
		if exempt(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		checked++
		for _, f := range forms {
			if bytes.Contains(b, []byte(f)) {
				t.Errorf("%s holds the secret as %q", rel, f)
			}
		}
		return nil
	})
	if checked < 5 {
		t.Fatalf("only %d files checked", checked)
	}
}
