package agent

import (
	"reflect"
	"strings"
	"testing"
)

// The built-in task-with-review, as a file would say it.
const taskWithReviewFile = `name = "task-with-review"
description = "a coder works; a reviewer reads exactly what it submitted and approves it or sends it back; a person approves what lands"
start = "coding"
max_rounds = 3

[[state]]
name = "coding"
agent = "coder"
  [[state.transition]]
  event = "done"
  to = "reviewing"
  description = "the task is done: submit the change set (paddock submits it if it is not) for review"

[[state]]
name = "reviewing"
agent = "reviewer"
reviews = "coding"
  [[state.transition]]
  event = "approve"
  to = "awaiting_approval"
  guard = "head == context.head"
  description = "the change set under review (its hash as head) is right; a person approves what lands"
  [[state.transition]]
  event = "request_changes"
  to = "coding"
  guard = "head == context.head"
  round = true
  findings = true
  description = "send the change set (its hash as head) back to the coder, with findings"

[[state]]
name = "awaiting_approval"
end = true

[[state]]
name = "failed"
end = true
`

func TestParseWorkflow(t *testing.T) {
	w, err := ParseWorkflow("twr.toml", []byte(taskWithReviewFile))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(w, TaskWithReview()) {
		t.Fatalf("the file and the built-in differ:\n%+v\n%+v", w, TaskWithReview())
	}
	for _, tc := range []struct{ name, edit, want string }{
		{"unknown key", `max_rounds = 3`, `twr.toml:4: unknown key "max_round"`},
		{"no start", `start = "coding"`, `start "nowhere" is not a state`},
		{"a guard without a head", `reviews = "coding"`, `guarded by the head, but the state reviews nothing`},
		{"a tool's name", `event = "done"`, `event "read" is the name of a tool`},
		{"a dangling transition", `to = "reviewing"`, `leads to "limbo", which is not a state`},
		{"another guard", `guard = "head == context.head"`, `the only guard is`},
	} {
		src := strings.Replace(taskWithReviewFile, tc.edit, map[string]string{
			"unknown key": `max_round = 3`, "no start": `start = "nowhere"`, "a guard without a head": ``,
			"a tool's name": `event = "read"`, "a dangling transition": `to = "limbo"`, "another guard": `guard = "true"`,
		}[tc.name], 1)
		if _, err := ParseWorkflow("twr.toml", []byte(src)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Files that would make a flow loop forever or fail when it starts are
// refused (each was once accepted: found by red-teaming the workflows).
func TestParseWorkflowRefusesLoopsAndBadStarts(t *testing.T) {
	for _, tc := range []struct{ name, from, to string }{
		// request_changes no longer counts: coding <-> reviewing forever.
		{"a cycle with no round transition", "  round = true\n", ""},
		// max_rounds left out: round transitions count against nothing.
		{"round transitions with no max_rounds", "max_rounds = 3\n", ""},
		// The flow starts in a state that reviews a state never entered:
		// StartFlow records the flow, then fails to make its run.
		{"a start that reviews", `start = "coding"`, `start = "reviewing"`},
	} {
		src := strings.Replace(taskWithReviewFile, tc.from, tc.to, 1)
		if src == taskWithReviewFile {
			t.Fatalf("%s: the edit did not apply", tc.name)
		}
		if w, err := ParseWorkflow("twr.toml", []byte(src)); err == nil {
			t.Errorf("%s: accepted (start %s, max_rounds %d)", tc.name, w.Start, w.MaxRounds)
		}
	}
}
