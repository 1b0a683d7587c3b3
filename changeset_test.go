package paddock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestChangeSetJSONKeepsBytes: a change set whose paths and diff are any
// bytes (invalid UTF-8, NUL, CR, lone continuation bytes) reads back from
// its JSON byte for byte, and a UTF-8 one is written as it was before.
func TestChangeSetJSONKeepsBytes(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	randBytes := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Intn(256))
		}
		return string(b)
	}
	for i := 0; i < 500; i++ {
		cs := ChangeSet{RunID: "r-x", Diff: randBytes(rng.Intn(64)),
			Entries: []ChangeEntry{{Path: randBytes(1 + rng.Intn(16)), Op: OpCreate}, {Path: "caf\xe9", Op: OpModify}, {Path: "plain.txt", Op: OpDelete}}}
		b, err := json.Marshal(cs)
		if err != nil {
			t.Fatal(err)
		}
		var back ChangeSet
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		// The API's handler writes the Wire and the client reads one: the
		// same JSON, the same change set back.
		wb, err := json.Marshal(cs.Wire())
		if err != nil {
			t.Fatal(err)
		}
		if string(wb) != string(b) {
			t.Fatalf("the wire form writes\n%s\nMarshalJSON\n%s", wb, b)
		}
		var w ChangeSetWire
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatal(err)
		}
		viaWire, err := w.ChangeSet()
		if err != nil {
			t.Fatal(err)
		}
		for _, back := range []*ChangeSet{&back, viaWire} {
			if back.Diff != cs.Diff || len(back.Entries) != 3 {
				t.Fatalf("diff %q came back %q", cs.Diff, back.Diff)
			}
			for j := range cs.Entries {
				if back.Entries[j].Path != cs.Entries[j].Path || back.Entries[j].Op != cs.Entries[j].Op {
					t.Fatalf("entry %q came back %q", cs.Entries[j].Path, back.Entries[j].Path)
				}
			}
		}
	}
	// Field for field and in order, the wire form is what the change set's
	// JSON was before it (its fields, diff_b64 after them): a field added
	// to ChangeSet and not to ChangeSetWire fails here.
	type plain ChangeSet
	type before struct {
		plain
		DiffB64 string `json:"diff_b64,omitempty"`
	}
	for _, diff := range []string{"plain diff <a> & b\n", "not \xff UTF-8"} {
		cs := ChangeSet{RunID: "r-x", BaseRevision: "abc", Diff: diff, DiffSize: 12, DiffOmitted: true, DiffFile: "/kept/diff",
			Hash: "sha256:0", Ignored: []string{"build/"}, ComputedAt: time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC),
			Entries: []ChangeEntry{{Path: "a\xffb", Op: OpModify, OldMode: "100644", NewMode: "100755", OldBlob: "1", NewBlob: "2", Binary: true, Size: 3,
				Risks: []string{"r"}, Notes: map[string]string{"k": "v"}, Blocked: "why"}}}
		ref := before{plain: plain(cs)}
		if !utf8.ValidString(diff) {
			ref.Diff, ref.DiffB64 = strings.ToValidUTF8(diff, "\uFFFD"), base64.StdEncoding.EncodeToString([]byte(diff))
		}
		want, _ := json.Marshal(ref)
		for name, v := range map[string]any{"MarshalJSON": cs, "Wire": cs.Wire()} {
			if got, _ := json.Marshal(v); string(got) != string(want) {
				t.Errorf("%s writes\n%s\nwhere the change set's JSON was\n%s", name, got, want)
			}
		}
	}
	b, _ := json.Marshal(ChangeEntry{Path: "a.txt", Op: OpCreate})
	if string(b) != `{"path":"a.txt","op":"create","binary":false,"size":0}` {
		t.Fatalf("a UTF-8 entry: %s", b)
	}
	// No entries stay none, and an empty list stays empty.
	for _, cs := range []ChangeSet{{RunID: "r-x"}, {RunID: "r-x", Entries: []ChangeEntry{}}} {
		b, _ := json.Marshal(cs)
		wb, _ := json.Marshal(cs.Wire())
		var w ChangeSetWire
		json.Unmarshal(wb, &w)
		back, err := w.ChangeSet()
		if err != nil || string(wb) != string(b) || (back.Entries == nil) != (cs.Entries == nil) {
			t.Fatalf("%s against %s, back %+v %v", wb, b, back, err)
		}
	}
}

// BenchmarkChangeSetJSON: a change set of 1,000 entries and a 2 MB diff,
// encoded as the API's handler encodes it and decoded as the Go client
// decodes it, each beside the change set's own JSON methods (which
// encoding/json scans again whole).
func BenchmarkChangeSetJSON(b *testing.B) {
	var diff strings.Builder
	cs := &ChangeSet{RunID: "r-bench", BaseRevision: strings.Repeat("a", 40), Hash: strings.Repeat("b", 64)}
	for i := range 1000 {
		fmt.Fprintf(&diff, "diff --git a/mod%03d/file%05d.go b/mod%03d/file%05d.go\nindex 1234567..89abcde 100644\n--- a/mod%03d/file%05d.go\n+++ b/mod%03d/file%05d.go\n@@ -1,1 +1,3 @@\n %s\n+\n+// edited %d\n",
			i, i, i, i, i, i, i, i, strings.Repeat("abcdefghij", 200), i)
		cs.Entries = append(cs.Entries, ChangeEntry{Path: fmt.Sprintf("mod%03d/file%05d.go", i, i), Op: OpModify, Size: 2020})
	}
	cs.Diff = diff.String()
	encode := func(v any) []byte {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(map[string]any{"ok": true, "data": v}); err != nil {
			b.Fatal(err)
		}
		return buf.Bytes()
	}
	answer := encode(cs.Wire())
	b.Run("encode/methods", func(b *testing.B) {
		for b.Loop() {
			encode(cs)
		}
	})
	b.Run("encode/wire", func(b *testing.B) {
		for b.Loop() {
			encode(cs.Wire())
		}
	})
	b.Run("decode/methods", func(b *testing.B) {
		for b.Loop() {
			var env struct {
				Data json.RawMessage `json:"data"`
			}
			var out ChangeSet
			if err := json.NewDecoder(bytes.NewReader(answer)).Decode(&env); err != nil || json.Unmarshal(env.Data, &out) != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/wire", func(b *testing.B) {
		for b.Loop() {
			var w ChangeSetWire
			env := struct {
				Data any `json:"data"`
			}{Data: &w}
			if err := json.NewDecoder(bytes.NewReader(answer)).Decode(&env); err != nil {
				b.Fatal(err)
			}
			if _, err := w.ChangeSet(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
