package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/ui"
)

// browserKey marks a request made by the review page's session.
const browserKey ctxKey = 100

// isUIPath reports whether p is the review page's (/ui and below).
func isUIPath(p string) bool { return p == "/ui" || strings.HasPrefix(p, "/ui/") }

// serveUI answers the review page's own paths on TCP: the login, the
// session's CSRF token, and the page's files. None of them needs the
// bearer token; what they let a browser do is checked in browserCall.
func (s *Server) serveUI(w http.ResponseWriter, r *http.Request) {
	if s.UI == nil {
		writeError(w, paddock.Errorf(paddock.CodeNotFound, "this daemon serves no review page"))
		return
	}
	if err := sameOrigin(r); err != nil {
		writeError(w, err)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, paddock.Errorf(paddock.CodeBadRequest, "%s %s: the review page's paths answer GET only", r.Method, r.URL.Path))
		return
	}
	switch r.URL.Path {
	case "/ui":
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	case "/ui/login":
		s.UI.Login(w, r)
	case "/ui/session":
		ui.SetHeaders(w.Header())
		v, ok := s.UI.FromRequest(r)
		if !ok {
			writeError(w, paddock.Errorf(paddock.CodeForbidden, "not logged in: run `paddock ui` for a login link"))
			return
		}
		writeData(w, http.StatusOK, map[string]string{"csrf": v.CSRF})
	default:
		ui.Files(w, r)
	}
}

// browserCall admits a /v1 request that carries a review page session's
// cookie (and no bearer token) as its login's caller, if it comes from the
// page itself: the same origin when the browser says one, and the
// session's CSRF token on anything but a read. ok is false when r has no
// live session (the usual checks then apply).
func (s *Server) browserCall(r *http.Request) (*http.Request, bool, error) {
	if s.UI == nil || r.Header.Get("Authorization") != "" {
		return r, false, nil
	}
	v, ok := s.UI.FromRequest(r)
	if !ok {
		return r, false, nil
	}
	if err := sameOrigin(r); err != nil {
		return r, true, err
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !v.CheckCSRF(r.Header.Get(ui.CSRFHeader)) {
		return r, true, paddock.Errorf(paddock.CodeForbidden, "a change from the review page needs its session's %s header", ui.CSRFHeader)
	}
	// The session acts as whoever asked for its login link: a principal
	// (its role read again now: a principal removed is refused at once),
	// or the operator.
	c := operatorCaller(v.Who.Name + " (review page)")
	if v.Who.Principal != "" {
		if s.Principals == nil {
			return r, true, paddock.Errorf(paddock.CodeUnauthorized, "this review page session is %s's, and this daemon knows no principals", v.Who.Principal)
		}
		var err error
		c, err = s.Principals.Recheck(r.Context(), &paddock.Caller{Principal: v.Who.Principal, Token: v.Who.Token, Since: v.Who.Since})
		if paddock.IsCode(err, paddock.CodeUnauthorized) {
			return r, true, paddock.Errorf(paddock.CodeUnauthorized, "this review page session's principal %s, or the token its login link was made with, is no longer live; log in again (paddock ui)", v.Who.Principal)
		}
		if err != nil {
			return r, true, err
		}
	}
	ctx := context.WithValue(s.withLiveCheck(withCaller(r.Context(), c)), actorKey, c.Name)
	return r.WithContext(context.WithValue(ctx, browserKey, true)), true, nil
}

// sameOrigin refuses a browser's request that says it comes from another
// origin than the listener's own, or that names a foreign host (DNS
// rebinding).
func sameOrigin(r *http.Request) error {
	if !hostAllowed(r.Host, true) {
		return paddock.Errorf(paddock.CodeForbidden, "host %q is not allowed", r.Host)
	}
	self := "http://" + r.Host
	if o := r.Header.Get("Origin"); o != "" && o != self {
		return paddock.Errorf(paddock.CodeForbidden, "requests from other web pages are refused")
	}
	if ref := r.Header.Get("Referer"); ref != "" && ref != self && !strings.HasPrefix(ref, self+"/") {
		return paddock.Errorf(paddock.CodeForbidden, "requests from other web pages are refused")
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return paddock.Errorf(paddock.CodeForbidden, "requests from other web pages are refused")
	}
	return nil
}

// uiHandlers answer the review page's login link: its sessions, and the
// address it is served on (see Server.UI and UIAddr).
type uiHandlers struct {
	sessions *ui.Sessions
	addr     func(context.Context) (string, error)
}

// uiLogin answers POST /v1/ui/login: a one-time login URL for the review
// page on the daemon's loopback listener (started for it if need be).
// Anyone with a role asks, for themselves, and not from the page itself.
func (h *uiHandlers) uiLogin(r *http.Request) (any, error) {
	if browser, _ := r.Context().Value(browserKey).(bool); browser {
		return nil, paddock.Errorf(paddock.CodeForbidden, "a login link is asked for with `paddock ui`, not from the page")
	}
	if h.sessions == nil || h.addr == nil {
		return nil, paddock.Errorf(paddock.CodeUnsupported, "this daemon serves no review page")
	}
	addr, err := h.addr(r.Context())
	if err != nil {
		return nil, err
	}
	// The link logs its browser in as whoever asked for it.
	who := ui.Who{Name: actor(r)}
	if c := paddock.CallerOf(r.Context()); c != nil {
		who = ui.Who{Principal: c.Principal, Name: c.Name, Token: c.Token, Since: c.Since}
	}
	code := h.sessions.NewCode(who)
	return &paddock.UILogin{URL: "http://" + addr + "/ui/login?code=" + code, Expires: time.Now().Add(ui.CodeTTL).UTC()}, nil
}
