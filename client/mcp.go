//go:build !paddock_cli

package client

import (
	"context"
	"net"
	"net/http"

	"github.com/paddock-dev/paddock"
)

// MCP returns the URL of run id's MCP endpoint (streamable HTTP) and an
// http.Client that reaches it as c does: the same connection (the unix
// socket, or TCP), c's credentials. Give both to an MCP client's
// streamable HTTP transport. The CLI's build (-tags paddock_cli) leaves
// it out, and net/http with it (see wire.go).
func (c *Client) MCP(id string) (string, *http.Client) {
	tr := &http.Transport{
		Proxy: nil, // the daemon, never a proxy of the environment
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, c.network, c.address)
		},
	}
	return "http://" + c.host + runPath(id, "mcp"), &http.Client{Transport: authorizer{c: c, next: tr}}
}

type authorizer struct {
	c    *Client
	next http.RoundTripper
}

func (a authorizer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if a.c.token != "" {
		r.Header.Set("Authorization", "Bearer "+a.c.token)
	}
	if a.c.agent {
		r.Header.Set(paddock.AgentHeader, "1")
	}
	if a.c.observe != nil {
		a.c.observe(r.Method, r.URL.RequestURI())
	}
	return a.next.RoundTrip(r)
}
