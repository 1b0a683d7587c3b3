package paddockcli

import (
	"testing"

	"github.com/paddock-dev/paddock/lifecycle"
)

// TestRunAPINames: the CLI finds a run's own socket where the daemon puts
// it, under names of its own (it does not link lifecycle).
func TestRunAPINames(t *testing.T) {
	if envSocket != lifecycle.EnvSocket || socketInView != lifecycle.SocketInView {
		t.Errorf("the CLI looks for a run's socket at $%s, %s; the daemon gives it at $%s, %s",
			envSocket, socketInView, lifecycle.EnvSocket, lifecycle.SocketInView)
	}
}
