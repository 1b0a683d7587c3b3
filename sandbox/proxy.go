//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ProxyPort is where, inside the sandbox's network namespace, the command
// finds its HTTP proxy (HTTP_PROXY and HTTPS_PROXY point there).
const ProxyPort = 3128

// ProxyDecision is one connection the proxy allowed or denied.
type ProxyDecision struct {
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Method  string `json:"method"` // CONNECT, or the plain HTTP method
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
	// Credential names the headers the proxy set on the connection's
	// requests (their values are never recorded).
	Credential string `json:"credential,omitempty"`
}

// Proxy is the host side of an allow-list network: an HTTP proxy (CONNECT and
// plain HTTP) on a unix socket, which the sandbox's helper bridges to
// 127.0.0.1:ProxyPort inside the command's empty network namespace. Only
// hosts on the allow-list are reached; every decision is reported.
//
// An allowed name is resolved first and only its public addresses are
// dialled, by address (a second lookup could answer otherwise): never the
// host's loopback, a private, link-local, shared (CGNAT), multicast or
// reserved address, unless the operator allows that address (AllowAddrs).
// A name that resolves only to such addresses is refused without any
// connection, so a command cannot tell an open port of the host or its
// network from a closed one.
type Proxy struct {
	// Allow lists the domains: "example.com" allows it alone, ".example.com"
	// or "*.example.com" its subdomains.
	Allow []string
	// AllowAddrs are the local or private addresses the operator lets
	// allowed names reach (a registry on the LAN, say).
	AllowAddrs []netip.Prefix
	// Decide is called for every connection, allowed or denied.
	Decide func(ProxyDecision)
	// Resolve looks a name up; the system resolver by default.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial reaches an address; net.Dialer's by default.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Credentials are headers set on the requests to their hosts
	// (credential.go); an HTTPS host's need CA.
	Credentials []Credential
	// CA signs the certificates of the hosts whose HTTPS is opened to set
	// credentials; UpstreamRoots verify those hosts (the system's if nil).
	CA            *ProxyCA
	UpstreamRoots *x509.CertPool

	ln   net.Listener
	dir  string
	wg   sync.WaitGroup
	done chan struct{}
}

// ValidateDomains checks an allow-list.
func ValidateDomains(domains []string) error {
	if len(domains) == 0 {
		return fmt.Errorf("the allow-list is empty")
	}
	for _, d := range domains {
		name := strings.TrimPrefix(strings.TrimPrefix(d, "*."), ".")
		if name == "" || strings.ContainsAny(name, "/:@ \t*") || !strings.Contains(name, ".") && name != "localhost" {
			return fmt.Errorf("%q is not a domain name", d)
		}
	}
	return nil
}

func (p *Proxy) allowed(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, d := range p.Allow {
		d = strings.ToLower(d)
		switch {
		case strings.HasPrefix(d, "*."):
			if strings.HasSuffix(host, d[1:]) {
				return true
			}
		case strings.HasPrefix(d, "."):
			if strings.HasSuffix(host, d) {
				return true
			}
		case host == d:
			return true
		}
	}
	return false
}

// Start listens on a fresh unix socket, owned by uid, and serves until Close.
func (p *Proxy) Start(uid int) (socket string, err error) {
	if err := ValidateDomains(p.Allow); err != nil {
		return "", err
	}
	if p.Dial == nil {
		d := &net.Dialer{Timeout: 15 * time.Second}
		p.Dial = d.DialContext
	}
	if p.Resolve == nil {
		p.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if p.dir, err = os.MkdirTemp("", "paddock-proxy-"); err != nil {
		return "", err
	}
	socket = filepath.Join(p.dir, "proxy.sock")
	if p.ln, err = net.Listen("unix", socket); err != nil {
		os.RemoveAll(p.dir)
		return "", err
	}
	// Only the command's uid may connect (the directory is its, 0700).
	os.Chown(p.dir, uid, uid)
	os.Chown(socket, uid, uid)
	p.done = make(chan struct{})
	p.wg.Add(1)
	go p.serve()
	return socket, nil
}

// Close stops the proxy and waits for its connections to end.
func (p *Proxy) Close() {
	if p.ln == nil {
		return
	}
	close(p.done)
	p.ln.Close()
	p.wg.Wait()
	os.RemoveAll(p.dir)
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c)
		}()
	}
}

func (p *Proxy) decide(d ProxyDecision) {
	if p.Decide != nil {
		p.Decide(d)
	}
}

func (p *Proxy) handle(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	host, port := req.URL.Hostname(), req.URL.Port()
	if req.Method == http.MethodConnect {
		host, port, _ = net.SplitHostPort(req.Host)
	}
	if port == "" {
		port = "80"
	}
	portN, _ := strconv.Atoi(port)
	d := ProxyDecision{Host: host, Port: portN, Method: req.Method}
	if reason := p.refuse(host); reason != "" {
		d.Reason = reason
		p.decide(d)
		fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\npaddock: %s\n", reason)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	up, err := p.dialChecked(ctx, host, port)
	if err != nil {
		d.Reason = err.Error()
		p.decide(d)
		status := "502 Bad Gateway"
		if errors.Is(err, errRefusedAddress) {
			status = "403 Forbidden"
		}
		fmt.Fprintf(c, "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\npaddock: %v\n", status, err)
		return
	}
	defer up.Close()
	d.Allowed = true
	creds := credentialsFor(p.Credentials, host)
	if req.Method == http.MethodConnect && p.CA == nil {
		creds = nil // no authority to open its TLS with: a tunnel, as any
	}
	for _, cr := range creds {
		d.Credential = strings.TrimPrefix(d.Credential+", "+cr.Header, ", ")
	}
	p.decide(d)
	if len(creds) > 0 && req.Method == http.MethodConnect {
		up.Close() // each request of the connection dials its own, checked
		p.intercept(ctx, c, br, host, port, creds)
		return
	}
	setCredentials(req, creds)
	if req.Method == http.MethodConnect {
		fmt.Fprint(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	} else {
		req.RequestURI = ""
		req.Header.Del("Proxy-Connection")
		req.Header.Del("Proxy-Authorization")
		req.Header.Set("Connection", "close")
		if err := req.Write(up); err != nil {
			return
		}
	}
	// Relay both ways; what the client already buffered goes first.
	go func() {
		io.Copy(up, br)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	}()
	io.Copy(c, up)
}

// refuse says why host may not be reached, or "".
func (p *Proxy) refuse(host string) string {
	if host == "" {
		return "no host in the request"
	}
	if !p.allowed(host) {
		return fmt.Sprintf("%s is not on this run's network allow-list", host)
	}
	return ""
}

// dialChecked resolves host and dials the first of its addresses that may
// be reached; it dials nothing if none may.
func (p *Proxy) dialChecked(ctx context.Context, host, port string) (net.Conn, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		addrs, err = p.Resolve(rctx, host)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s does not resolve", host)
		}
	}
	var lastErr error
	for _, a := range addrs {
		if !p.reachable(a) {
			continue
		}
		c, err := p.Dial(ctx, "tcp", net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	if lastErr != nil {
		return nil, lastErr
	}
	return nil, errRefusedAddress
}

var errRefusedAddress = errors.New("the name resolves only to loopback, private, link-local or reserved addresses, which the sandbox never reaches unless the operator allows them by address")

// reachable reports whether the proxy may connect to a: a public address,
// or one the operator allows.
func (p *Proxy) reachable(a netip.Addr) bool {
	a = a.Unmap()
	for _, pf := range p.AllowAddrs {
		if pf.Contains(a) {
			return true
		}
	}
	return Public(a)
}

// nonPublic are the ranges, besides what netip classifies, that are not
// the public internet: "this network", shared address space (CGNAT), IETF
// protocol assignments, documentation, benchmarking, reserved, NAT64 and
// 6to4 (which embed an IPv4 address of any kind), Teredo, ORCHID, the
// IPv6 documentation prefix.
var nonPublic = sync.OnceValue(func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16",
		"2001::/32", "2001:10::/28", "2001:20::/28", "2001:db8::/32", "100::/64"} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
})

// Public reports whether a is an address of the public internet.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, pf := range nonPublic() {
		if pf.Contains(a) {
			return false
		}
	}
	return true
}
