package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// docs/API.md is rendered from openapi.json, never written by hand: the
// document is what the server is tested against, so a reference made from
// it cannot drift from the routes. TestAPIReferenceIsCurrent fails when the
// two differ; `go test ./httpapi -run TestAPIReference -update` (or
// PADDOCK_UPDATE_DOCS=1) writes the file again.
const apiDocPath = "../docs/API.md"

func init() {
	// Another test file of the package may define -update too; one flag
	// serves both.
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite generated files (docs/API.md) instead of comparing")
	}
}

func updateDocs() bool {
	if os.Getenv("PADDOCK_UPDATE_DOCS") == "1" {
		return true
	}
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// TestAPIReferenceIsCurrent: docs/API.md is exactly what openapi.json
// renders to, so a change to the document without the reference fails here.
func TestAPIReferenceIsCurrent(t *testing.T) {
	src, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := renderAPIReference(src)
	if err != nil {
		t.Fatal(err)
	}
	if updateDocs() {
		if err := os.WriteFile(apiDocPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(apiDocPath)
	if err != nil {
		t.Fatalf("%v (go test ./httpapi -run TestAPIReference -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		line := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end of file)"
		}
		t.Errorf("docs/API.md is not what openapi.json renders to (go test ./httpapi -run TestAPIReference -update, then read the diff); first difference at line %d:\n  file:     %s\n  rendered: %s",
			i+1, line(wl), line(gl))
	}
}

// TestAPIReferenceCoversEveryOperation: every operation of the document
// has its heading and its operationId in the rendered reference.
func TestAPIReferenceCoversEveryOperation(t *testing.T) {
	src, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := renderAPIReference(src)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, item := range doc.Paths {
		for method, raw := range item {
			if !httpMethod[method] {
				continue
			}
			var op struct {
				OperationID string `json:"operationId"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatal(err)
			}
			n++
			head := fmt.Sprintf("### `%s %s`", strings.ToUpper(method), path)
			if !bytes.Contains(got, []byte(head)) || !bytes.Contains(got, []byte("`"+op.OperationID+"`")) {
				t.Errorf("the reference lacks %s %s (%s)", method, path, op.OperationID)
			}
		}
	}
	if n == 0 {
		t.Fatal("openapi.json has no operations")
	}
}

var httpMethod = map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true, "trace": true}

// node is a JSON value that keeps its objects' keys in the document's
// order, so the reference lists paths, parameters and properties as the
// document's authors ordered them.
type node struct {
	keys []string
	obj  map[string]*node
	arr  []*node
	val  any // string, float64, bool or nil when not an object or array
	kind byte
}

func parseNode(src []byte) (*node, error) {
	d := json.NewDecoder(bytes.NewReader(src))
	d.UseNumber()
	n, err := decodeNode(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("openapi.json: data after the document")
	}
	return n, nil
}

func decodeNode(d *json.Decoder) (*node, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		n := &node{kind: '{', obj: map[string]*node{}}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeNode(d)
			if err != nil {
				return nil, err
			}
			key := k.(string)
			if _, dup := n.obj[key]; !dup {
				n.keys = append(n.keys, key)
			}
			n.obj[key] = v
		}
		_, err := d.Token()
		return n, err
	case json.Delim('['):
		n := &node{kind: '['}
		for d.More() {
			v, err := decodeNode(d)
			if err != nil {
				return nil, err
			}
			n.arr = append(n.arr, v)
		}
		_, err := d.Token()
		return n, err
	}
	return &node{val: tok}, nil
}

func (n *node) get(key string) *node {
	if n == nil || n.obj == nil {
		return nil
	}
	return n.obj[key]
}

func (n *node) str(key string) string {
	if v := n.get(key); v != nil {
		switch x := v.val.(type) {
		case string:
			return x
		case json.Number:
			return x.String()
		case bool:
			return fmt.Sprint(x)
		}
	}
	return ""
}

// refName is the schema name a "$ref" points at.
func refName(ref string) string {
	return strings.TrimPrefix(ref, "#/components/schemas/")
}

// typeOf renders a schema in one line: a component by its name (linked to
// its section), the ok envelope by what its data is, an array by its
// items, an inline object by its properties.
func typeOf(s *node) string {
	if s == nil {
		return "any"
	}
	if ref := s.str("$ref"); ref != "" {
		name := refName(ref)
		return fmt.Sprintf("[`%s`](#%s)", name, strings.ToLower(name))
	}
	if all := s.get("allOf"); all != nil && len(all.arr) == 2 && refName(all.arr[0].str("$ref")) == "Ok" {
		return "ok, `data`: " + typeOf(all.arr[1].get("properties").get("data"))
	}
	t := s.str("type")
	switch {
	case t == "array":
		return "array of " + typeOf(s.get("items"))
	case t == "object" && s.get("properties") != nil && len(s.get("properties").keys) > 0:
		var ps []string
		for _, k := range s.get("properties").keys {
			ps = append(ps, "`"+k+"`")
		}
		return "object {" + strings.Join(ps, ", ") + "}"
	case t == "":
		if s.kind == '{' && len(s.keys) == 0 {
			return "any"
		}
		if one := s.get("oneOf"); one != nil {
			var alts []string
			for _, a := range one.arr {
				alts = append(alts, typeOf(a))
			}
			return strings.Join(alts, " or ")
		}
		return "any"
	}
	if f := s.str("format"); f != "" {
		t += " (" + f + ")"
	}
	if e := s.get("enum"); e != nil {
		var vs []string
		for _, v := range e.arr {
			vs = append(vs, "`"+fmt.Sprint(v.val)+"`")
		}
		t += ": " + strings.Join(vs, ", ")
	}
	return t
}

// cell makes text fit in one cell of a markdown table.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}

// renderAPIReference renders docs/API.md from openapi.json: an index of
// the operations, then each with its method, path, operationId, summary,
// description, parameters, request and answers, then every schema with its
// properties.
func renderAPIReference(src []byte) ([]byte, error) {
	doc, err := parseNode(src)
	if err != nil {
		return nil, err
	}
	paths := doc.get("paths")
	if paths == nil {
		return nil, fmt.Errorf("openapi.json has no paths")
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	w("# HTTP API reference\n\n")
	w("<!-- Generated from httpapi/openapi.json by httpapi/apidoc_test.go; do not edit.\n")
	w("     go test ./httpapi -run TestAPIReference -update writes it again. -->\n\n")
	w("%s, version %s. The daemon serves this document at `GET /v1/openapi.json`.\n",
		doc.get("info").str("title"), doc.get("info").str("version"))
	w("How to reach the daemon (the unix socket, loopback TCP and its token) is in\n")
	w("[OPERATIONS.md](OPERATIONS.md); the action protocol in words, in [GUIDE.md](GUIDE.md#for-orchestrators-the-action-protocol).\n\n")
	if d := doc.get("info").str("description"); d != "" {
		w("%s\n\n", d)
	}
	w("A type written \"ok, `data`: X\" is the envelope `{\"ok\":true,\"data\":X}`. Every\n")
	w("operation may also answer [`Failure`](#failure), `{\"ok\":false,\"error\":…}`, with the\n")
	w("HTTP status its error code maps to.\n\n")

	type op struct{ method, path, id, summary, callers string }
	var ops []op
	for _, p := range paths.keys {
		item := paths.get(p)
		for _, m := range item.keys {
			if !httpMethod[m] {
				continue
			}
			o := item.get(m)
			ops = append(ops, op{strings.ToUpper(m), p, o.str("operationId"), o.str("summary"), opCallers(o)})
		}
	}
	w("Who may call each operation (`x-paddock-callers`): the roles of the principals it\n")
	w("admits, `run_token` where a run's own token reaches it (on its own run), or\n")
	w("`anyone` let in; the operator calls every operation ([IDENTITY.md](IDENTITY.md)).\n\n")
	w("## Operations\n\n| method | path | operationId | callers | summary |\n|---|---|---|---|---|\n")
	for _, o := range ops {
		w("| %s | [`%s`](#%s) | `%s` | %s | %s |\n", o.method, o.path, anchor(o.method+" "+o.path), o.id, o.callers, cell(o.summary))
	}
	w("\n")

	for _, p := range paths.keys {
		item := paths.get(p)
		for _, m := range item.keys {
			if !httpMethod[m] {
				continue
			}
			o := item.get(m)
			w("### `%s %s`\n\n", strings.ToUpper(m), p)
			w("`%s`", o.str("operationId"))
			if s := o.str("summary"); s != "" {
				w(": %s", s)
			}
			w("\n\n")
			if c := opCallers(o); c != "" {
				w("Callers: %s.\n\n", c)
			}
			if d := o.str("description"); d != "" {
				w("%s\n\n", strings.TrimSpace(d))
			}
			var params []*node
			if pp := item.get("parameters"); pp != nil {
				params = append(params, pp.arr...)
			}
			if pp := o.get("parameters"); pp != nil {
				params = append(params, pp.arr...)
			}
			if len(params) > 0 {
				w("| parameter | in | type | required | description |\n|---|---|---|---|---|\n")
				for _, pa := range params {
					req := ""
					if pa.str("required") == "true" {
						req = "yes"
					}
					w("| `%s` | %s | %s | %s | %s |\n", pa.str("name"), pa.str("in"), cell(typeOf(pa.get("schema"))), req, cell(pa.str("description")))
				}
				w("\n")
			}
			if rb := o.get("requestBody"); rb != nil {
				req := "optional"
				if rb.str("required") == "true" {
					req = "required"
				}
				for _, ct := range rb.get("content").keys {
					w("Request (%s), `%s`: %s\n", req, ct, typeOf(rb.get("content").get(ct).get("schema")))
				}
				if d := rb.str("description"); d != "" {
					w("%s\n", strings.TrimSpace(d))
				}
				w("\n")
			}
			if rs := o.get("responses"); rs != nil {
				w("| answer | content | type | description |\n|---|---|---|---|\n")
				for _, code := range rs.keys {
					r := rs.get(code)
					content := r.get("content")
					if content == nil || len(content.keys) == 0 {
						w("| %s | | | %s |\n", code, cell(r.str("description")))
						continue
					}
					for _, ct := range content.keys {
						w("| %s | `%s` | %s | %s |\n", code, ct, cell(typeOf(content.get(ct).get("schema"))), cell(r.str("description")))
					}
				}
				w("\n")
			}
		}
	}

	schemas := doc.get("components").get("schemas")
	if schemas != nil {
		w("## Schemas\n\n")
		for _, name := range schemas.keys {
			s := schemas.get(name)
			w("### %s\n\n", name)
			if d := s.str("description"); d != "" {
				w("%s\n\n", strings.TrimSpace(d))
			}
			props := s.get("properties")
			if props == nil || len(props.keys) == 0 {
				w("%s\n\n", typeOf(s))
				continue
			}
			required := map[string]bool{}
			if r := s.get("required"); r != nil {
				for _, v := range r.arr {
					required[fmt.Sprint(v.val)] = true
				}
			}
			w("| property | type | required | description |\n|---|---|---|---|\n")
			for _, k := range props.keys {
				p := props.get(k)
				req := ""
				if required[k] {
					req = "yes"
				}
				w("| `%s` | %s | %s | %s |\n", k, cell(typeOf(p)), req, cell(p.str("description")))
			}
			w("\n")
		}
	}
	return []byte(strings.TrimRight(b.String(), "\n") + "\n"), nil
}

// anchor is the fragment GitHub gives the heading "### `TEXT`": lower
// case, spaces as hyphens, punctuation but hyphens and underscores dropped.
func anchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// opCallers is an operation's x-paddock-callers, joined.
func opCallers(o *node) string {
	c := o.get("x-paddock-callers")
	if c == nil {
		return ""
	}
	var out []string
	for _, n := range c.arr {
		if s, ok := n.val.(string); ok {
			out = append(out, "`"+s+"`")
		}
	}
	return strings.Join(out, ", ")
}
