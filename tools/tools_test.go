package tools

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
)

func mustCall(t *testing.T, f *fixture, tool string, args map[string]any) any {
	t.Helper()
	res, err := f.call(t, tool, args)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return res
}

func wantRule(t *testing.T, err error, code paddock.Code, rule paddock.Rule) {
	t.Helper()
	pe, ok := err.(*paddock.Error)
	if !ok || pe.Code != code || (rule != "" && pe.Rule != rule) {
		t.Fatalf("error = %v, want %s/%s", err, code, rule)
	}
}

func TestRead(t *testing.T) {
	f := newFixture(t)
	r := mustCall(t, f, "read", map[string]any{"path": "a.txt", "offset": 2, "limit": 1}).(*ReadResult)
	if r.Content != "beta\n" || r.StartLine != 2 || r.EndLine != 2 || r.Truncated || r.Binary {
		t.Fatalf("lines: %+v", r)
	}
	r = mustCall(t, f, "read", map[string]any{"path": "a.txt", "max_bytes": 8}).(*ReadResult)
	if r.Content != "alpha\n" || !r.Truncated || !strings.Contains(r.Note, "continue with offset 2") {
		t.Fatalf("truncated: %+v", r)
	}
	r = mustCall(t, f, "read", map[string]any{"path": "a.txt", "byte_offset": 6, "byte_limit": 4}).(*ReadResult)
	if r.Content != "beta" || *r.ByteOffset != 6 || *r.ByteEnd != 10 || r.Truncated {
		t.Fatalf("bytes: %+v", r)
	}
	os.WriteFile(filepath.Join(f.ws, "bin"), []byte("\x7fELF\x00\x01\x02"), 0o644)
	r = mustCall(t, f, "read", map[string]any{"path": "bin"}).(*ReadResult)
	if !r.Binary || r.Encoding != "base64" || r.Content != "f0VMRgABAg==" {
		t.Fatalf("binary: %+v", r)
	}
	_, err := f.call(t, "read", map[string]any{"path": "bin", "offset": 2})
	wantRule(t, err, paddock.CodeBadRequest, "binary")
	_, err = f.call(t, "read", map[string]any{"path": "nope"})
	wantRule(t, err, paddock.CodeNotFound, "not_found")
	_, err = f.call(t, "read", map[string]any{"path": "sub"})
	wantRule(t, err, paddock.CodeBadRequest, "not_regular_file")
	_, err = f.call(t, "read", map[string]any{"path": "a.txt", "bogus": 1})
	wantRule(t, err, paddock.CodeBadRequest, "")
	// Inside links are followed.
	r = mustCall(t, f, "read", map[string]any{"path": "ok-link"}).(*ReadResult)
	if r.Content != "inside b\n" {
		t.Fatalf("through an inside link: %+v", r)
	}
	// An absolute path inside the workspace is accepted.
	r = mustCall(t, f, "read", map[string]any{"path": f.ws + "/sub/b.txt"}).(*ReadResult)
	if r.Content != "inside b\n" {
		t.Fatalf("absolute inside: %+v", r)
	}
}

func TestWrite(t *testing.T) {
	f := newFixture(t)
	w := mustCall(t, f, "write", map[string]any{"path": "new/dir/x.txt", "content": "hello"}).(*WriteResult)
	if !w.Created || w.Bytes != 5 {
		t.Fatalf("create: %+v", w)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "new/dir/x.txt")); string(b) != "hello" {
		t.Fatal("content")
	}
	exe := filepath.Join(f.ws, "run.sh")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	mustCall(t, f, "write", map[string]any{"path": "run.sh", "content": "#!/bin/sh\necho\n"})
	if fi, _ := os.Stat(exe); fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode not kept: %v", fi.Mode())
	}
	mustCall(t, f, "write", map[string]any{"path": "run.sh", "content": "x", "mode": "0600"})
	if fi, _ := os.Stat(exe); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode not set: %v", fi.Mode())
	}
	_, err := f.call(t, "write", map[string]any{"path": "x", "content": "x", "mode": "4755"})
	wantRule(t, err, paddock.CodeBadRequest, "")
	// A link at the target is replaced, never written through.
	mustCall(t, f, "write", map[string]any{"path": "ok-link", "content": "replaced"})
	if b, _ := os.ReadFile(filepath.Join(f.ws, "sub/b.txt")); string(b) != "inside b\n" {
		t.Fatal("wrote through a link")
	}
	if fi, _ := os.Lstat(filepath.Join(f.ws, "ok-link")); !fi.Mode().IsRegular() {
		t.Fatal("link not replaced")
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(f.ws)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".paddock-tmp") {
			t.Fatalf("left %s", e.Name())
		}
	}
	_, err = f.call(t, "write", map[string]any{"path": "sub", "content": "x"})
	wantRule(t, err, paddock.CodeBadRequest, "not_regular_file")
	_, err = f.call(t, "write", map[string]any{"path": "y"})
	wantRule(t, err, paddock.CodeBadRequest, "")
}

func TestEdit(t *testing.T) {
	f := newFixture(t)
	read := func() string { b, _ := os.ReadFile(filepath.Join(f.ws, "a.txt")); return string(b) }
	w := mustCall(t, f, "edit", map[string]any{"path": "a.txt", "old_string": "beta", "new_string": "BETA"}).(*WriteResult)
	if w.Replacements != 1 || read() != "alpha\nBETA\ngamma\n" {
		t.Fatalf("edit: %+v %q", w, read())
	}
	_, err := f.call(t, "edit", map[string]any{"path": "a.txt", "old_string": "nothing", "new_string": "x"})
	wantRule(t, err, paddock.CodeBadRequest, "no_match")
	os.WriteFile(filepath.Join(f.ws, "a.txt"), []byte("x x x\n"), 0o644)
	_, err = f.call(t, "edit", map[string]any{"path": "a.txt", "old_string": "x", "new_string": "y"})
	wantRule(t, err, paddock.CodeBadRequest, "ambiguous")
	if read() != "x x x\n" {
		t.Fatal("ambiguous edit changed the file")
	}
	w = mustCall(t, f, "edit", map[string]any{"path": "a.txt", "old_string": "x", "new_string": "y", "replace_all": true}).(*WriteResult)
	if w.Replacements != 3 || read() != "y y y\n" {
		t.Fatalf("replace_all: %q", read())
	}
	// Several edits: all or none.
	_, err = f.call(t, "edit", map[string]any{"path": "a.txt", "edits": []map[string]any{
		{"old_string": "y y", "new_string": "z"}, {"old_string": "missing", "new_string": "q"}}})
	wantRule(t, err, paddock.CodeBadRequest, "no_match")
	if read() != "y y y\n" {
		t.Fatal("a failed multi-edit changed the file")
	}
	mustCall(t, f, "edit", map[string]any{"path": "a.txt", "edits": []map[string]any{
		{"old_string": "y y y", "new_string": "a b"}, {"old_string": "b", "new_string": "c"}}})
	if read() != "a c\n" {
		t.Fatalf("multi-edit: %q", read())
	}
}

func TestMoveDeleteStat(t *testing.T) {
	f := newFixture(t)
	_, err := f.call(t, "move", map[string]any{"from": "a.txt", "to": "sub/b.txt"})
	wantRule(t, err, paddock.CodeConflict, "exists")
	mustCall(t, f, "move", map[string]any{"from": "a.txt", "to": "moved/a.txt"})
	if _, err := os.Stat(filepath.Join(f.ws, "moved/a.txt")); err != nil {
		t.Fatal(err)
	}
	_, err = f.call(t, "delete", map[string]any{"path": "sub"})
	wantRule(t, err, paddock.CodeConflict, "not_empty")
	mustCall(t, f, "delete", map[string]any{"path": "sub", "recursive": true})
	if _, err := os.Stat(filepath.Join(f.ws, "sub")); !os.IsNotExist(err) {
		t.Fatal("not deleted")
	}
	st := mustCall(t, f, "stat", map[string]any{"path": "link-file"}).(*StatResult)
	if st.Type != "symlink" || st.Target != "../outside/secret.txt" {
		t.Fatalf("stat link: %+v", st)
	}
	_, err = f.call(t, "delete", map[string]any{"path": "."})
	wantRule(t, err, paddock.CodeForbidden, "protected_path")
}

func TestIgnoreAndBinary(t *testing.T) {
	f := newFixture(t)
	os.WriteFile(filepath.Join(f.ws, ".gitignore"), []byte("build/\n*.log\n!keep.log\n"), 0o644)
	os.MkdirAll(filepath.Join(f.ws, "build"), 0o755)
	os.WriteFile(filepath.Join(f.ws, "build/out.txt"), []byte("needle\n"), 0o644)
	os.WriteFile(filepath.Join(f.ws, "x.log"), []byte("needle\n"), 0o644)
	os.WriteFile(filepath.Join(f.ws, "keep.log"), []byte("needle\n"), 0o644)
	os.WriteFile(filepath.Join(f.ws, "sub/.gitignore"), []byte("deep/\n"), 0o644)
	os.WriteFile(filepath.Join(f.ws, "sub/deep/n.txt"), []byte("needle\n"), 0o644)
	os.WriteFile(filepath.Join(f.ws, "blob.bin"), []byte("needle\x00\x01"), 0o644)
	os.MkdirAll(filepath.Join(f.ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(f.ws, ".git/needle"), []byte("needle\n"), 0o644)
	paths := func(res any) string {
		var out []string
		for _, m := range res.(*GrepResult).Matches {
			out = append(out, m.Path)
		}
		return strings.Join(out, ",")
	}
	if got := paths(mustCall(t, f, "grep", map[string]any{"pattern": "needle", "literal": true})); got != "keep.log" {
		t.Fatalf("grep honouring .gitignore: %s", got)
	}
	if got := paths(mustCall(t, f, "grep", map[string]any{"pattern": "needle", "include_ignored": true})); got != "build/out.txt,keep.log,sub/deep/n.txt,x.log" {
		t.Fatalf("grep with ignored: %s", got)
	}
	g := mustCall(t, f, "glob", map[string]any{"pattern": "**/*.txt"}).(*GlobResult)
	if strings.Join(g.Matches, ",") != "a.txt,sub/b.txt" {
		t.Fatalf("glob: %v", g.Matches)
	}
	g = mustCall(t, f, "glob", map[string]any{"pattern": "**/*.txt", "limit": 1}).(*GlobResult)
	if len(g.Matches) != 1 || !g.Truncated {
		t.Fatalf("glob limit: %+v", g)
	}
	gr := mustCall(t, f, "grep", map[string]any{"pattern": "^bet", "path": ".", "context": 1}).(*GrepResult)
	if len(gr.Matches) != 1 || gr.Matches[0].Line != 2 || gr.Matches[0].Before[0] != "alpha" || gr.Matches[0].After[0] != "gamma" {
		t.Fatalf("context: %+v", gr.Matches)
	}
	gr = mustCall(t, f, "grep", map[string]any{"pattern": "a", "max_results": 2, "glob": "*.txt"}).(*GrepResult)
	if len(gr.Matches) != 2 || !gr.Truncated {
		t.Fatalf("max_results: %+v", gr)
	}
	_, err := f.call(t, "grep", map[string]any{"pattern": "("})
	wantRule(t, err, paddock.CodeBadRequest, "")
	l := mustCall(t, f, "list", map[string]any{"depth": 1}).(*ListResult)
	for _, e := range l.Entries {
		if e.Path == "build" || e.Path == ".git" || strings.Contains(e.Path, "/") {
			t.Fatalf("list depth 1 shows %s", e.Path)
		}
	}
}

func TestOfferedAndEventArgs(t *testing.T) {
	names := func(ts []*Tool) string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(Offered(paddock.AccessWrite)); got != "delete,edit,glob,grep,list,move,read,stat,write" {
		t.Fatalf("write: %s", got)
	}
	if got := names(Offered(paddock.AccessRead)); got != "glob,grep,list,read,stat" {
		t.Fatalf("read: %s", got)
	}
	if got := Offered(paddock.AccessNone); len(got) != 0 {
		t.Fatalf("none: %v", got)
	}
	_, err := Lookup(paddock.AccessRead, "write")
	wantRule(t, err, paddock.CodeForbidden, "read_only")
	_, err = Lookup(paddock.AccessNone, "read")
	wantRule(t, err, paddock.CodeForbidden, "access_none")
	for _, tl := range Offered(paddock.AccessWrite) {
		var s map[string]any
		if json.Unmarshal(tl.Schema, &s) != nil || s["type"] != "object" || tl.Description == "" {
			t.Errorf("%s: bad schema or description", tl.Name)
		}
	}
	f := newFixture(t)
	_, o, _ := registry["write"].Call(t.Context(), f.root, json.RawMessage(`{"path":"p","content":"TOP SECRET BODY"}`))
	if bytes.Contains(o.Args, []byte("SECRET")) || !bytes.Contains(o.Args, []byte("<15 bytes>")) || !o.OK || o.Bytes != 15 {
		t.Fatalf("outcome: %+v %s", o, o.Args)
	}
	_, o, _ = registry["edit"].Call(t.Context(), f.root, json.RawMessage(`{"path":"p","edits":[{"old_string":"TOP SECRET","new_string":"HIDDEN"}]}`))
	if bytes.Contains(o.Args, []byte("SECRET")) || bytes.Contains(o.Args, []byte("HIDDEN")) {
		t.Fatalf("edit outcome leaks contents: %s", o.Args)
	}
}

func TestInbox(t *testing.T) {
	f := newFixture(t)
	// The host writes the inbox, past the agents' policy (which protects .paddock).
	host, err := confine.Open(f.ws, &confine.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	f.root = host
	lim := InboxLimits{MaxFile: 1000, MaxTotal: 1500, Allow: DefaultInboxLimits.Allow}
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0}, 100)...)
	res, err := Deliver(f.root, "shot.png", bytes.NewReader(png), lim)
	if err != nil || res.MIME != "image/png" || res.Path != ".paddock/inbox/shot.png" {
		t.Fatalf("png: %+v %v", res, err)
	}
	res, _ = Deliver(f.root, "shot.png", bytes.NewReader(png), lim)
	if res.Path != ".paddock/inbox/shot-1.png" {
		t.Fatalf("second: %+v", res)
	}
	// The type comes from the content, not the name.
	_, err = Deliver(f.root, "notes.txt", bytes.NewReader([]byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00")), lim)
	wantRule(t, err, paddock.CodeBadRequest, "")
	_, err = Deliver(f.root, "big.txt", bytes.NewReader(bytes.Repeat([]byte("a"), 1001)), lim)
	wantRule(t, err, paddock.CodeTooLarge, "")
	if _, err = Deliver(f.root, "fill.txt", bytes.NewReader(bytes.Repeat([]byte("b"), 900)), lim); err != nil {
		t.Fatal(err)
	}
	_, err = Deliver(f.root, "over.txt", bytes.NewReader(bytes.Repeat([]byte("c"), 900)), lim)
	wantRule(t, err, paddock.CodeTooLarge, "") // the quota
	for _, bad := range []string{"", ".hidden", "..", ".git"} {
		if _, err := Deliver(f.root, bad, bytes.NewReader([]byte("x")), lim); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	// A path in the name keeps only its base: nothing lands elsewhere.
	lim.MaxTotal = 1 << 20
	res, err = Deliver(f.root, "../../etc/passwd.txt", bytes.NewReader([]byte("hello")), lim)
	if err != nil || res.Path != ".paddock/inbox/passwd.txt" {
		t.Fatalf("path in name: %+v %v", res, err)
	}
	entries, _ := os.ReadDir(filepath.Join(f.ws, ".paddock/inbox"))
	if len(entries) != 4 {
		t.Fatalf("inbox holds %d files", len(entries))
	}
}
