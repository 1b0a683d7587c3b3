package paddockcli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/strictjson"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func toolCmd(a *app) *cobra.Command {
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
offered, with the working tools' schemas. A call's body is at most 1 MiB.

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

func toolsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tools RUN [--json]",
		Short: "List every tool a run is offered now, and the verb that calls each",
		Long: `List every tool the run is offered now, as its capabilities say (its agent
definition, the grants made on it, its access and its state): what its agent
sees over MCP. Each with what it does, the verb that calls it and how it is
narrowed (allow, deny, ask):

  - the working tools (read, write, edit, glob, grep, list, stat, move,
    delete): a read run only those that cannot change the workspace, a none
    run none; called with 'paddock tool RUN NAME';
  - the control tools its definition names: exec and verify (where this
    daemon can confine a command; otherwise named on stderr, with why),
    diff, submit, capabilities, plan and request_access;
  - the events of its flow's menu, while they are on it ('paddock menu').

--json prints each with its kind (working, control or menu), its narrowing
and, for a working tool, its input schema.

Exit codes: 0 listed; 3 no such run.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			caps, err := c.Capabilities(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			working, err := c.Tools(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			list := offeredTools(caps, working)
			for _, name := range slices.Sorted(maps.Keys(caps.Unavailable)) {
				fmt.Fprintf(a.stderr, "paddock: %s is not offered here: %s\n", name, termsafe.Text(caps.Unavailable[name]))
			}
			return a.output(asJSON, list, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				for _, t := range list {
					desc, _, _ := strings.Cut(t.Description, ". ")
					line := termsafe.Field(t.Name) + "\t" + termsafe.Field(strings.TrimSuffix(desc, ".")) + "\t" + t.Via
					if n := narrowing(t); n != "" {
						line += "\t" + n
					}
					fmt.Fprintln(tw, line)
				}
				tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON, with the working tools' schemas")
	return cmd
}

// offeredTool is one tool a run is offered, as paddock tools lists it.
type offeredTool struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"` // working, control or menu
	Description string `json:"description"`
	// Schema and Writes are a working tool's (client.ToolInfo).
	Schema json.RawMessage `json:"input_schema,omitempty"`
	Writes bool            `json:"writes,omitempty"`
	// Via is the CLI's verb that calls it.
	Via   string   `json:"via"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	Ask   []string `json:"ask,omitempty"`
}

// controlTools say what each control tool does and which verb calls it
// (RUN for the run):
// the CLI does not link the MCP server that describes them to a model.
// TestToolsListsEveryOfferedTool holds it to every tool a definition may
// name.
var controlTools = map[string]struct{ description, via string }{
	paddock.ToolExec:          {"Run a command in the workspace, confined by the sandbox, with no network unless it asks", "paddock exec RUN -- CMD…"},
	paddock.ToolVerify:        {"Run the project manifest's checks (build, lint and test unless named), network off", "paddock verify RUN [CHECK…]"},
	paddock.ToolDiff:          {"The change set now, with risk labels and its hash", "paddock diff RUN"},
	paddock.ToolSubmit:        {"Freeze the change set for review, under its hash", "paddock submit RUN"},
	paddock.ToolCapabilities:  {"What the run may do now: tools, narrowing, network, limits, grants", "paddock capabilities RUN"},
	paddock.ToolPlan:          {"Give the agent's plan: its steps, each pending, in progress or completed", "paddock tool RUN plan --args JSON"},
	paddock.ToolRequestAccess: {"Ask for more than the run's definition grants, with a reason, for a person to decide", "POST /v1/runs/RUN/requests"},
}

// offeredTools are the tools caps offers, described by working (the
// working tools' own descriptions and schemas) or controlTools, then the
// flow's menu events, as the run's MCP server offers them.
func offeredTools(caps *paddock.Capabilities, working []client.ToolInfo) []offeredTool {
	list := []offeredTool{}
	for _, tc := range caps.Tools {
		t := offeredTool{Name: tc.Name, Allow: tc.Allow, Deny: tc.Deny, Ask: tc.Ask}
		if i := slices.IndexFunc(working, func(w client.ToolInfo) bool { return w.Name == tc.Name }); i >= 0 {
			w := working[i]
			t.Description, t.Schema, t.Writes, t.Kind, t.Via = w.Description, w.Schema, w.Writes, "working", "paddock tool "+caps.Run+" "+tc.Name
		} else if ct, ok := controlTools[tc.Name]; ok {
			t.Description, t.Kind, t.Via = ct.description, "control", strings.Replace(ct.via, "RUN", caps.Run, 1)
		} else {
			t.Kind = "control" // a tool this CLI does not know: newer than it
		}
		list = append(list, t)
	}
	if caps.Menu != nil {
		for _, it := range caps.Menu.Items {
			if _, clash := controlTools[it.Event]; clash || slices.ContainsFunc(list, func(t offeredTool) bool { return t.Name == it.Event }) {
				continue // the MCP server offers the tool, not the event
			}
			desc := "Pick " + it.Event + " from the run's workflow menu"
			if it.Description != "" {
				desc += ": " + it.Description
			}
			list = append(list, offeredTool{Name: it.Event, Kind: "menu", Description: desc, Via: "paddock menu " + caps.Run + " " + it.Event})
		}
	}
	return list
}

// narrowing says how a tool is narrowed, in a line.
func narrowing(t offeredTool) string {
	var parts []string
	for _, x := range []struct {
		what  string
		rules []string
	}{{"allow", t.Allow}, {"deny", t.Deny}, {"ask", t.Ask}} {
		if len(x.rules) > 0 {
			parts = append(parts, x.what+" "+termsafe.Field(strings.Join(quoteAll(x.rules), ", ")))
		}
	}
	return strings.Join(parts, "; ")
}

func inboxCmd(a *app) *cobra.Command {
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
