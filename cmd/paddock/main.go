// Command paddock gives AI coding agents a bounded place to work. See
// `paddock --help`, README.md and docs/ARCHITECTURE.md.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
