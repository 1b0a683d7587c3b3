package sandbox

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// TestAllowListNetwork: with an allow-list the command reaches the allowed
// names through the proxy (plain HTTP and CONNECT), nothing else, and every
// decision is reported.
func TestAllowListNetwork(t *testing.T) {
	skipUnlessSandbox(t)
	allowLoopbackForTests = true // the test's server lives on loopback
	defer func() { allowLoopbackForTests = false }()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ALLOWED-SERVICE") })}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	var mu sync.Mutex
	var decisions []ProxyDecision
	ws, _ := newWorkspace(t)
	spec := Spec{Workspace: ws, Net: NetAllow, Allow: []string{"localhost"}, UID: sandboxUID(),
		Env:    []string{"PATH=/usr/bin:/bin", "HOME=" + ws},
		Decide: func(d ProxyDecision) { mu.Lock(); decisions = append(decisions, d); mu.Unlock() }}
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
	if p.allowLocal(mustAddr("127.0.0.1")) || p.allowLocal(mustAddr("::1")) || p.allowLocal(mustAddr("169.254.1.1")) || !p.allowLocal(mustAddr("93.184.216.34")) {
		t.Fatal("address checks")
	}
	for _, bad := range [][]string{nil, {""}, {"http://x.com"}, {"a b.com"}, {"*"}, {"com"}} {
		if ValidateDomains(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
