// Command paddock is the CLI a user and an agent's shell type: the client
// verbs alone (package internal/paddockcli). Go runs every linked package's
// initialisation, and the runtime sets up every linked type, before main,
// whatever the verb; paddockd (cmd/paddockd), the whole binary, links the
// daemon's dependencies (SQLite, pgx, the MCP SDK, Landlock and seccomp,
// the HTTP API and the review page) and pays for them at every start.
// This one links the client verbs and their client only, and hands
// paddockd, beside it (README builds both), whatever else it is asked
// for, by exec'ing it with the same arguments, environment and open
// files: the same process, output and exit code (paddockcli.HandsOver).
// cmd/paddockd's TestClientLinksNoDaemon holds it to that.
package main

import (
	"context"
	"os"

	"github.com/paddock-dev/paddock/internal/paddockcli"
)

func main() {
	args := os.Args[1:]
	if paddockcli.HandsOver(args) {
		os.Exit(paddockcli.ExecDaemon(args))
	}
	os.Exit(paddockcli.Main(context.Background(), args, os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
