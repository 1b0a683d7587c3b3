package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
)

// callRaw calls a tool with arguments exactly as sent, bytes and all.
func (f *fixture) callRaw(t *testing.T, name, raw string) (any, error) {
	t.Helper()
	res, _, err := registry[name].Call(context.Background(), f.root, json.RawMessage(raw))
	return res, err
}

// TestArgumentsReadOneWay: arguments that encoding/json would read one way
// while the recorded event shows another are refused, naming the key, and
// nothing is written: a key twice (also in another case, also nested), a key
// spelled otherwise than the schema, invalid UTF-8 or a lone surrogate in a
// path or content.
func TestArgumentsReadOneWay(t *testing.T) {
	f := newFixture(t)
	for raw, key := range map[string]string{
		`{"path":"x.txt","Path":"y.txt","content":"x"}`:    "Path",
		`{"path":"x.txt","path":"y.txt","content":"x"}`:    "path",
		`{"PATH":"x.txt","content":"x"}`:                   "PATH",
		`{"path":"x.txt","CONTENT":"x"}`:                   "CONTENT",
		`{"path":"x` + "\xff" + `.txt","content":"x"}`:     "path",
		`{"path":"x.txt","content":"a` + "\xe2\x82" + `"}`: "content",
		`{"path":"x.txt","content":"\udfff"}`:              "content",
		`{"path":"x\ud800.txt","content":"x"}`:             "path",
	} {
		_, err := f.callRaw(t, "write", raw)
		pe, ok := err.(*paddock.Error)
		if !ok || pe.Code != paddock.CodeBadRequest || pe.Details["key"] != key {
			t.Errorf("write %q: %v, want bad_request naming %q", raw, err, key)
		}
	}
	_, err := f.callRaw(t, "edit", `{"path":"a.txt","edits":[{"old_string":"alpha","new_string":"A","New_string":"B"}]}`)
	if pe, ok := err.(*paddock.Error); !ok || pe.Details["key"] != "edits[0].New_string" {
		t.Errorf("edit with a nested case variant: %v", err)
	}
	_, err = f.callRaw(t, "move", `{"from":"a.txt","to":"b.txt","TO":"c.txt"}`)
	if pe, ok := err.(*paddock.Error); !ok || pe.Details["key"] != "to" && pe.Details["key"] != "TO" {
		t.Errorf("move with a case variant: %v", err)
	}
	ents, _ := os.ReadDir(f.ws)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "x") || e.Name() == "y.txt" || e.Name() == "b.txt" || e.Name() == "c.txt" {
			t.Errorf("a refused call wrote %q", e.Name())
		}
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "a.txt")); string(b) != "alpha\nbeta\ngamma\n" {
		t.Errorf("a.txt changed: %q", b)
	}
}

// TestBytesThroughBase64: content that is not UTF-8 goes in through
// content_base64 and comes out of read as base64, byte for byte, in byte
// mode and in line mode (where the bytes lie past the binary sniff).
func TestBytesThroughBase64(t *testing.T) {
	f := newFixture(t)
	data := []byte("caf\xe9 latin-1\n\xff\xfe\x80\n")
	w := mustCall(t, f, "write", map[string]any{"path": "latin1.txt", "content_base64": base64.StdEncoding.EncodeToString(data)}).(*WriteResult)
	if b, _ := os.ReadFile(filepath.Join(f.ws, "latin1.txt")); !bytes.Equal(b, data) || w.Bytes != len(data) {
		t.Fatalf("written %q (%d), want %q", b, w.Bytes, data)
	}
	r := mustCall(t, f, "read", map[string]any{"path": "latin1.txt"}).(*ReadResult)
	if got, _ := base64.StdEncoding.DecodeString(r.Content); r.Encoding != "base64" || !bytes.Equal(got, data) {
		t.Fatalf("read: %+v", r)
	}
	// Past the first 8000 bytes the file still looks like text.
	long := append(bytes.Repeat([]byte("plain text line\n"), 600), "tail \xff\xfe\n"...)
	os.WriteFile(filepath.Join(f.ws, "long.txt"), long, 0o644)
	r = mustCall(t, f, "read", map[string]any{"path": "long.txt", "offset": 600}).(*ReadResult)
	if got, _ := base64.StdEncoding.DecodeString(r.Content); r.Binary || r.Encoding != "base64" || string(got) != "plain text line\ntail \xff\xfe\n" {
		t.Fatalf("line mode: %+v", r)
	}
	r = mustCall(t, f, "read", map[string]any{"path": "long.txt", "offset": 1, "limit": 1}).(*ReadResult)
	if r.Encoding != "utf-8" || r.Content != "plain text line\n" {
		t.Fatalf("valid lines: %+v", r)
	}
	for _, args := range []map[string]any{
		{"path": "y.txt", "content": "x", "content_base64": "eA=="},
		{"path": "y.txt", "content_base64": "not base64"},
		{"path": "y.txt", "content_base64": "eA"}, // unpadded
		{"path": "y.txt"},
	} {
		_, err := f.call(t, "write", args)
		wantRule(t, err, paddock.CodeBadRequest, "")
	}
	if _, err := os.Lstat(filepath.Join(f.ws, "y.txt")); err == nil {
		t.Fatal("a refused write made y.txt")
	}
	// The event keeps the length of the bytes, not the bytes.
	_, o, _ := registry["write"].Call(context.Background(), f.root, json.RawMessage(`{"path":"z.bin","content_base64":"c2VjcmV0IGJ5dGVz"}`))
	if !o.OK || bytes.Contains(o.Args, []byte("c2VjcmV0")) || !bytes.Contains(o.Args, []byte("<16 bytes>")) {
		t.Fatalf("recorded arguments: %s", o.Args)
	}
	// An empty file is written either way.
	mustCall(t, f, "write", map[string]any{"path": "empty1", "content_base64": ""})
	mustCall(t, f, "write", map[string]any{"path": "empty2", "content": ""})
}

// TestTrailingSlashNamesADirectory: "README.md/" is cleaned to "README.md"
// by path rules, but names a directory; no tool acts on the file through it.
func TestTrailingSlashNamesADirectory(t *testing.T) {
	f := newFixture(t)
	const orig = "alpha\nbeta\ngamma\n"
	for _, p := range []string{"a.txt/", "a.txt/.", "a.txt//", "sub/b.txt/", "sub/deep/..", "new.txt/"} {
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"write", map[string]any{"path": p, "content": "x"}},
			{"edit", map[string]any{"path": p, "old_string": "alpha", "new_string": "x"}},
			{"read", map[string]any{"path": p}},
		} {
			_, err := f.call(t, c.tool, c.args)
			wantRule(t, err, paddock.CodeBadRequest, "not_regular_file")
		}
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"delete", map[string]any{"path": "a.txt/"}},
		{"stat", map[string]any{"path": "a.txt/"}},
		{"stat", map[string]any{"path": "ok-link/"}},
		{"move", map[string]any{"from": "a.txt/", "to": "moved.txt"}},
		{"move", map[string]any{"from": "a.txt", "to": "moved/"}},
	} {
		_, err := f.call(t, c.tool, c.args)
		wantRule(t, err, paddock.CodeBadRequest, "not_regular_file")
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "a.txt")); string(b) != orig {
		t.Fatalf("a.txt changed: %q", b)
	}
	for _, p := range []string{"new.txt", "moved.txt", "moved"} {
		if _, err := os.Lstat(filepath.Join(f.ws, p)); err == nil {
			t.Errorf("%s made", p)
		}
	}
	// Directories may be named with the slash.
	if s := mustCall(t, f, "stat", map[string]any{"path": "sub/"}).(*StatResult); s.Type != "dir" {
		t.Fatalf("stat sub/: %+v", s)
	}
	mustCall(t, f, "move", map[string]any{"from": "sub/deep/", "to": "deeper/"})
	mustCall(t, f, "delete", map[string]any{"path": "deeper/", "recursive": true})
	mustCall(t, f, "list", map[string]any{"path": "sub/"})
}
