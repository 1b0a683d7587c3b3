package paddock

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
)

// Code is a stable, machine-readable error code. Clients branch on it; the
// HTTP status (httpapi.Status), the CLI exit code (internal/paddockcli's exitCode)
// and the MCP tool error (a result with isError carrying the code, message
// and details; cmd/paddockd/mcp.go) are all derived from it, in one place each.
type Code string

// The codes of the action protocol. The list is closed: adding one is an API change.
const (
	CodeBadRequest      Code = "bad_request"      // the input is wrong; nothing changed
	CodeNotFound        Code = "not_found"        // no such project, run or object
	CodeConflict        Code = "conflict"         // the object's state forbids this (an illegal transition, a retained workspace)
	CodeBusy            Code = "busy"             // someone else holds what this needs (the project lock, a running job)
	CodeUnauthorized    Code = "unauthorized"     // no credential, or one paddock does not know (a wrong or stale token)
	CodeForbidden       Code = "forbidden"        // the caller, known, may not do this
	CodeUnsupported     Code = "unsupported"      // this machine or build cannot do this
	CodeRunMismatch     Code = "run_mismatch"     // a credential of one run used on another
	CodeNotBootstrapped Code = "not_bootstrapped" // an action on a run that was never bootstrapped
	CodeAttributionLeak Code = "attribution_leak" // the attribution lint refused a submission
	CodeTooLarge        Code = "too_large"        // the input is over a size limit or quota; nothing was written
	CodeNodeLost        Code = "node_lost"        // the node that holds the run (or this node) lost its lease; another may adopt the run
	CodeInternal        Code = "internal"         // a fault of paddock's; details are in the daemon log only
)

// Codes lists every code, in a stable order.
var Codes = []Code{CodeBadRequest, CodeNotFound, CodeConflict, CodeBusy, CodeUnauthorized, CodeForbidden,
	CodeUnsupported, CodeRunMismatch, CodeNotBootstrapped, CodeAttributionLeak, CodeTooLarge, CodeNodeLost, CodeInternal}

// Rule names the policy that refused an action, finer than its Code: a
// client or an agent branches on it ("protected_path", "read_only",
// "access_none"), and a tool call's event records it. The package that
// enforces a policy names its rules (confine's Rule constants).
type Rule string

// RuleAccessNone refuses a workspace action to a run that has no workspace.
const RuleAccessNone Rule = "access_none"

// RuleMenu refuses an event that is not on a run's menu now.
const RuleMenu Rule = "not_on_menu"

// RuleReviewRun refuses a review run what only the run it reviews, or a
// person, does: submit, approve, apply.
const RuleReviewRun Rule = "review_run"

// Error is paddock's one application error. Code, Message, Rule and Details
// are public: they are shown to clients and agents and must never carry a
// host path outside the caller's view or a secret. Err is the internal
// cause, for logs only.
//
// On the wire (see MarshalJSON) the rule is one of the details, "rule";
// the tags say what MarshalJSON writes, for the readers of them (the API
// document's test).
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Rule    Rule           `json:"-"` // which rule refused, if one did
	Details map[string]any `json:"details,omitempty"`
	Err     error          `json:"-"`
}

// errorJSON is the wire form of an Error.
type errorJSON struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// MarshalJSON writes {"code", "message", "details"}, with the rule among
// the details. Its receiver is a value so that an Error marshals the same
// whether or not it is behind a pointer.
func (e Error) MarshalJSON() ([]byte, error) {
	return json.Marshal(errorJSON{Code: e.Code, Message: e.Message, Details: e.PublicDetails()})
}

// UnmarshalJSON reads what MarshalJSON writes: details.rule becomes Rule.
func (e *Error) UnmarshalJSON(b []byte) error {
	var w errorJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Error{Code: w.Code, Message: w.Message, Details: w.Details}
	if r, ok := w.Details["rule"].(string); ok {
		e.Rule = Rule(r)
		delete(e.Details, "rule")
		if len(e.Details) == 0 {
			e.Details = nil
		}
	}
	return nil
}

// PublicDetails are the details as a client sees them: Details, and the
// rule as "rule" if there is one.
func (e *Error) PublicDetails() map[string]any {
	if e.Rule == "" {
		return e.Details
	}
	d := make(map[string]any, len(e.Details)+1)
	maps.Copy(d, e.Details)
	d["rule"] = string(e.Rule)
	return d
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with a formatted public message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithRule returns e with its rule set; it is meant for chaining on a
// freshly made error.
func (e *Error) WithRule(r Rule) *Error {
	e.Rule = r
	return e
}

// WithDetail returns e with one more detail set; it is meant for chaining on a
// freshly made error.
func (e *Error) WithDetail(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal when there is none (an unexpected error is paddock's fault).
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the public message of err. Errors that are not an
// *Error, and internal ones, get a fixed text: their detail belongs in the log.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != CodeInternal {
		return e.Message
	}
	return "internal error"
}

// IsCode reports whether err carries code.
func IsCode(err error, code Code) bool {
	return err != nil && ErrorCode(err) == code
}

// DetailDone is the detail an error carries when paddock knows that
// nothing of the call was done: its value is false, and the call may be
// made again as it is (the same body, the same path), on this node or
// another. The Go client makes such a call again by itself, a few times
// (client.WithRetries). An error without it says nothing either way: a
// call that may have been done is made again only once what it would
// have left (a run's events) shows it was not.
const DetailDone = "done"

// Undone reports whether err says that nothing of its call was done
// (details.done is false): the call may be made again as it is.
func Undone(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	done, ok := e.Details[DetailDone].(bool)
	return ok && !done
}

// MarkUndone returns err saying that nothing of its call was done (see
// DetailDone): a copy of its *Error with the detail added, or, for an
// error that is none, an internal one whose public message stays
// internal's. err itself is not changed.
func MarkUndone(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		return &Error{Code: CodeInternal, Err: err, Details: map[string]any{DetailDone: false}}
	}
	cp := *e
	cp.Details = maps.Clone(e.Details)
	if cp.Details == nil {
		cp.Details = map[string]any{}
	}
	cp.Details[DetailDone] = false
	return &cp
}
