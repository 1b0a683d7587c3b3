//go:build linux

package sandbox

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAllowListNetwork: with an allow-list the command reaches the allowed
// names through the proxy (plain HTTP and CONNECT), nothing else, and every
// decision is reported.
func TestAllowListNetwork(t *testing.T) {
	skipUnlessSandbox(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1); fmt.Fprint(w, "ALLOWED-SERVICE") })}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	var mu sync.Mutex
	var decisions []ProxyDecision
	ws, _ := newWorkspace(t)
	// The test's server lives on loopback: the operator allows that address.
	spec := Spec{Workspace: ws, Net: NetAllow, Allow: []string{"localhost"}, UID: sandboxUID(),
		AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Env:        []string{"PATH=/usr/bin:/bin", "HOME=" + ws},
		Decide:     func(d ProxyDecision) { mu.Lock(); decisions = append(decisions, d); mu.Unlock() }}
	curl := func(args ...string) *Result {
		s := spec
		s.Argv = append([]string{"curl", "-sS", "--max-time", "10"}, args...)
		var res *Result
		var err error
		if testPool != nil {
			res, err = testPool.Run(context.Background(), "r-test", s)
			if err == nil && res.Enforcement.Mode != "resident" {
				t.Fatalf("ran %s (%s), not through the harness", res.Enforcement.Mode, res.Enforcement.ModeReason)
			}
		} else {
			res, err = Run(context.Background(), s)
		}
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	url := fmt.Sprintf("http://localhost:%d/", port)
	if res := curl(url); res.ExitCode != 0 || string(res.Stdout) != "ALLOWED-SERVICE" {
		t.Fatalf("plain HTTP through the proxy: exit %d %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res := curl("--proxytunnel", url); res.ExitCode != 0 || string(res.Stdout) != "ALLOWED-SERVICE" {
		t.Fatalf("CONNECT through the proxy: exit %d %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res := curl("-f", "http://example.com/"); res.ExitCode == 0 {
		t.Fatalf("a name off the list was reached: %s", res.Stdout)
	}
	if res := curl("--noproxy", "*", fmt.Sprintf("http://127.0.0.1:%d/", port)); res.ExitCode == 0 {
		t.Fatalf("the host's loopback was reached around the proxy: %s", res.Stdout)
	}
	if res := curl("--noproxy", "*", "http://1.1.1.1/"); res.ExitCode == 0 {
		t.Fatal("a direct connection left the sandbox")
	}
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for _, d := range decisions {
		got = append(got, fmt.Sprintf("%s %s %v", d.Method, d.Host, d.Allowed))
	}
	if strings.Join(got, ",") != "GET localhost true,CONNECT localhost true,GET example.com false" {
		t.Fatalf("decisions: %v", got)
	}
	decisions = nil
	mu.Unlock()
	// Without the operator's address, an allowed name that resolves to the
	// host's loopback is refused before any connection: the host's service
	// is never reached, and an open port answers as a closed one does.
	spec.AllowAddrs = nil
	before := hits.Load()
	closed := fmt.Sprintf("http://localhost:%d/", freePort(t))
	open := curl("-s", "-o", "/dev/null", "-w", "%{http_code}", url)
	shut := curl("-s", "-o", "/dev/null", "-w", "%{http_code}", closed)
	if string(open.Stdout) != "403" || string(shut.Stdout) != "403" || hits.Load() != before {
		t.Fatalf("loopback without the operator's address: open port %q, closed port %q, %d hits", open.Stdout, shut.Stdout, hits.Load()-before)
	}
	mu.Lock()
	res, _ := Run(context.Background(), Spec{Argv: []string{"true"}, Workspace: ws, Net: NetAllow, UID: sandboxUID()})
	if res != nil {
		t.Fatal("an empty allow-list was accepted")
	}
}

func TestProxyRefusesLoopbackNames(t *testing.T) {
	p := &Proxy{Allow: []string{"localhost", ".example.com"}}
	if !p.allowed("a.example.com") || p.allowed("example.com.evil") || !p.allowed("LOCALHOST.") || p.allowed("evil.com") {
		t.Fatal("domain matching")
	}
	for _, a := range []string{"127.0.0.1", "::1", "169.254.1.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1",
		"0.0.0.0", "::", "fd00::1", "fe80::1", "224.0.0.1", "255.255.255.255", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
		"64:ff9b::7f00:1", "2002:7f00:1::", "198.18.0.1", "192.0.0.8"} {
		if p.reachable(mustAddr(a)) {
			t.Errorf("%s is reachable", a)
		}
	}
	for _, a := range []string{"93.184.216.34", "1.1.1.1", "2606:4700::1111", "::ffff:93.184.216.34"} {
		if !p.reachable(mustAddr(a)) {
			t.Errorf("%s is not reachable", a)
		}
	}
	p.AllowAddrs = []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}
	if !p.reachable(mustAddr("10.1.2.3")) || p.reachable(mustAddr("10.2.0.1")) {
		t.Error("the operator's addresses")
	}
	for _, bad := range [][]string{nil, {""}, {"http://x.com"}, {"a b.com"}, {"*"}, {"com"}} {
		if ValidateDomains(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestCommandGetsLessNetworkThanItsHarness: a run's agent holds the run's
// harness with a network (host, or an allow-list); a command the agent
// asks for with none is forked from that same harness into a network
// namespace of its own: it reaches nothing the harness reaches, not even
// the host's loopback, its own loopback is up, and its enforcement says
// so. Before #30 it was refused as busy on an overlay run (and ran
// per-exec on another kind) for as long as the agent ran.
func TestCommandGetsLessNetworkThanItsHarness(t *testing.T) {
	skipUnlessSandbox(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprint(c, "HOST-LOOPBACK\n")
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	reach := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && head -n1 <&3 || echo UNREACHED", port)
	// UDP on the command's own loopback: Landlock does not restrict UDP,
	// so this reads whether the loopback is up.
	loopUp := `python3 -c "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1',0)); s.sendto(b'LO-UP', s.getsockname()); print(s.recv(5).decode())"`
	for _, mode := range []Net{NetHost, NetAllow} {
		t.Run(string(mode), func(t *testing.T) {
			ws, _ := newWorkspace(t)
			p := &Pool{Dir: t.TempDir()}
			defer p.Close()
			base := Spec{Workspace: ws, UID: sandboxUID(), Env: []string{"PATH=/usr/bin:/bin", "HOME=" + ws}, Protected: []string{".git"}}
			agent := base
			agent.Net = mode
			if mode == NetAllow {
				agent.Allow = []string{"localhost"}
				agent.AllowAddrs = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
			}
			// The agent: a command with the harness's network that runs
			// while the others do.
			agent.Argv = []string{"sh", "-c", "sleep 3"}
			agentDone := make(chan *Result, 1)
			go func() {
				res, err := p.Run(context.Background(), "r-test", agent)
				if err != nil {
					t.Error(err)
				}
				agentDone <- res
			}()
			time.Sleep(500 * time.Millisecond)
			cmd := base
			cmd.Net = NetNone
			cmd.Argv = []string{"bash", "-c", reach + "; if command -v python3 >/dev/null; then " + loopUp + "; else echo LO-UP; fi"}
			res, err := p.Run(context.Background(), "r-test", cmd)
			if err != nil {
				t.Fatalf("a command with no network while the agent runs: %v", err)
			}
			e := res.Enforcement
			if got := string(res.Stdout); got != "UNREACHED\nLO-UP\n" {
				t.Errorf("the command's network: %q (stderr %s)", got, res.Stderr)
			}
			if !e.OwnNet || e.Net != "none" || e.Mode != "resident" || len(e.Allow) > 0 || !slices.Contains(e.Namespaces, "net") {
				t.Errorf("its enforcement: %+v", e)
			}
			a := <-agentDone
			if a == nil || a.Enforcement.HarnessPID != e.HarnessPID || a.Enforcement.OwnNet {
				t.Fatalf("the agent's harness %+v, the command's %d", a, e.HarnessPID)
			}
			if mode == NetHost {
				// The harness's own network is untouched: a command with
				// it reaches the host's loopback.
				h := agent
				h.Argv = []string{"bash", "-c", reach}
				if res, err := p.Run(context.Background(), "r-test", h); err != nil || string(res.Stdout) != "HOST-LOOPBACK\n" || res.Enforcement.HarnessPID != e.HarnessPID {
					t.Fatalf("a host command after it: %v %q %+v", err, res.Stdout, res.Enforcement)
				}
			}
		})
	}
}

// TestLoopbackWithoutNetwork: with no network a command still has its own
// loopback, so a test that starts a local server works (a Go test with
// httptest, a Python one with http.server); nothing else is reachable, the
// host's loopback included.
func TestLoopbackWithoutNetwork(t *testing.T) {
	skipUnlessSandbox(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 to serve on the loopback")
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ws, _ := newWorkspace(t)
	script := `import socket, threading
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
def serve():
    c, _ = s.accept(); c.sendall(b"OWN-LOOPBACK\n"); c.close()
threading.Thread(target=serve).start()
c = socket.create_connection(s.getsockname()); print(c.recv(64).decode().strip())
try:
    socket.create_connection(("127.0.0.1", ` + strconv.Itoa(port) + `), timeout=2); print("HOST-REACHED")
except OSError as e:
    print("host unreached")
`
	res := runSpec(t, Spec{Argv: []string{"python3", "-c", script}, Workspace: ws, Net: NetNone, UID: sandboxUID(), Env: []string{"PATH=/usr/bin:/bin"}})
	if got := string(res.Stdout); got != "OWN-LOOPBACK\nhost unreached\n" {
		t.Fatalf("a command with no network: %q (stderr %s)", got, res.Stderr)
	}
}

// TestCredentialTheCommandNeverSees: the proxy of an allow-list network
// sets a credential's header on the requests to its host, over HTTPS (the
// command's TLS opened under the daemon's authority, which only the
// command trusts) and plain HTTP alike; the command holds a placeholder,
// sends it, and the host receives the real value; nothing of it comes back
// into the sandbox, and the decision names the header, not the value.
func TestCredentialTheCommandNeverSees(t *testing.T) {
	skipUnlessSandbox(t)
	const real, placeholder = "sk-real-credential-4242", "paddock-placeholder"
	var mu sync.Mutex
	var seen []string
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("x-api-key"))
		mu.Unlock()
		if r.Header.Get("x-api-key") == real {
			fmt.Fprint(w, "KEY-ACCEPTED")
			return
		}
		http.Error(w, "bad key", http.StatusUnauthorized)
	})
	tlsSrv := httptest.NewTLSServer(handler)
	defer tlsSrv.Close()
	plainSrv := httptest.NewServer(handler)
	defer plainSrv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(tlsSrv.Certificate())
	ca, err := LoadProxyCA(filepath.Join(t.TempDir(), "proxy-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ws, _ := newWorkspace(t)
	if err := os.WriteFile(filepath.Join(ws, "ca.pem"), ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	var dmu sync.Mutex
	var decisions []ProxyDecision
	port := func(u string) string { return u[strings.LastIndex(u, ":")+1:] }
	script := fmt.Sprintf(`curl -sS --max-time 10 --cacert ca.pem -H "x-api-key: $KEY" https://127.0.0.1:%s/v1/messages; echo
curl -sS --max-time 10 -H "x-api-key: $KEY" http://127.0.0.1:%s/v1/messages; echo
echo "$KEY" | rev`, port(tlsSrv.URL), port(plainSrv.URL))
	res := runSpec(t, Spec{Argv: []string{"bash", "-c", script}, Workspace: ws, Net: NetAllow, Allow: []string{"127.0.0.1"},
		AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, UID: sandboxUID(),
		Env:         []string{"PATH=/usr/bin:/bin", "HOME=" + ws, "KEY=" + placeholder},
		Credentials: []Credential{{Host: "127.0.0.1", Header: "x-api-key", Value: real}}, ProxyCA: ca, UpstreamRoots: roots,
		Decide: func(d ProxyDecision) { dmu.Lock(); decisions = append(decisions, d); dmu.Unlock() }})
	want := "KEY-ACCEPTED\nKEY-ACCEPTED\nredlohecalp-kcoddap\n"
	if got := string(res.Stdout); got != want {
		t.Fatalf("through the proxy: %q, want %q (stderr %s)", got, want, res.Stderr)
	}
	if strings.Contains(string(res.Stdout)+string(res.Stderr), real) {
		t.Fatal("the credential reached the command")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != real || seen[1] != real {
		t.Fatalf("the host received %q", seen)
	}
	dmu.Lock()
	defer dmu.Unlock()
	b, _ := json.Marshal(decisions)
	if len(decisions) < 2 || decisions[0].Credential != "x-api-key" || strings.Contains(string(b), real) {
		t.Fatalf("decisions: %s", b)
	}
}
