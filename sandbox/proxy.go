package sandbox

import (
	"bufio"
	"context"
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
}

// Proxy is the host side of an allow-list network: an HTTP proxy (CONNECT and
// plain HTTP) on a unix socket, which the sandbox's helper bridges to
// 127.0.0.1:ProxyPort inside the command's empty network namespace. Only
// hosts on the allow-list are reached, never the host's loopback, link-local
// or unspecified addresses; every decision is reported.
type Proxy struct {
	// Allow lists the domains: "example.com" allows it alone, ".example.com"
	// or "*.example.com" its subdomains.
	Allow []string
	// Decide is called for every connection, allowed or denied.
	Decide func(ProxyDecision)
	// Dial reaches an allowed host; net.Dialer's by default. Tests map names
	// to local servers with it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

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
	up, err := p.dialChecked(ctx, net.JoinHostPort(host, port))
	if err != nil {
		d.Reason = err.Error()
		p.decide(d)
		fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\npaddock: %v\n", err)
		return
	}
	defer up.Close()
	d.Allowed = true
	p.decide(d)
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

// dialChecked dials addr, refusing addresses that would reach the host
// itself or its link: an allowed name must not become a way to the host's
// loopback services.
func (p *Proxy) dialChecked(ctx context.Context, addr string) (net.Conn, error) {
	c, err := p.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil && !p.allowLocal(ap.Addr()) {
		c.Close()
		return nil, errors.New("the name resolves to a loopback, link-local or unspecified address")
	}
	return c, nil
}

// allowLocal reports whether a remote address may be used.
func (p *Proxy) allowLocal(a netip.Addr) bool {
	a = a.Unmap()
	return !(a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified() || a.IsLinkLocalMulticast()) || allowLoopbackForTests
}

// allowLoopbackForTests lets tests reach servers they run on loopback.
var allowLoopbackForTests = false
