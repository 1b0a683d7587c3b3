package ui

import (
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

	c := s.NewCode()
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
	late := s.NewCode()
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

	first := s.NewCode()
	for range maxPending {
		now = now.Add(time.Millisecond)
		s.NewCode()
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
