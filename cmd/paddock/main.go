// Command paddock gives AI coding agents a bounded place to work. See
// `paddock --help`, README.md and docs/ARCHITECTURE.md.
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
