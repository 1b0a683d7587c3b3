package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/strictjson"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func (a *app) toolCmd() *cobra.Command {
	var kv, files []string
	var argsJSON string
	cmd := &cobra.Command{
		Use:   "tool RUN NAME [--arg key=value]... [--arg-file key=PATH]... [--args JSON|-]",
		Short: "Run a working tool in a run's workspace",
		Long: `Run one of the run's working tools (read, write, edit, glob, grep, list,
stat, move, delete) exactly as an agent would through the API, and print its
JSON answer. Every call is recorded as an event (without file contents).

Arguments:
  --arg key=value      repeatable; the value is read as the tool's schema
                       types the key: a string field takes it as text, as
                       typed (42, true and {"a":1} stay text), an integer,
                       number or boolean field parses it, an object or array
                       field takes it as JSON
  --arg-file key=PATH  the value is the file's content (PATH - is stdin): text
                       for a string field (it must be UTF-8; a field with
                       base64 content, such as write's content_base64, takes
                       any bytes and encodes them)
  --args JSON          the whole object, such as '{"path":"README.md"}'; with
                       --args - it is read from stdin. --arg and --arg-file
                       add to it
A key may be given once. 'paddock tools RUN --json' lists the tools the run is
offered with their schemas. A call's body is at most 1 MiB.

A read run is offered only read, glob, grep, list and stat; a none run no tool.

Exit codes: 0 done; 2 bad arguments or path; 3 no such run, tool or file;
4 the run's state forbids it; 6 refused (outside the workspace, protected,
not offered to this run).`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			obj, err := a.toolArgs(cmd.Context(), c, args[0], args[1], argsJSON, kv, files)
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
	cmd.Flags().StringArrayVar(&kv, "arg", nil, "an argument as key=value, typed by the tool's schema (repeatable)")
	cmd.Flags().StringArrayVar(&files, "arg-file", nil, "an argument as key=PATH: the file's content (- for stdin; repeatable)")
	cmd.Flags().StringVar(&argsJSON, "args", "", "all arguments as one JSON object (- reads it from stdin)")
	return cmd
}

// toolArgs builds a tool call's arguments from --args, --arg and
// --arg-file. Values given as text are typed by the tool's schema, which
// is asked for only when there are some: a string field's "42" stays the
// text 42, which guessing from the value would have made a number.
func (a *app) toolArgs(ctx context.Context, c *client.Client, run, tool, argsJSON string, kv, files []string) (map[string]any, error) {
	obj := map[string]any{}
	stdinUsed := false
	readStdin := func(what string) ([]byte, error) {
		if stdinUsed {
			return nil, usageError{fmt.Sprintf("%s: stdin is read once, and something else reads it already", what)}
		}
		stdinUsed = true
		if a.stdin == nil {
			return nil, usageError{fmt.Sprintf("%s: no stdin to read", what)}
		}
		b, err := io.ReadAll(io.LimitReader(a.stdin, maxToolBody+1))
		if err != nil {
			return nil, usageError{fmt.Sprintf("%s: reading stdin: %v", what, err)}
		}
		if len(b) > maxToolBody {
			return nil, usageError{fmt.Sprintf("%s: stdin holds more than a tool call takes (%d MiB)", what, maxToolBody>>20)}
		}
		return b, nil
	}
	if argsJSON != "" {
		raw := []byte(argsJSON)
		if argsJSON == "-" {
			var err error
			if raw, err = readStdin("--args -"); err != nil {
				return nil, err
			}
		}
		// Read as the daemon reads it: a key given twice would otherwise
		// be dropped here, before anyone could refuse it.
		if err := strictjson.Check(raw); err != nil {
			return nil, usageError{fmt.Sprintf("--args: %v", err)}
		}
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return nil, usageError{"--args: want one JSON object, such as {\"path\":\"README.md\"}"}
		}
	}
	if len(kv) == 0 && len(files) == 0 {
		return obj, nil
	}
	props, err := toolProperties(ctx, c, run, tool)
	if err != nil {
		return nil, err
	}
	given := map[string]string{}
	set := func(flag, k string, v any) error {
		if prev, ok := given[k]; ok {
			return usageError{fmt.Sprintf("%s %s: %s is given already (by %s)", flag, k, k, prev)}
		}
		given[k] = flag
		obj[k] = v
		return nil
	}
	for _, p := range kv {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Sprintf("--arg %q: want key=value", p)}
		}
		val, err := props.parse(k, v)
		if err != nil {
			return nil, usageError{fmt.Sprintf("--arg %s: %v", k, err)}
		}
		if err := set("--arg", k, val); err != nil {
			return nil, err
		}
	}
	for _, p := range files {
		k, path, ok := strings.Cut(p, "=")
		if !ok || k == "" || path == "" {
			return nil, usageError{fmt.Sprintf("--arg-file %q: want key=PATH", p)}
		}
		var b []byte
		if path == "-" {
			b, err = readStdin("--arg-file " + k)
		} else {
			b, err = readFileCapped(path, maxToolBody)
		}
		if err != nil {
			return nil, err
		}
		val, err := props.fromFile(k, b)
		if err != nil {
			return nil, usageError{fmt.Sprintf("--arg-file %s: %v", k, err)}
		}
		if err := set("--arg-file", k, val); err != nil {
			return nil, err
		}
	}
	return obj, nil
}

// maxToolBody is the most a tool call's body may hold (the API's bound).
const maxToolBody = 1 << 20

func readFileCapped(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, usageError{fmt.Sprintf("%s: %v", path, err)}
	}
	if int64(len(b)) > max {
		return nil, usageError{fmt.Sprintf("%s holds more than a tool call takes (%d MiB)", path, max>>20)}
	}
	return b, nil
}

// schemaProps are the properties of a tool's input schema, by name.
type schemaProps map[string]struct {
	Type            json.RawMessage `json:"type"`
	ContentEncoding string          `json:"contentEncoding"`
}

func toolProperties(ctx context.Context, c *client.Client, run, tool string) (schemaProps, error) {
	ts, err := c.Tools(ctx, run)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.Name == tool {
			var s struct {
				Properties schemaProps `json:"properties"`
			}
			if err := json.Unmarshal(t.Schema, &s); err != nil {
				return nil, fmt.Errorf("tool %s's schema: %w", tool, err)
			}
			return s.Properties, nil
		}
	}
	// Not offered: the call itself says so, with the daemon's words.
	return schemaProps{}, nil
}

// types are the JSON types the schema allows key (none if it does not say).
func (p schemaProps) types(key string) []string {
	var one string
	var many []string
	raw := p[key].Type
	if json.Unmarshal(raw, &one) == nil && one != "" {
		return []string{one}
	}
	json.Unmarshal(raw, &many)
	return many
}

// parse reads a --arg value as the schema types it.
func (p schemaProps) parse(key, v string) (any, error) {
	ts := p.types(key)
	switch {
	case len(ts) == 0 || slices.Contains(ts, "string"):
		// Text as typed; also for a key the schema does not know, which
		// the daemon then refuses by name.
		return v, nil
	case slices.Contains(ts, "integer"):
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", v)
		}
		return n, nil
	case slices.Contains(ts, "number"):
		if _, err := strconv.ParseFloat(v, 64); err != nil || !json.Valid([]byte(v)) {
			return nil, fmt.Errorf("%q is not a number", v)
		}
		return json.Number(v), nil
	case slices.Contains(ts, "boolean"):
		switch v {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("%q is not true or false", v)
	default: // object, array
		if err := strictjson.Check([]byte(v)); err != nil {
			return nil, fmt.Errorf("want JSON (%s): %v", strings.Join(ts, " or "), err)
		}
		var val any
		if err := json.Unmarshal([]byte(v), &val); err != nil {
			return nil, fmt.Errorf("want JSON (%s): %v", strings.Join(ts, " or "), err)
		}
		return json.RawMessage(v), nil
	}
}

// fromFile makes a file's content the value of key: text for a string
// field, base64 for one whose content is encoded so, and parsed as JSON for
// any other type.
func (p schemaProps) fromFile(key string, b []byte) (any, error) {
	if p[key].ContentEncoding == "base64" {
		return base64.StdEncoding.EncodeToString(b), nil
	}
	ts := p.types(key)
	if len(ts) == 0 || slices.Contains(ts, "string") {
		if !utf8.Valid(b) {
			var alt []string
			for k, v := range p {
				if v.ContentEncoding == "base64" {
					alt = append(alt, k)
				}
			}
			slices.Sort(alt)
			msg := "the file is not UTF-8 text, which " + key + " takes"
			if len(alt) > 0 {
				msg += "; give its bytes as --arg-file " + alt[0] + "=PATH"
			}
			return nil, errors.New(msg)
		}
		return string(b), nil
	}
	return p.parse(key, strings.TrimSpace(string(b)))
}

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
