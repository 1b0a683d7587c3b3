//go:build !paddock_cli

// Command paddock gives AI coding agents a bounded place to work. See
// `paddock --help`, README.md and docs/ARCHITECTURE.md.
//
// Built as it is, it is the whole binary: the daemon, the sandbox's
// harness and helper, and every verb of the CLI; README installs it as
// paddockd. Built with -tags paddock_cli it is the CLI alone (main_cli.go),
// installed as paddock, which hands paddockd what it does not hold.
package main

import (
	"context"
	"os"

	"github.com/paddock-dev/paddock/sandbox"
)

func main() {
	// The sandbox re-executes this binary as its helper; it must take over
	// before anything else runs.
	sandbox.Main()
	os.Exit(Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// daemonExecutable is the binary that serves: this one.
func daemonExecutable() (string, error) { return os.Executable() }
