package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/ui"
)

// TestRedteam3BrowserEdges: what a browser or a local process holding the
// page's cookie could try beyond TestReviewPageSession (held): hosts that
// only look local, origins that differ by a dot, a port or a scheme, a
// change without the token whatever its method, body type or override
// header, and the token taken from another session.
func TestRedteam3BrowserEdges(t *testing.T) {
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
