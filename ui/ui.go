// Package ui is the review page: the browser front end the daemon serves
// at /ui on its loopback TCP listener, and the sessions that let a
// browser use the API.
//
// The front end's sources are in ui/web (built with esbuild from pinned
// npm packages by `npm run build`); what the build writes is ui/dist,
// checked in and embedded here, so that `go build` alone gives a complete
// paddock and nothing is fetched from elsewhere at run time.
//
// A browser gets in only through a one-time code: `paddock ui` asks the
// daemon (over its unix socket, as the operator) for a login URL, and
// opening it trades the code for a session cookie (HttpOnly,
// SameSite=Strict). A request that carries the cookie acts as the
// operator; one that changes anything must also carry the session's CSRF
// token in the X-Paddock-CSRF header, which only the page's own script
// can read (GET /ui/session). The page is served with a strict
// Content-Security-Policy: no inline script or style, nothing from
// another origin.
package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed all:dist
var dist embed.FS

// Assets is the built front end (ui/dist).
func Assets() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // dist is embedded: it is always there
	}
	return sub
}

// CSRFHeader carries a session's CSRF token on every request that changes
// something.
const CSRFHeader = "X-Paddock-CSRF"

// CodeTTL is how long a login code may wait to be used; SessionTTL how
// long a session lasts (a new `paddock ui` gives a new one).
var (
	CodeTTL    = 2 * time.Minute
	SessionTTL = 12 * time.Hour
)

// maxPending bounds the codes and the sessions held at once: the oldest
// make room.
const maxPending = 64

// ContentSecurityPolicy is sent with every page and file of the front end.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Session is a browser's session.
type Session struct {
	ID      string
	CSRF    string
	Expires time.Time
	// Who logged in: the session acts as them.
	Who Who
}

// Who is whom a login code, and the session it opens, is for: a
// principal (by name; its role is read at each call), or the operator
// (Principal empty), named as the record names them.
type Who struct {
	Principal string
	Name      string
	// Token is the id of the token the link was asked for with, and
	// Since when the principal was made: the session lasts while both
	// do (the API checks them at each call).
	Token string
	Since time.Time
}

type pending struct {
	expires time.Time
	who     Who
}

// Sessions holds the one-time login codes and the sessions, in memory: a
// daemon's restart ends them.
type Sessions struct {
	mu       sync.Mutex
	now      func() time.Time
	codes    map[string]pending
	sessions map[string]*Session
}

// NewSessions returns an empty set.
func NewSessions() *Sessions {
	return &Sessions{now: time.Now, codes: map[string]pending{}, sessions: map[string]*Session{}}
}

// NewCode returns a login code for who, good once, for CodeTTL.
func (s *Sessions) NewCode(who Who) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	if len(s.codes) >= maxPending {
		dropOldest(s.codes, func(p pending) time.Time { return p.expires })
	}
	c := token()
	s.codes[c] = pending{expires: s.now().Add(CodeTTL), who: who}
	return c
}

// Redeem trades a code for a new session; a code works once.
func (s *Sessions) Redeem(code string) (*Session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	p, ok := s.codes[code]
	if !ok || code == "" {
		return nil, false
	}
	delete(s.codes, code)
	if len(s.sessions) >= maxPending {
		dropOldest(s.sessions, func(v *Session) time.Time { return v.Expires })
	}
	v := &Session{ID: token(), CSRF: token(), Expires: s.now().Add(SessionTTL), Who: p.who}
	s.sessions[v.ID] = v
	return v, true
}

// Lookup returns the live session of id.
func (s *Sessions) Lookup(id string) (*Session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	for k, v := range s.sessions {
		// Compared in constant time, as every credential is.
		if subtle.ConstantTimeCompare([]byte(k), []byte(id)) == 1 {
			return v, true
		}
	}
	return nil, false
}

// CheckCSRF reports whether got is the session's CSRF token.
func (v *Session) CheckCSRF(got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(v.CSRF)) == 1
}

func (s *Sessions) expire() {
	now := s.now()
	for k, p := range s.codes {
		if !now.Before(p.expires) {
			delete(s.codes, k)
		}
	}
	for k, v := range s.sessions {
		if !now.Before(v.Expires) {
			delete(s.sessions, k)
		}
	}
}

func dropOldest[V any](m map[string]V, when func(V) time.Time) {
	var oldest string
	var t time.Time
	for k, v := range m {
		if oldest == "" || when(v).Before(t) {
			oldest, t = k, when(v)
		}
	}
	delete(m, oldest)
}

func token() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// CookieName is the session cookie's name on a listener's port: cookies
// are shared between a host's ports, and two daemons on one machine must
// not overwrite each other's.
func CookieName(host string) string {
	port := host[strings.LastIndexByte(host, ':')+1:]
	if port == host || port == "" {
		port = "80"
	}
	return "paddock_ui_" + port
}

// FromRequest returns the session r's cookie names, if it is live.
func (s *Sessions) FromRequest(r *http.Request) (*Session, bool) {
	c, err := r.Cookie(CookieName(r.Host))
	if err != nil || c.Value == "" {
		return nil, false
	}
	return s.Lookup(c.Value)
}

// SetHeaders sets the headers every answer under /ui carries.
func SetHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// Login answers GET /ui/login?code=…: a good code sets the session's
// cookie and sends the browser to the page; anything else is refused
// with a page that says how to get in.
func (s *Sessions) Login(w http.ResponseWriter, r *http.Request) {
	SetHeaders(w.Header())
	v, ok := s.Redeem(r.URL.Query().Get("code"))
	if !ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte("This login link is not valid: it was used already, or it expired.\nRun `paddock ui` for a new one.\n"))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName(r.Host), Value: v.ID, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Expires: v.Expires})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// Files answers GET /ui/ and /ui/NAME from the built front end: the page
// for /ui/, its files by name, not found for anything else (no listing).
func Files(w http.ResponseWriter, r *http.Request) {
	SetHeaders(w.Header())
	name := strings.TrimPrefix(r.URL.Path, "/ui/")
	if name == "" {
		name = "index.html"
	}
	if name != path.Clean(name) || strings.HasPrefix(path.Base(name), ".") || !fs.ValidPath(name) {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(Assets(), name)
	if err != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		if name == "index.html" {
			w.Write([]byte("this paddock was built without its review page (ui/dist is empty)\n"))
		}
		return
	}
	w.Header().Set("Content-Type", contentType(name))
	w.Write(b)
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".json":
		return "application/json"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".woff2":
		return "font/woff2"
	}
	return "application/octet-stream"
}
