// Command paddockd is the whole binary: the daemon (paddock serve), the
// sandbox's harness and helper, and every verb of the CLI. The client
// verbs are package internal/paddockcli's, which paddock (cmd/paddock), the CLI
// alone, links too; the daemon's (serve, doctor, mcp, verify-bundle,
// import) are this package's, and paddock hands them here. See `paddock
// --help`, README.md and docs/ARCHITECTURE.md.
package main

import (
	"context"
	"os"

	"github.com/paddock-dev/paddock/internal/paddockcli"
	"github.com/paddock-dev/paddock/sandbox"
)

func main() {
	// The sandbox re-executes this binary as its helper; it must take over
	// before anything else runs.
	sandbox.Main()
	inv := paddockcli.Invocation{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Daemon: daemonVerbs}
	os.Exit(inv.Run(context.Background(), os.Args[1:]))
}

// daemonVerbs are the verbs this binary holds and the CLI does not.
var daemonVerbs = paddockcli.DaemonVerbs{
	"serve":         serveCmd,
	"doctor":        doctorCmd,
	"mcp":           mcpCmd,
	"verify-bundle": verifyBundleCmd,
	"import":        importCmd,
}
