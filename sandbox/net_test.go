//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
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
