// Package mcphttp reaches a run's MCP endpoint (streamable HTTP) through
// a client.Client's connection and credentials, for an MCP client's
// streamable HTTP transport. It is a package of its own so that package
// client, which the CLI links, does not link net/http (see
// client/wire.go).
package mcphttp

import (
	"context"
	"net"
	"net/http"
	"net/url"

	"github.com/paddock-dev/paddock/client"
)

// Endpoint returns the URL of run id's MCP endpoint (streamable HTTP) and
// an http.Client that reaches it as c does: the same connection (the
// unix socket, or TCP), c's credentials. Give both to an MCP client's
// streamable HTTP transport.
func Endpoint(c *client.Client, id string) (string, *http.Client) {
	network, address := c.Address()
	tr := &http.Transport{
		Proxy: nil, // the daemon, never a proxy of the environment
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, address)
		},
	}
	return c.URL("/v1/runs/" + url.PathEscape(id) + "/mcp"), &http.Client{Transport: authorizer{c: c, next: tr}}
}

type authorizer struct {
	c    *client.Client
	next http.RoundTripper
}

func (a authorizer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for _, h := range a.c.Credentials(r.Method, r.URL.RequestURI()) {
		r.Header.Set(h[0], h[1])
	}
	return a.next.RoundTrip(r)
}
