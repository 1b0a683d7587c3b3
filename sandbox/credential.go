//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/internal/durable"
)

// Credentials the command never sees.
//
// A run's agent needs a key for its model's API; given the key, an agent
// (or anything it runs) can send it anywhere it can reach, print it, or
// leave it in a file. So the run holds only a placeholder, and the proxy of
// its allow-list network, which sees every connection anyway, puts the real
// value in the request's header on its way to that one host: for plain
// HTTP in the request it forwards, for HTTPS by terminating the command's
// TLS with a certificate of the daemon's own authority (ProxyCA), which
// only the run trusts, and opening its own TLS to the host, verified as any
// client verifies it. Whatever the command sends in that header is
// replaced; nothing of the value goes back into the run.

// Credential is one header the proxy sets on requests to one host.
type Credential struct {
	Host   string // the host name, exactly (no wildcard)
	Header string // such as x-api-key or Authorization
	Value  string // the header's whole value (the prefix, such as "Bearer ", included)
}

// credentialFor is the credentials for host, if any.
func credentialsFor(creds []Credential, host string) []Credential {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	var out []Credential
	for _, c := range creds {
		if strings.ToLower(c.Host) == host {
			out = append(out, c)
		}
	}
	return out
}

// credentialsHash identifies a set of credentials without holding their
// values: a harness is remade when one changes.
func credentialsHash(creds []Credential) string {
	if len(creds) == 0 {
		return ""
	}
	h := sha256.New()
	for _, c := range creds {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", c.Host, c.Header, c.Value)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// ProxyCA is the daemon's own certificate authority: the proxy signs, for
// a host whose requests it must change, a certificate the run trusts (its
// CertPEM is the only part a run ever gets).
type ProxyCA struct {
	CertPEM []byte
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// LoadProxyCA reads the authority kept at path (its certificate and key,
// PEM, 0600), making one the first time. It is the daemon's, never a
// run's: it lives in the state directory, which no run sees.
func LoadProxyCA(path string) (*ProxyCA, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if b, err = newProxyCA(); err != nil {
			return nil, err
		}
		if err := durable.WriteFile(path, b); err != nil {
			return nil, fmt.Errorf("sandbox: keeping the proxy's authority: %w", err)
		}
	} else if err != nil {
		return nil, err
	}
	ca := &ProxyCA{leaves: map[string]*tls.Certificate{}}
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		switch blk.Type {
		case "CERTIFICATE":
			ca.CertPEM = pem.EncodeToMemory(blk)
			if ca.cert, err = x509.ParseCertificate(blk.Bytes); err != nil {
				return nil, fmt.Errorf("sandbox: %s: %w", path, err)
			}
		case "EC PRIVATE KEY":
			if ca.key, err = x509.ParseECPrivateKey(blk.Bytes); err != nil {
				return nil, fmt.Errorf("sandbox: %s: %w", path, err)
			}
		}
	}
	if ca.cert == nil || ca.key == nil {
		return nil, fmt.Errorf("sandbox: %s holds no certificate and key", path)
	}
	return ca, nil
}

func newProxyCA() ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "paddock proxy authority (trusted only inside paddock runs)"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})...), nil
}

// leaf is a certificate for host, signed by the authority, made once.
func (ca *ProxyCA) leaf(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c := ca.leaves[host]; c != nil {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(0, 0, 30),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.DNSNames, tmpl.IPAddresses = nil, []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key}
	ca.leaves[host] = c
	return c, nil
}

// TrustBundle is the system's trusted authorities and the proxy's, PEM:
// what a run's SSL_CERT_FILE names (a program that reads one bundle only).
func (ca *ProxyCA) TrustBundle() []byte {
	var sys []byte
	for _, f := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"} {
		if b, err := os.ReadFile(f); err == nil {
			sys = b
			break
		}
	}
	if len(sys) > 0 && sys[len(sys)-1] != '\n' {
		sys = append(sys, '\n')
	}
	return append(sys, ca.CertPEM...)
}

// setCredentials puts the credentials for its host on req, replacing what
// the command sent in those headers.
func setCredentials(req *http.Request, creds []Credential) {
	for _, c := range creds {
		req.Header.Set(c.Header, c.Value)
	}
}

// intercept serves a CONNECT to host, whose requests carry credentials:
// the command's TLS ends here, under a certificate of the authority; each
// request it sends is forwarded with the credentials set, over a TLS
// connection of the proxy's own to the host (dialled as every connection
// is, by checked address), and the answer streams back.
func (p *Proxy) intercept(ctx context.Context, c net.Conn, br *bufio.Reader, host, port string, creds []Credential) {
	leaf, err := p.CA.leaf(host)
	if err != nil {
		fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\npaddock: %v\n", err)
		return
	}
	fmt.Fprint(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	tc := tls.Server(&bufferedConn{Conn: c, r: br}, &tls.Config{Certificates: []tls.Certificate{*leaf}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	defer tc.Close()
	roots := p.UpstreamRoots
	tr := &http.Transport{
		DialContext:           func(ctx context.Context, _, _ string) (net.Conn, error) { return p.dialChecked(ctx, host, port) },
		TLSClientConfig:       &tls.Config{ServerName: host, RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		ResponseHeaderTimeout: 10 * time.Minute,
		IdleConnTimeout:       90 * time.Second,
	}
	defer tr.CloseIdleConnections()
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host, r.Out.Host = "https", net.JoinHostPort(host, port), r.In.Host
			if port == "443" {
				r.Out.URL.Host = host
			}
			r.Out.Header.Del("Proxy-Authorization")
			setCredentials(r.Out, creds)
		},
		Transport:     tr,
		FlushInterval: -1, // an event stream (a model's answer) passes as it comes
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "paddock: "+err.Error(), http.StatusBadGateway)
		},
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 30 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	ln := &oneConnListener{c: tc, done: make(chan struct{})}
	go func() {
		select {
		case <-ctx.Done():
		case <-ln.done:
		}
		srv.Close()
	}()
	srv.Serve(ln)
	<-ln.done
}

// bufferedConn is a connection whose first bytes were read into r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// oneConnListener hands one connection to an http.Server, then waits
// until that connection is closed.
type oneConnListener struct {
	c    net.Conn
	once sync.Once
	done chan struct{}
	used bool
	mu   sync.Mutex
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if !l.used {
		l.used = true
		l.mu.Unlock()
		return &closeNotify{Conn: l.c, closed: func() { l.once.Do(func() { close(l.done) }) }}, nil
	}
	l.mu.Unlock()
	<-l.done
	return nil, io.EOF
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }

type closeNotify struct {
	net.Conn
	closed func()
}

func (c *closeNotify) Close() error {
	err := c.Conn.Close()
	c.closed()
	return err
}
