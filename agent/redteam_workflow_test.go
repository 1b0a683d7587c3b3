package agent

import (
	"strings"
	"testing"
)

// Red team (workflows): files ValidateWorkflow accepts that make a flow
// loop forever or fail when it starts.
func TestRedteamWorkflowValidation(t *testing.T) {
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
