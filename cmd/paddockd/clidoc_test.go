package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/paddockcli"
	"github.com/spf13/cobra"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/CLI.md's reference from the command tree")

const (
	cliDoc    = "../../docs/CLI.md"
	beginMark = "<!-- BEGIN GENERATED: the command tree's own help; `go test ./cmd/paddockd -run TestCLIReferenceIsCurrent -update-docs` rewrites it -->"
	endMark   = "<!-- END GENERATED -->"
)

// TestCLIReferenceIsCurrent: docs/CLI.md's reference is the help of
// paddockd's whole command tree (every verb, its flags, the exit codes),
// so it cannot drift from the CLI: change a verb or a flag and this fails
// until the page is made again.
func TestCLIReferenceIsCurrent(t *testing.T) {
	inv := paddockcli.Invocation{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }, Daemon: daemonVerbs}
	want := renderReference(inv.Command())
	old, err := os.ReadFile(cliDoc)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(old, []byte(beginMark)), bytes.Index(old, []byte(endMark))
	if i < 0 || j < i {
		t.Fatalf("%s has no generated region (%q … %q)", cliDoc, beginMark, endMark)
	}
	page := string(old[:i]) + beginMark + "\n" + want + endMark + string(old[j+len(endMark):])
	if page == string(old) {
		return
	}
	if *updateDocs || os.Getenv("PADDOCK_UPDATE_DOCS") != "" {
		if err := os.WriteFile(cliDoc, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's reference is not the command tree's help: run go test ./cmd/paddockd -run TestCLIReferenceIsCurrent -update-docs", filepath.Base(cliDoc))
}

// renderReference writes every command under root, depth first in the
// order --help lists them: its usage, its description and its flags.
func renderReference(root *cobra.Command) string {
	var b strings.Builder
	var walk func(c *cobra.Command, depth int)
	walk = func(c *cobra.Command, depth int) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		fmt.Fprintf(&b, "\n%s `%s`\n\n", strings.Repeat("#", min(depth+2, 4)), c.CommandPath())
		if c.Short != "" {
			fmt.Fprintf(&b, "%s.\n\n", strings.TrimSuffix(c.Short, "."))
		}
		fmt.Fprintf(&b, "```\n%s\n", c.UseLine())
		if c.Long != "" {
			fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(c.Long))
		}
		if fl := c.LocalFlags(); fl.HasAvailableFlags() {
			fmt.Fprintf(&b, "\nFlags:\n%s", fl.FlagUsagesWrapped(0))
		}
		if c.HasParent() && c.Parent() == root {
			// the root's own flags hold for every verb: said once, at the root
		} else if fl := c.InheritedFlags(); c.HasParent() && fl.HasAvailableFlags() {
			fmt.Fprintf(&b, "\nFlags of %s:\n%s", c.Parent().CommandPath(), fl.FlagUsagesWrapped(0))
		}
		b.WriteString("```\n")
		for _, sub := range c.Commands() {
			walk(sub, depth+1)
		}
	}
	walk(root, 0)
	return b.String()
}
