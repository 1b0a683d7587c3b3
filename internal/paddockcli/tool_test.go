package paddockcli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/agent"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/tools"
)

// TestToolsDescribesEveryTool: every tool a definition may name is
// described, a working tool by its own description, a control tool by
// the CLI's table (controlTools), and a flow's menu events are tools too
// (one named as a tool is not). cmd/paddockd's
// TestToolsListsEveryOfferedTool runs paddock tools against a daemon.
func TestToolsDescribesEveryTool(t *testing.T) {
	working := map[string]bool{}
	for _, w := range tools.Offered(paddock.AccessWrite) {
		working[w.Name] = true
	}
	for _, name := range agent.AllTools() {
		if ct, ok := controlTools[name]; !working[name] && (!ok || ct.description == "" || ct.via == "") {
			t.Errorf("tool %s has no line in paddock tools (controlTools)", name)
		}
	}
	menu := offeredTools(&paddock.Capabilities{Run: "r-1", Tools: []paddock.ToolCapability{{Name: "read"}, {Name: "exec", Deny: []string{"git push"}}},
		Menu: &paddock.Menu{Items: []paddock.MenuItem{{Event: "approve", Description: "the change set is good"}, {Event: "exec"}}}},
		[]client.ToolInfo{{Name: "read", Description: "Read a file.", Schema: json.RawMessage(`{}`)}})
	if len(menu) != 3 || menu[0].Via != "paddock tool r-1 read" || menu[1].Via != "paddock exec r-1 -- CMD…" || narrowing(menu[1]) != `deny "git push"` ||
		menu[2].Kind != "menu" || menu[2].Via != "paddock menu r-1 approve" || !strings.Contains(menu[2].Description, "the change set is good") {
		t.Errorf("with a menu: %+v", menu)
	}
}
