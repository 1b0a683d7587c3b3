package lifecycle_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/sandbox"
)

// TestCredentialsTheRunNeverSees: #30 item 3. A run made with a
// credential rule (the built-in anthropic one, its host moved to a test
// server on loopback) holds a placeholder in ANTHROPIC_API_KEY; its
// commands with an allow-list network reach the host, over HTTPS (the
// run trusting the proxy's authority through its environment alone) and
// plain HTTP, and the host receives the daemon's secret; `echo $KEY | rev`
// prints the placeholder reversed; nothing the run records holds the
// value. A command with no network gets no credential. A rule whose
// secret the daemon lacks says where to put it.
func TestCredentialsTheRunNeverSees(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	const real = "sk-ant-real-credential-9191"
	e.m.Secret = func(name string) (string, bool) { return real, name == "ANTHROPIC_API_KEY" }
	var mu sync.Mutex
	var seen []string
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("x-api-key"))
		mu.Unlock()
		if r.Header.Get("x-api-key") != real {
			http.Error(w, "not logged in", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "LOGGED-IN")
	})
	tlsSrv := httptest.NewTLSServer(handler)
	defer tlsSrv.Close()
	plainSrv := httptest.NewServer(handler)
	defer plainSrv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(tlsSrv.Certificate())
	ca, err := sandbox.LoadProxyCA(filepath.Join(t.TempDir(), "proxy-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	e.m.ProxyCA, e.m.ProxyUpstreamRoots = ca, roots
	e.m.NetAllowAddrs = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	ctx := context.Background()
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "overlay",
		Credentials: []paddock.CredentialRule{{Use: "anthropic", Host: "127.0.0.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	port := func(u string) string { return u[strings.LastIndex(u, ":")+1:] }
	script := fmt.Sprintf(`curl -sS --max-time 10 -H "x-api-key: $ANTHROPIC_API_KEY" https://127.0.0.1:%s/v1/messages; echo
curl -sS --max-time 10 -H "x-api-key: $ANTHROPIC_API_KEY" http://127.0.0.1:%s/v1/messages; echo
echo "$ANTHROPIC_API_KEY" | rev
env | grep -c %s || true`, port(tlsSrv.URL), port(plainSrv.URL), real)
	res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"bash", "-c", script}, Net: "allow=127.0.0.1", Session: true})
	if err != nil {
		t.Fatal(err)
	}
	placeholder := paddock.CredentialPlaceholder("ANTHROPIC_API_KEY")
	rev := []rune(placeholder)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if want := "LOGGED-IN\nLOGGED-IN\n" + string(rev) + "\n0\n"; res.Stdout != want {
		t.Fatalf("the run's requests: %q, want %q (stderr %s)", res.Stdout, want, res.Stderr)
	}
	mu.Lock()
	if len(seen) != 2 || seen[0] != real || seen[1] != real {
		t.Fatalf("the host received %q", seen)
	}
	mu.Unlock()
	// With no network, no credential: the command holds the placeholder
	// and reaches nothing.
	res, err = e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"bash", "-c", "echo $ANTHROPIC_API_KEY; curl -sS --max-time 3 http://127.0.0.1:" + port(plainSrv.URL) + "/ || echo UNREACHED"}})
	if err != nil || !strings.HasPrefix(res.Stdout, placeholder+"\n") || !strings.Contains(res.Stdout, "UNREACHED") {
		t.Fatalf("a command with no network: %v %+v", err, res)
	}
	evs, _ := e.m.Runs.Events(ctx, r.ID, 0, 0)
	got, _ := e.m.Run(ctx, r.ID)
	for what, v := range map[string]any{"events": evs, "run": got} {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), real) {
			t.Fatalf("the run's %s hold the credential", what)
		}
	}
	if b, _ := json.Marshal(evs); !strings.Contains(string(b), `"credential":"x-api-key"`) {
		t.Fatalf("no network decision names the credential's header: %s", b)
	}
	// A secret the daemon lacks.
	r2, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone", Credentials: []paddock.CredentialRule{{Use: "openai"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Broker.Exec(ctx, r2.ID, paddock.ExecRequest{Argv: []string{"true"}}); !paddock.IsCode(err, paddock.CodeBadRequest) || !strings.Contains(err.Error(), "secrets/OPENAI_API_KEY") {
		t.Fatalf("a credential with no secret: %v", err)
	}
}
