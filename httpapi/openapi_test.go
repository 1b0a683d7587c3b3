package httpapi

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/tools"
)

// loadOpenAPI loads the served document with kin-openapi and validates it
// as OpenAPI 3: a real validator, not a reading of our own.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openAPI)
	if err != nil {
		t.Fatalf("openapi.json does not load: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.json is not valid OpenAPI 3: %v", err)
	}
	return doc
}

var camelCase = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// TestOpenAPIOperations: the document is valid OpenAPI 3, every operation
// has a unique camelCase operationId (what a generated client names its
// methods after), and the operations are exactly the server's routes.
func TestOpenAPIOperations(t *testing.T) {
	doc := loadOpenAPI(t)
	routes := map[string]bool{}
	for _, rt := range Routes() {
		routes[rt.Method+" "+rt.Path] = true
	}
	ids := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			route := method + " " + path
			switch prev, dup := ids[op.OperationID]; {
			case op.OperationID == "":
				t.Errorf("%s has no operationId", route)
			case !camelCase.MatchString(op.OperationID):
				t.Errorf("%s: operationId %q is not camelCase", route, op.OperationID)
			case dup:
				t.Errorf("operationId %q names both %s and %s", op.OperationID, prev, route)
			}
			ids[op.OperationID] = route
			if !routes[route] {
				t.Errorf("openapi.json describes %s, which is not a route", route)
			}
			delete(routes, route)
		}
	}
	for r := range routes {
		t.Errorf("route %s is not in openapi.json", r)
	}
	// The names the issue and the README promise.
	for _, id := range []string{"bootstrap", "startJob", "getStatus", "cancelJob", "getArtifact", "submit"} {
		if ids[id] == "" {
			t.Errorf("no operation %q", id)
		}
	}
}

// TestOpenAPICallers: each operation's x-paddock-callers says who may
// call it exactly as the route table does: the roles of the principals it
// admits, run_token where a run's own token reaches it, or anyone.
func TestOpenAPICallers(t *testing.T) {
	doc := loadOpenAPI(t)
	for _, rt := range Routes() {
		op := doc.Paths.Find(rt.Path).GetOperation(rt.Method)
		if op == nil {
			continue // TestOpenAPIOperations says so
		}
		want := []string{"anyone"}
		if !rt.Public {
			want = nil
			for _, r := range rt.Roles {
				want = append(want, string(r))
			}
			if rt.RunToken {
				want = append(want, "run_token")
			}
		}
		raw, _ := json.Marshal(op.Extensions["x-paddock-callers"])
		var got []string
		json.Unmarshal(raw, &got)
		if !slices.Equal(got, want) {
			t.Errorf("%s %s: x-paddock-callers %v, the route table says %v", rt.Method, rt.Path, got, want)
		}
	}
}

// schemaTypes are the Go types each schema of the document describes.
var schemaTypes = map[string]any{
	"Error":              paddock.Error{},
	"DaemonStatus":       paddock.DaemonStatus{},
	"UILogin":            paddock.UILogin{},
	"BundleKey":          paddock.BundleKey{},
	"ImportResult":       paddock.ImportResult{},
	"QueueEntry":         paddock.QueueEntry{},
	"Blame":              paddock.Blame{},
	"HunkBlame":          paddock.HunkBlame{},
	"HunkSource":         paddock.HunkSource{},
	"QueueAddRequest":    paddock.QueueAddRequest{},
	"DoctorReport":       paddock.DoctorReport{},
	"Project":            paddock.Project{},
	"Lock":               paddock.Lock{},
	"AddProjectRequest":  paddock.AddProjectRequest{},
	"SetProjectRequest":  paddock.SetProjectRequest{},
	"UnlockResult":       paddock.UnlockResult{},
	"CheckoutStatus":     paddock.CheckoutStatus{},
	"CreateRunRequest":   paddock.CreateRunRequest{},
	"Run":                paddock.Run{},
	"Notice":             paddock.Notice{},
	"ReviewOf":           paddock.ReviewOf{},
	"Flow":               paddock.Flow{},
	"FlowEvent":          paddock.FlowEvent{},
	"Workflow":           paddock.Workflow{},
	"WorkflowState":      paddock.WorkflowState{},
	"FlowTransition":     paddock.FlowTransition{},
	"StartFlowRequest":   paddock.StartFlowRequest{},
	"MenuEventRequest":   paddock.MenuEventRequest{},
	"Menu":               paddock.Menu{},
	"MenuItem":           paddock.MenuItem{},
	"ReviewRequest":      paddock.ReviewRequest{},
	"ForkRequest":        paddock.ForkRequest{},
	"ForkResult":         paddock.ForkResult{},
	"Node":               paddock.Node{},
	"AdoptResult":        paddock.AdoptResult{},
	"Workspace":          paddock.Workspace{},
	"Checkpoint":         paddock.Checkpoint{},
	"ResumeResult":       paddock.ResumeResult{},
	"Event":              paddock.Event{},
	"Finding":            paddock.Finding{},
	"Tool":               tools.Tool{},
	"ExecRequest":        paddock.ExecRequest{},
	"TerminalSize":       paddock.TerminalSize{},
	"ExecResult":         paddock.ExecResult{},
	"Enforcement":        paddock.Enforcement{},
	"Hold":               paddock.Hold{},
	"InboxResult":        paddock.InboxResult{},
	"ChangeEntry":        paddock.ChangeEntry{},
	"ChangeSet":          paddock.ChangeSet{},
	"Submission":         paddock.Submission{},
	"AgentDefinition":    paddock.AgentDefinition{},
	"BootstrapRequest":   paddock.BootstrapRequest{},
	"BootstrapResult":    paddock.BootstrapResult{},
	"Job":                paddock.Job{},
	"JobStatus":          paddock.JobStatus{},
	"Plan":               paddock.Plan{},
	"PlanInput":          paddock.PlanInput{},
	"PlanStep":           paddock.PlanStep{},
	"CredentialRule":     paddock.CredentialRule{},
	"Cache":              paddock.Cache{},
	"ToolRule":           paddock.ToolRule{},
	"AgentLimits":        paddock.AgentLimits{},
	"AgentRecord":        paddock.AgentRecord{},
	"Caller":             paddock.Caller{},
	"Principal":          paddock.Principal{},
	"PrincipalRequest":   paddock.PrincipalRequest{},
	"Token":              paddock.Token{},
	"NewToken":           paddock.NewToken{},
	"TokenRequest":       paddock.TokenRequest{},
	"ApprovalPolicy":     paddock.ApprovalPolicy{},
	"LabelRule":          paddock.LabelRule{},
	"AutoApproval":       paddock.AutoApproval{},
	"Approval":           paddock.Approval{},
	"PolicyDecision":     paddock.PolicyDecision{},
	"AddAgentRequest":    paddock.AddAgentRequest{},
	"AccessRequest":      paddock.AccessRequest{},
	"AccessRequestInput": paddock.AccessRequestInput{},
	"ToolCapability":     paddock.ToolCapability{},
	"Capabilities":       paddock.Capabilities{},
	"TestCounts":         paddock.TestCounts{},
	"CheckResult":        paddock.CheckResult{},
	"VerifyResult":       paddock.VerifyResult{},
	"CheckEnvironment":   paddock.CheckEnvironment{},
	"CheckOverride":      paddock.CheckOverride{},
}

// bodyTypes are the Go types of the request bodies written inline in an
// operation, by operationId.
var bodyTypes = map[string]any{
	"unlockProject": paddock.UnlockRequest{},
	"checkpointRun": paddock.CheckpointRequest{},
	"gc":            paddock.GCRequest{},
	"submit":        paddock.SubmitRequest{},
	"approve":       paddock.ApproveRequest{},
	"queueAdd":      paddock.QueueAddRequest{},
	"apply":         paddock.ApplyRequest{},
	"startJob":      paddock.StartJobRequest{},
	"verify":        paddock.VerifyRequest{},
	"grantAccess":   paddock.DecideRequest{},
	"denyAccess":    paddock.DecideRequest{},
}

// marshalerFields are the fields a type's own MarshalJSON adds to those
// its struct tags name.
var marshalerFields = map[reflect.Type][]string{
	reflect.TypeFor[paddock.ChangeEntry](): {"path_b64"},
	reflect.TypeFor[paddock.ChangeSet]():   {"diff_b64"},
}

// TestOpenAPISchemasMatchTypes: every schema names the fields the server's
// Go type writes, no more and no fewer, at every depth, each with a JSON
// type that can hold the field (a time is a date-time string). A client
// generated from the document then decodes every answer whole.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	for name, v := range schemaTypes {
		ref := doc.Components.Schemas[name]
		if ref == nil {
			t.Errorf("no schema %s", name)
			continue
		}
		matchSchema(t, name, ref.Value, reflect.TypeOf(v))
	}
	for name := range doc.Components.Schemas {
		if _, ok := schemaTypes[name]; !ok && name != "Ok" && name != "Failure" {
			t.Errorf("schema %s: no Go type is held to it (add it to schemaTypes)", name)
		}
	}
	for id, v := range bodyTypes {
		op := operation(doc, id)
		if op == nil || op.RequestBody == nil {
			t.Errorf("operation %s has no request body", id)
			continue
		}
		matchSchema(t, id+" body", op.RequestBody.Value.Content.Get("application/json").Schema.Value, reflect.TypeOf(v))
	}
	art := operation(doc, "getArtifact").Responses.Status(200).Value.Content.Get("application/json").Schema.Value
	matchSchema(t, "getArtifact data", art.AllOf[1].Value.Properties["data"].Value, reflect.TypeFor[paddock.Artifact]())
}

func operation(doc *openapi3.T, id string) *openapi3.Operation {
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.OperationID == id {
				return op
			}
		}
	}
	return nil
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// matchSchema holds schema s to Go type typ, which encoding/json writes.
func matchSchema(t *testing.T, where string, s *openapi3.Schema, typ reflect.Type) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	want := ""
	switch {
	case typ == rawType || typ.Kind() == reflect.Interface:
		return // any JSON value
	case typ == timeType:
		if !s.Type.Is("string") || s.Format != "date-time" {
			t.Errorf("%s: a time, described as %v %q rather than a date-time string", where, s.Type.Slice(), s.Format)
		}
		return
	case typ.Implements(reflect.TypeFor[encoding.TextMarshaler]()):
		want = "string"
	case typ.Kind() == reflect.String:
		want = "string"
	case typ.Kind() == reflect.Bool:
		want = "boolean"
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Uint64:
		want = "integer"
	case typ.Kind() == reflect.Float32 || typ.Kind() == reflect.Float64:
		want = "number"
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Uint8:
		want = "string" // base64
	case typ.Kind() == reflect.Slice:
		if !s.Type.Is("array") || s.Items == nil {
			t.Errorf("%s: a list, described as %v", where, s.Type.Slice())
			return
		}
		matchSchema(t, where+"[]", s.Items.Value, typ.Elem())
		return
	case typ.Kind() == reflect.Map:
		want = "object"
	case typ.Kind() == reflect.Struct:
		if !s.Type.Is("object") {
			t.Errorf("%s: an object, described as %v", where, s.Type.Slice())
			return
		}
		if len(s.Properties) == 0 {
			return // described as any object
		}
		fields := jsonFields(typ)
		for _, extra := range marshalerFields[typ] {
			fields[extra] = reflect.TypeFor[string]()
		}
		for name, ft := range fields {
			p := s.Properties[name]
			if p == nil {
				t.Errorf("%s: the server writes %q, which the schema does not describe", where, name)
				continue
			}
			matchSchema(t, where+"."+name, p.Value, ft)
		}
		for name := range s.Properties {
			if _, ok := fields[name]; !ok {
				t.Errorf("%s: the schema describes %q, which the server never writes", where, name)
			}
		}
		return
	default:
		t.Errorf("%s: no rule for Go type %s", where, typ)
		return
	}
	if !s.Type.Is(want) {
		t.Errorf("%s: Go %s is JSON %s, described as %v", where, typ, want, s.Type.Slice())
	}
}

// jsonFields are the JSON names of a struct's fields as encoding/json
// writes them, embedded structs flattened.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// TestOpenAPIErrorCodes: the document's error codes are paddock.Codes,
// each with its status in Error's description.
func TestOpenAPIErrorCodes(t *testing.T) {
	s := loadOpenAPI(t).Components.Schemas["Error"].Value
	var enum []paddock.Code
	for _, v := range s.Properties["code"].Value.Enum {
		enum = append(enum, paddock.Code(fmt.Sprint(v)))
	}
	if !slices.Equal(enum, paddock.Codes) {
		t.Errorf("the document's error codes %v, paddock's %v", enum, paddock.Codes)
	}
	for _, c := range paddock.Codes {
		if !regexp.MustCompile(`\b` + string(c) + `\b[^,]*\b` + strconv.Itoa(Status(c)) + `\b`).MatchString(s.Description) {
			t.Errorf("Error's description does not give %s's status, %d: %s", c, Status(c), s.Description)
		}
	}
}
