// Package tools holds the working tools an agent uses in its workspace: read,
// write, edit, glob, grep, list, stat, move and delete. There is one
// implementation of each, shared by every interface (the HTTP API now, MCP and
// the CLI through the same call); every path goes through package confine.
//
// A tool takes JSON arguments checked against its schema (unknown fields are
// refused) and returns a structured result. Which tools a run is offered
// depends on its access mode: write runs get all of them, read runs only the
// ones that cannot change the workspace, none runs nothing.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/strictjson"
)

// Tool is one working tool.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"input_schema"`
	// Writes is true for tools that can change the workspace; read runs are
	// not offered them.
	Writes bool `json:"writes"`
	run    func(ctx context.Context, r *confine.Root, args json.RawMessage) (any, int64, error)
}

var registry = map[string]*Tool{}

func register(t *Tool) { registry[t.Name] = t }

// Offered returns the tools a run with the given access may use, by name.
func Offered(access paddock.Access) []*Tool {
	var out []*Tool
	for _, t := range registry {
		if access == paddock.AccessWrite || (access == paddock.AccessRead && !t.Writes) {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the named tool if access offers it. A tool that exists but is
// not offered is forbidden; an unknown name is not found.
func Lookup(access paddock.Access, name string) (*Tool, error) {
	t, ok := registry[name]
	if !ok {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no tool %q", name)
	}
	switch {
	case access == paddock.AccessNone:
		return nil, paddock.Errorf(paddock.CodeForbidden, "this run has no workspace and no working tools").
			WithRule(paddock.RuleAccessNone)
	case access == paddock.AccessRead && t.Writes:
		return nil, paddock.Errorf(paddock.CodeForbidden, "this run may only read the workspace; %s is not offered", name).
			WithRule(confine.RuleReadOnly).WithDetail("hint", "use read, glob, grep, list or stat")
	}
	return t, nil
}

// Outcome is what a call records in its event: never file contents.
type Outcome struct {
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args"`
	OK         bool            `json:"ok"`
	Code       paddock.Code    `json:"code,omitempty"`
	Rule       paddock.Rule    `json:"rule,omitempty"`
	DurationMS float64         `json:"duration_ms"`
	Bytes      int64           `json:"bytes"`
	// Decision is the broker's; Request the access request a call that
	// needs approval filed.
	Decision paddock.Decision `json:"decision,omitempty"`
	Request  string           `json:"request,omitempty"`
}

// Call runs the tool on root and returns its result, the outcome to
// record and the error that refused or failed the call (nil on success,
// and then the result is set). The outcome is recorded either way.
func (t *Tool) Call(ctx context.Context, root *confine.Root, args json.RawMessage) (any, Outcome, error) {
	start := time.Now()
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	res, n, err := t.run(ctx, root, args)
	o := Outcome{Tool: t.Name, Args: redactArgs(args), OK: err == nil, Bytes: n,
		DurationMS: float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		o.Code = paddock.ErrorCode(err)
		if pe, ok := err.(*paddock.Error); ok {
			o.Rule = pe.Rule
		}
		return nil, o, err
	}
	return res, o, nil
}

// contentKeys are argument fields that carry file contents; events keep only their length.
var contentKeys = map[string]bool{"content": true, "content_base64": true, "old_string": true, "new_string": true}

func redactArgs(args json.RawMessage) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return json.RawMessage(`{}`)
	}
	var scrub func(v any) any
	scrub = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				if s, ok := val.(string); ok && contentKeys[k] {
					x[k] = fmt.Sprintf("<%d bytes>", len(s))
				} else {
					x[k] = scrub(val)
				}
			}
		case []any:
			for i := range x {
				x[i] = scrub(x[i])
			}
		}
		return v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(scrub(m))
	return bytes.TrimSpace(buf.Bytes())
}

// Decode reads a tool's args into v strictly (see package strictjson):
// unknown fields, keys spelled otherwise than the schema's, a key twice,
// invalid UTF-8 and trailing data are refused (bad_request, the key in
// details.key), so the arguments acted on are the ones recorded. Every
// tool's arguments are read through here, the control tools' too.
func Decode(name string, args json.RawMessage, v any) error {
	if err := strictjson.Unmarshal(args, v); err != nil {
		e := paddock.Errorf(paddock.CodeBadRequest, "%s: invalid arguments: %v", name, err)
		var se *strictjson.Error
		if errors.As(err, &se) && se.Key != "" {
			e.WithDetail("key", se.Key)
		}
		return e
	}
	return nil
}

// schema is a tool's input schema. It is not checked here: this runs at
// init, in every start of the binary (the CLI's included), and
// TestOfferedAndEventArgs parses every schema.
func schema(s string) json.RawMessage { return json.RawMessage(s) }
