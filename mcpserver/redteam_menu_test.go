package mcpserver

import (
	"testing"

	"github.com/paddock-dev/paddock/broker"
)

// TestRedteamMenuNamesTheWorkflowAllows: every tool the MCP server may
// offer is a name a workflow's event may not take; otherwise the server
// drops that event from the menu it lists (a clash) and an MCP agent can
// never pick it.
func TestRedteamMenuNamesTheWorkflowAllows(t *testing.T) {
	for name := range toolDefs {
		if !broker.Known(name) {
			t.Errorf("tool %s is offered over MCP but a workflow may name an event %s", name, name)
		}
	}
}
