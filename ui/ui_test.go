package ui

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCodesAndSessions: a code works once and only until it expires; a
// session lasts SessionTTL; each has its own CSRF token; the oldest make
// room when too many wait.
func TestCodesAndSessions(t *testing.T) {
	s := NewSessions()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }

	c := s.NewCode(Who{Name: "ann"})
	v, ok := s.Redeem(c)
	if !ok || v.ID == "" || v.CSRF == "" || v.ID == v.CSRF {
		t.Fatalf("redeem: %+v %v", v, ok)
	}
	if _, ok := s.Redeem(c); ok {
		t.Fatal("a code redeemed twice")
	}
	if _, ok := s.Redeem(""); ok {
		t.Fatal("an empty code redeemed")
	}
	if got, ok := s.Lookup(v.ID); !ok || got != v || !v.CheckCSRF(v.CSRF) || v.CheckCSRF("") || v.CheckCSRF(v.ID) {
		t.Fatalf("lookup: %+v %v", got, ok)
	}
	late := s.NewCode(Who{Name: "ann"})
	now = now.Add(CodeTTL)
	if _, ok := s.Redeem(late); ok {
		t.Fatal("an expired code redeemed")
	}
	now = now.Add(SessionTTL - CodeTTL - time.Second)
	if _, ok := s.Lookup(v.ID); !ok {
		t.Fatal("a session ended early")
	}
	now = now.Add(time.Second)
	if _, ok := s.Lookup(v.ID); ok {
		t.Fatal("an expired session still works")
	}

	first := s.NewCode(Who{Name: "ann"})
	for range maxPending {
		now = now.Add(time.Millisecond)
		s.NewCode(Who{Name: "ann"})
	}
	if _, ok := s.Redeem(first); ok || len(s.codes) != maxPending {
		t.Fatalf("the oldest code was not dropped (%d held)", len(s.codes))
	}
}

func TestCookieName(t *testing.T) {
	for host, want := range map[string]string{"127.0.0.1:4567": "paddock_ui_4567", "[::1]:80": "paddock_ui_80", "localhost": "paddock_ui_80"} {
		if got := CookieName(host); got != want {
			t.Errorf("%s: %s, want %s", host, got, want)
		}
	}
}

// TestDistIsBuiltFromTheSources: ui/dist/BUILD.json, written by the build,
// names every source file under ui/web with its sha256, and every built
// file with its own: a source changed without a rebuild (or a built file
// changed by hand) fails here, with no npm needed.
func TestDistIsBuiltFromTheSources(t *testing.T) {
	raw, err := os.ReadFile("dist/BUILD.json")
	if err != nil {
		t.Fatalf("ui/dist has no BUILD.json: build it (cd ui/web && npm ci && npm run build): %v", err)
	}
	var b struct {
		Sources map[string]string `json:"sources"`
		Outputs map[string]string `json:"outputs"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	err = filepath.WalkDir("web", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, "web/"))
		seen[rel] = true
		if want, ok := b.Sources[rel]; !ok {
			t.Errorf("ui/web/%s is not in the build record: rebuild ui/dist (npm run build in ui/web)", rel)
		} else if got := sha256File(t, p); got != want {
			t.Errorf("ui/web/%s changed since ui/dist was built: rebuild it (npm run build in ui/web)", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range b.Sources {
		if !seen[rel] {
			t.Errorf("the build record names ui/web/%s, which is gone: rebuild ui/dist", rel)
		}
	}
	if len(b.Outputs) == 0 {
		t.Fatal("the build record names no built file")
	}
	for name, want := range b.Outputs {
		if got := sha256File(t, filepath.Join("dist", name)); got != want {
			t.Errorf("ui/dist/%s is not what the build wrote", name)
		}
	}
	if _, err := fs.ReadFile(Assets(), "index.html"); err != nil {
		t.Errorf("the embedded page has no index.html: %v", err)
	}
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestFrontEndUnits runs the front end's own unit tests (node --test:
// the diff splitting, git's name decoding, the escapes of invisible
// characters). They need node only, no npm package; without node they
// skip, except under CI=true.
func TestFrontEndUnits(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and node is missing")
		}
		t.Skip("the front end's unit tests need node")
	}
	cmd := exec.Command(node, "--test", "test/")
	cmd.Dir = "web"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
}
