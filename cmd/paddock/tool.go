package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/paddock-dev/paddock/strictjson"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func (a *app) toolCmd() *cobra.Command {
	var kv []string
	var argsJSON string
	cmd := &cobra.Command{
		Use:   "tool RUN NAME [--arg key=value]... [--args JSON]",
		Short: "Run a working tool in a run's workspace",
		Long: `Run one of the run's working tools (read, write, edit, glob, grep, list,
stat, move, delete) exactly as an agent would through the API, and print its
JSON answer. Every call is recorded as an event (without file contents).

Arguments: --arg key=value, repeatable; a value that parses as JSON (a number,
true, false, an object) is taken as such, anything else as a string. Or give
the whole object with --args '{"path":"README.md"}'. 'paddock tools RUN' lists
the tools the run is offered with their schemas.

A read run is offered only read, glob, grep, list and stat; a none run no tool.

Exit codes: 0 done; 2 bad arguments or path; 3 no such run, tool or file;
4 the run's state forbids it; 6 refused (outside the workspace, protected,
not offered to this run).`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj := map[string]any{}
			if argsJSON != "" {
				// Read as the daemon reads it: a key given twice would
				// otherwise be dropped here, before anyone could refuse it.
				if err := strictjson.Check([]byte(argsJSON)); err != nil {
					return usageError{fmt.Sprintf("--args: %v", err)}
				}
				if err := json.Unmarshal([]byte(argsJSON), &obj); err != nil {
					return usageError{fmt.Sprintf("--args: %v", err)}
				}
			}
			for _, p := range kv {
				k, v, ok := strings.Cut(p, "=")
				if !ok || k == "" {
					return usageError{fmt.Sprintf("--arg %q: want key=value", p)}
				}
				var val any
				if err := json.Unmarshal([]byte(v), &val); err != nil || isJSONString(v) {
					val = v
				}
				obj[k] = val
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			res, err := c.CallTool(cmd.Context(), args[0], args[1], obj)
			if err != nil {
				return err
			}
			var out bytes.Buffer
			json.Indent(&out, res, "", "  ")
			out.WriteByte('\n')
			_, err = a.stdout.Write(termsafe.JSON(out.Bytes()))
			return err
		},
	}
	cmd.Flags().StringArrayVar(&kv, "arg", nil, "an argument as key=value (repeatable)")
	cmd.Flags().StringVar(&argsJSON, "args", "", "all arguments as one JSON object")
	return cmd
}

// isJSONString keeps a quoted value a string with its quotes, as typed.
func isJSONString(v string) bool { return strings.HasPrefix(strings.TrimSpace(v), `"`) }

func (a *app) toolsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tools RUN",
		Short: "List the working tools a run is offered",
		Long: `List the working tools the run's access mode offers (write: all; read: the
ones that cannot change the workspace; none: none), with --json their input
schemas.

Exit codes: 0 listed; 3 no such run.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			ts, err := c.Tools(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, ts, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				for _, t := range ts {
					desc, _, _ := strings.Cut(t.Description, ". ")
					fmt.Fprintf(tw, "%s\t%s\n", t.Name, desc)
				}
				tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON with schemas")
	return cmd
}

func (a *app) inboxCmd() *cobra.Command {
	var name string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inbox RUN FILE [--name NAME]",
		Short: "Deliver a file into a run's inbox (.paddock/inbox/)",
		Long: `Deliver a file into .paddock/inbox/ of the run's workspace, where its agent can
read it. The type is decided by the content, not the name: text, PNG, JPEG,
GIF, WebP and PDF are accepted. A file over the size cap (10 MiB) or over the
run's inbox quota (100 MiB) is refused and nothing is written.

Exit codes: 0 delivered; 2 refused type, name or size; 3 no such run.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[1])
			if err != nil {
				return usageError{err.Error()}
			}
			defer f.Close()
			if name == "" {
				name = filepath.Base(args[1])
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			res, err := c.Deliver(cmd.Context(), args[0], name, f)
			if err != nil {
				return err
			}
			return a.output(asJSON, res, func(w io.Writer) {
				fmt.Fprintf(w, "delivered %s (%d bytes, %s)\n", res.Path, res.Size, res.MIME)
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "file name in the inbox (default: the file's own)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
