package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/ui"
)

// page sends a request as a browser on the review page's listener would:
// to 127.0.0.1:4567, with the headers given.
func page(h http.Handler, method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://127.0.0.1:4567"+path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func errCode(t *testing.T, rec *httptest.ResponseRecorder) paddock.Code {
	t.Helper()
	var a answer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil || a.Error == nil {
		t.Fatalf("not an error envelope: %d %q", rec.Code, rec.Body)
	}
	return a.Error.Code
}

// TestReviewPageSession: the review page's way in, as a browser takes it:
// a one-time code from the operator, a cookie for it, and then the API as
// the operator, but only from the page itself (its origin, its CSRF token).
func TestReviewPageSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.newRun(t)
	tcp := f.srv.TCPHandler()

	// The operator asks for a link, on the unix socket.
	a := f.do(t, f.h, "POST", "/v1/ui/login", "")
	var l paddock.UILogin
	json.Unmarshal(a.Data, &l)
	u, err := url.Parse(l.URL)
	if a.status != 201 || err != nil || u.Host != "127.0.0.1:4567" || u.Path != "/ui/login" || len(u.Query().Get("code")) != 64 {
		t.Fatalf("login link: %d %+v %+v", a.status, l, a.Error)
	}
	// Nobody else gets one: not without the token on TCP (unauthorized),
	// not a run's token (forbidden).
	if rec := page(tcp, "POST", "/v1/ui/login", ""); rec.Code != 401 {
		t.Fatalf("a link for anyone on TCP: %d", rec.Code)
	}
	b := f.bootstrap(t)
	if rec := page(tcp, "POST", "/v1/ui/login", "", "Authorization", "Bearer "+b.Token); rec.Code != 403 {
		t.Fatalf("a link for a run's agent: %d", rec.Code)
	}

	// A wrong code, then the right one, once.
	if rec := page(tcp, "GET", "/ui/login?code=0000", ""); rec.Code != 403 || !strings.Contains(rec.Body.String(), "paddock ui") {
		t.Fatalf("a wrong code: %d %s", rec.Code, rec.Body)
	}
	rec := page(tcp, "GET", u.RequestURI(), "")
	cookies := rec.Result().Cookies()
	if rec.Code != 303 || rec.Header().Get("Location") != "/ui/" || len(cookies) != 1 {
		t.Fatalf("login: %d %v %v", rec.Code, rec.Header(), cookies)
	}
	c := cookies[0]
	if c.Name != "paddock_ui_4567" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Fatalf("the cookie: %+v", c)
	}
	if rec := page(tcp, "GET", u.RequestURI(), ""); rec.Code != 403 {
		t.Fatalf("a code used twice: %d", rec.Code)
	}
	cookie := c.Name + "=" + c.Value

	// The session's CSRF token, for the page's script.
	rec = page(tcp, "GET", "/ui/session", "", "Cookie", cookie)
	var sess struct {
		Data struct{ CSRF string } `json:"data"`
	}
	json.Unmarshal(rec.Body.Bytes(), &sess)
	if rec.Code != 200 || len(sess.Data.CSRF) != 64 || rec.Header().Get("Content-Security-Policy") != ui.ContentSecurityPolicy {
		t.Fatalf("session: %d %s %v", rec.Code, rec.Body, rec.Header())
	}
	if rec := page(tcp, "GET", "/ui/session", ""); rec.Code != 403 {
		t.Fatalf("a session without its cookie: %d", rec.Code)
	}
	if rec := page(tcp, "GET", "/ui/session", "", "Cookie", "paddock_ui_9999="+c.Value); rec.Code != 403 {
		t.Fatalf("another port's cookie: %d", rec.Code)
	}

	// Reads as the operator, from the page's own origin or none said.
	for _, hdr := range [][]string{
		{"Cookie", cookie},
		{"Cookie", cookie, "Origin", "http://127.0.0.1:4567", "Sec-Fetch-Site", "same-origin"},
		{"Cookie", cookie, "Referer", "http://127.0.0.1:4567/ui/"},
	} {
		if rec := page(tcp, "GET", "/v1/runs", "", hdr...); rec.Code != 200 {
			t.Fatalf("a read from the page %v: %d %s", hdr, rec.Code, rec.Body)
		}
	}
	f.svc.asked()
	// Never from another page, another host (DNS rebinding), or across sites.
	for _, hdr := range [][]string{
		{"Cookie", cookie, "Origin", "http://evil.example"},
		{"Cookie", cookie, "Origin", "http://127.0.0.1:4568"},
		{"Cookie", cookie, "Referer", "http://127.0.0.1:45670/"},
		{"Cookie", cookie, "Sec-Fetch-Site", "cross-site"},
		{"Cookie", cookie, "Sec-Fetch-Site", "same-site"},
	} {
		if rec := page(tcp, "GET", "/v1/runs", "", hdr...); rec.Code != 403 {
			t.Errorf("a read from elsewhere %v: %d", hdr, rec.Code)
		}
	}
	req := httptest.NewRequest("GET", "http://evil.example:4567/v1/runs", nil)
	req.Header.Set("Cookie", cookie)
	rebound := httptest.NewRecorder()
	tcp.ServeHTTP(rebound, req)
	if rebound.Code != 403 {
		t.Fatalf("a rebound host: %d", rebound.Code)
	}

	// A change needs the CSRF token: none, a wrong one, then the right one.
	approve := "/v1/runs/" + r.ID + "/approve"
	for _, hdr := range [][]string{
		{"Cookie", cookie},
		{"Cookie", cookie, ui.CSRFHeader, strings.Repeat("0", 64)},
		{"Cookie", cookie, ui.CSRFHeader, c.Value}, // the session's id is not its token
	} {
		if rec := page(tcp, "POST", approve, `{"hash":"h1"}`, hdr...); rec.Code != 403 || errCode(t, rec) != paddock.CodeForbidden {
			t.Errorf("an approve without the CSRF token %v: %d", hdr, rec.Code)
		}
	}
	if calls := f.svc.asked(); len(calls) != 0 {
		t.Fatalf("refused changes reached the service: %+v", calls)
	}
	rec = page(tcp, "POST", approve, `{"hash":"h1"}`, "Cookie", cookie, ui.CSRFHeader, sess.Data.CSRF, "Origin", "http://127.0.0.1:4567")
	if got := f.svc.whats(); rec.Code != 200 || !strings.HasPrefix(got, "Approve "+r.ID+" h1 unknown (review page)") {
		t.Fatalf("the page's approve: %d %s, asked %q", rec.Code, rec.Body, got)
	}
	// The page cannot mint links for itself.
	if rec := page(tcp, "POST", "/v1/ui/login", "", "Cookie", cookie, ui.CSRFHeader, sess.Data.CSRF); rec.Code != 403 {
		t.Fatalf("a link from the page: %d", rec.Code)
	}
	// Without the cookie, what a web page sends is refused as before.
	if rec := page(tcp, "GET", "/v1/runs", "", "Authorization", "Bearer t0k3n", "Origin", "http://127.0.0.1:4567"); rec.Code != 403 {
		t.Fatalf("a bearer token from a page: %d", rec.Code)
	}
	// The unix socket serves no page and takes no cookie.
	if rec := page(f.h, "GET", "/ui/", ""); rec.Code != 404 {
		t.Fatalf("the page on the unix socket: %d", rec.Code)
	}
	if rec := page(f.h, "GET", "/v1/runs", "", "Cookie", cookie, "Origin", "http://127.0.0.1:4567"); rec.Code != 403 {
		t.Fatalf("a cookie on the unix socket: %d", rec.Code)
	}
}

// TestReviewPageFiles: the page's files, each with the security headers,
// and nothing else under /ui.
func TestReviewPageFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tcp := f.srv.TCPHandler()
	rec := page(tcp, "GET", "/ui", "")
	if rec.Code != 301 || rec.Header().Get("Location") != "/ui/" {
		t.Fatalf("/ui: %d %v", rec.Code, rec.Header())
	}
	rec = page(tcp, "GET", "/ui/", "")
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(rec.Body.String(), "app.js") {
		t.Fatalf("/ui/: %d %v %q", rec.Code, rec.Header(), rec.Body)
	}
	if rec := page(tcp, "GET", "/ui/app.js", ""); rec.Code != 200 || rec.Header().Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("/ui/app.js: %d %v", rec.Code, rec.Header())
	}
	for k, v := range map[string]string{"Content-Security-Policy": ui.ContentSecurityPolicy, "X-Frame-Options": "DENY",
		"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
		if rec.Header().Get(k) != v {
			t.Errorf("/ui/: %s is %q", k, rec.Header().Get(k))
		}
	}
	for _, p := range []string{"/ui/.gitkeep", "/ui/../httpapi.go", "/ui/%2e%2e/x", "/ui/nothing.js", "/ui/a//b"} {
		if rec := page(tcp, "GET", p, ""); rec.Code != 404 && rec.Code != 301 {
			t.Errorf("%s: %d", p, rec.Code)
		}
	}
	if rec := page(tcp, "POST", "/ui/", ""); rec.Code != 400 {
		t.Errorf("a POST to the page: %d", rec.Code)
	}
	if rec := page(tcp, "GET", "/ui/", "", "Origin", "http://evil.example"); rec.Code != 403 {
		t.Errorf("the page for another origin: %d", rec.Code)
	}
}

// TestReviewPageRefusesLookalikes: what a browser or a local process
// holding the page's cookie could try beyond TestReviewPageSession is
// refused: hosts that only look local, origins that differ by a dot, a
// port or a scheme, a change without the token whatever its method, body
// type or override header, and the token taken from another session.
func TestReviewPageRefusesLookalikes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.newRun(t)
	tcp := f.srv.TCPHandler()
	login := func() (cookie, csrf string) {
		a := f.do(t, f.h, "POST", "/v1/ui/login", "")
		var l paddock.UILogin
		json.Unmarshal(a.Data, &l)
		u, _ := url.Parse(l.URL)
		c := page(tcp, "GET", u.RequestURI(), "").Result().Cookies()[0]
		cookie = c.Name + "=" + c.Value
		var sess struct {
			Data struct{ CSRF string } `json:"data"`
		}
		json.Unmarshal(page(tcp, "GET", "/ui/session", "", "Cookie", cookie).Body.Bytes(), &sess)
		return cookie, sess.Data.CSRF
	}
	cookie, csrf := login()
	_, otherCSRF := login()

	for _, host := range []string{"localhost.:4567", "127.0.0.1.:4567", "LOCALHOST:4567", "127.1:4567", "0x7f000001:4567",
		"[::ffff:127.0.0.1]:4567", "127.0.0.1:4567.evil.example", "evil.example", "127.0.0.1@evil.example:4567"} {
		req := httptest.NewRequest("GET", "http://127.0.0.1:4567/v1/runs", nil)
		req.Host = host
		req.Header.Set("Cookie", cookie)
		rec := httptest.NewRecorder()
		tcp.ServeHTTP(rec, req)
		// Refused as a foreign host, before any credential is read.
		if rec.Code != 403 {
			t.Errorf("host %q with the cookie: %d", host, rec.Code)
		}
	}
	for _, hdr := range [][]string{
		{"Origin", "null"}, {"Origin", "http://127.0.0.1:4567."}, {"Origin", "https://127.0.0.1:4567"}, {"Origin", "http://127.0.0.1"},
		{"Origin", "http://localhost:4567"}, {"Origin", "http://127.0.0.1:4567/"}, {"Referer", "http://127.0.0.1:4567.evil.example/"},
		{"Referer", "http://127.0.0.1:45678/ui/"}, {"Sec-Fetch-Site", "same-site"}, {"Sec-Fetch-Site", "cross-site"},
	} {
		if rec := page(tcp, "GET", "/v1/runs", "", append([]string{"Cookie", cookie}, hdr...)...); rec.Code != 403 {
			t.Errorf("a read with %v: %d", hdr, rec.Code)
		}
	}
	f.svc.asked()
	reject := "/v1/runs/" + r.ID + "/reject"
	for _, c := range []struct {
		method string
		hdr    []string
	}{
		{"POST", []string{"Content-Type", "text/plain"}},
		{"POST", []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{"POST", []string{"X-HTTP-Method-Override", "GET"}},
		{"POST", []string{ui.CSRFHeader, otherCSRF}},
		{"POST", []string{ui.CSRFHeader, " " + csrf}},
		{"POST", []string{ui.CSRFHeader, strings.ToUpper(csrf)}},
		{"POST", []string{"Authorization", "", ui.CSRFHeader, ""}},
		{"HEAD", nil}, {"OPTIONS", nil}, {"PUT", nil},
	} {
		rec := page(tcp, c.method, reject, "", append([]string{"Cookie", cookie}, c.hdr...)...)
		if rec.Code < 400 {
			t.Errorf("%s reject with %v: %d", c.method, c.hdr, rec.Code)
		}
	}
	if calls := f.svc.asked(); len(calls) != 0 {
		t.Fatalf("refused changes reached the service: %+v", calls)
	}
	// The cookie never rides along a bearer token: a run's token keeps
	// its own reach.
	b := f.bootstrap(t)
	if rec := page(tcp, "POST", "/v1/runs/"+r.ID+"/approve", `{"hash":"h1"}`, "Cookie", cookie, ui.CSRFHeader, csrf,
		"Authorization", "Bearer "+b.Token); rec.Code != 403 {
		t.Errorf("a run's token with the page's cookie approved: %d", rec.Code)
	}
}
