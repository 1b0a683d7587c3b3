package apply

import (
	"encoding/json"
	"testing"
)

// TestJournalStepKeepsBytes: a journal step whose paths are not UTF-8
// reads back with the same bytes, and a UTF-8 one is written as before.
func TestJournalStepKeepsBytes(t *testing.T) {
	t.Parallel()
	s := Step{Path: "d\xe9/n\xff", Temp: "d\xe9/.paddock-apply-1", Dirs: []string{"d\xe9"}, Gone: []string{"x\x01"}, Prune: []string{"ok"}, Op: "create"}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Step
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Path != s.Path || back.Temp != s.Temp || back.Dirs[0] != s.Dirs[0] || back.Gone[0] != s.Gone[0] || back.Prune[0] != "ok" || back.Op != "create" {
		t.Fatalf("came back %+v", back)
	}
	b, _ = json.Marshal(Step{Path: "a.txt", Op: "create"})
	var m map[string]any
	json.Unmarshal(b, &m)
	if m["path"] != "a.txt" || m["b64"] != nil {
		t.Fatalf("a UTF-8 step: %s", b)
	}
}
