package client

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestDecodeAnswer: an answer's data is decoded in one pass into what the
// caller gives, as the two passes before decoded it: a change set's wire
// form into the change set, a json.RawMessage given the data's text (null
// included), null or no data leaving the value as it was, nothing decoded
// for nil, and a value that is not a pointer refused.
func TestDecodeAnswer(t *testing.T) {
	cs := paddock.ChangeSet{RunID: "r-1", Diff: "diff \xff\n", Entries: []paddock.ChangeEntry{{Path: "a\xffb", Op: paddock.OpModify}}}
	data, _ := json.Marshal(cs.Wire())
	var w paddock.ChangeSetWire
	if ok, err := decodeAnswer(strings.NewReader(`{"ok":true,"data":`+string(data)+`}`), &w); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if back, err := w.ChangeSet(); err != nil || back.Diff != cs.Diff || back.Entries[0].Path != cs.Entries[0].Path {
		t.Fatalf("the change set came back as %+v (%v)", back, err)
	}
	for answer, want := range map[string]string{`{"ok":true,"data":null}`: "null", `{"ok":true,"data":{"a":1}}`: `{"a":1}`, `{"ok":true}`: ""} {
		var raw json.RawMessage
		if ok, err := decodeAnswer(strings.NewReader(answer), &raw); !ok || err != nil || string(raw) != want {
			t.Errorf("%s: raw %q (%v, %v), want %q", answer, raw, ok, err, want)
		}
	}
	for _, answer := range []string{`{"ok":true,"data":null}`, `{"ok":true}`} {
		run := paddock.Run{ID: "kept"}
		if ok, err := decodeAnswer(strings.NewReader(answer), &run); !ok || err != nil || run.ID != "kept" {
			t.Errorf("%s: %v %v, the run is now %+v", answer, ok, err, run)
		}
	}
	if ok, err := decodeAnswer(strings.NewReader(`{"ok":true,"data":[1,2]}`), nil); !ok || err != nil {
		t.Errorf("nil: %v %v", ok, err)
	}
	if ok, err := decodeAnswer(strings.NewReader(`{"ok":false}`), nil); ok || err != nil {
		t.Errorf("not ok: %v %v", ok, err)
	}
	var run paddock.Run
	if _, err := decodeAnswer(strings.NewReader(`{"ok":true,"data":{}}`), run); err == nil {
		t.Error("a value that is not a pointer was taken")
	}
	if _, err := decodeAnswer(strings.NewReader(`{"ok":true,"data":{}}`), (*paddock.Run)(nil)); err == nil {
		t.Error("a nil pointer was taken")
	}
}
