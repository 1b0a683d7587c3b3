package client

import "github.com/paddock-dev/paddock"

// For HTTP clients of other packages that reach the daemon as c does
// (client/mcphttp): package client speaks HTTP/1.1 itself (wire.go) and
// links no net/http, which the CLI does without.

// Address is where c connects: "unix" and the socket's path, or "tcp"
// and host:port.
func (c *Client) Address() (network, address string) { return c.network, c.address }

// URL is the URL of path, a route of the API ("/v1/…"), on c's daemon.
func (c *Client) URL(path string) string { return "http://" + c.host + path }

// Credentials are the headers that make a request of method to path c's
// (its token, the agent's mark), as c's own requests carry them; c's
// observer (WithObserver) sees the request.
func (c *Client) Credentials(method, path string) [][2]string {
	var h [][2]string
	if c.token != "" {
		h = append(h, [2]string{"Authorization", "Bearer " + c.token})
	}
	if c.agent {
		h = append(h, [2]string{paddock.AgentHeader, "1"})
	}
	if c.observe != nil {
		c.observe(method, path)
	}
	return h
}
