package lifecycle_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestOverlayChangeSetOfManyPathsIsGits: an overlay run whose commands
// change more paths than a diff limits by pathspec (a whole index of base
// is diffed then) gives the change set git gives for the same commands in
// a clone, entry for entry, and applied to a branch the tree git would
// commit; computed again it is the same, and a change that keeps a file's
// size is seen (the stat cache). The same commands: files edited, deleted,
// created in a new directory, made executable, a file made a directory, a
// directory made a file, a link, a file rewritten as it was.
func TestOverlayChangeSetOfManyPathsIsGits(t *testing.T) {
	e := newEnv(t)
	files := map[string]string{}
	for i := range 700 {
		files[fmt.Sprintf("src/m%02d/f%03d.txt", i/20, i)] = fmt.Sprintf("file %d\n", i)
	}
	files["src/gone/a.txt"], files["src/gone/b.txt"] = "a\n", "b\n"
	gittest.Commit(t, e.repo, "many files", files)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	r := e.create(t, paddock.KindOverlay, "")
	var script strings.Builder
	for i := range 650 {
		fmt.Fprintf(&script, "printf 'edited\\n' >> src/m%02d/f%03d.txt\n", i/20, i)
	}
	script.WriteString(`rm src/m34/f690.txt src/m34/f691.txt
mkdir -p src/new/deep && printf 'new\n' > src/new/deep/n.txt && printf 'top\n' > src/top.txt
chmod +x src/m34/f692.txt
rm src/m34/f693.txt && mkdir src/m34/f693.txt && printf 'was a file\n' > src/m34/f693.txt/in.txt
rm -r src/gone && printf 'was a directory\n' > src/gone
ln -s m34/f694.txt src/link
cp src/m34/f695.txt src/copy && mv src/copy src/m34/f695.txt
`)
	sh(t, e.m, r.ID, script.String())
	peer := filepath.Join(t.TempDir(), "peer")
	gittest.Git(t, "", "clone", "-q", "--shared", e.repo, peer)
	cmd := exec.Command("bash", "-ec", script.String())
	cmd.Dir = peer
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the same commands in git's clone: %v\n%s", err, out)
	}
	gittest.Git(t, peer, "add", "-A")
	raw := gittest.Git(t, peer, "diff", "--cached", "--raw", "--no-renames", "--no-abbrev", "HEAD")
	want := map[string]string{} // path → "old-mode new-mode new-blob"
	for _, line := range strings.Split(raw, "\n") {
		meta, p, _ := strings.Cut(line, "\t")
		f := strings.Fields(strings.TrimPrefix(meta, ":"))
		switch f[4] {
		case "A":
			want[p] = " " + f[1] + " " + f[3]
		case "D":
			want[p] = f[0] + "  "
		default:
			want[p] = f[0] + " " + f[1] + " " + f[3]
		}
	}
	// Files are kept in the stat cache once more than a second older
	// than the change set that read them: the second one below reads
	// them from it.
	time.Sleep(1100 * time.Millisecond)
	cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 600 || len(cs.Entries) != len(want) {
		t.Fatalf("%d entries, git has %d", len(cs.Entries), len(want))
	}
	for _, en := range cs.Entries {
		if got := en.OldMode + " " + en.NewMode + " " + en.NewBlob; got != want[en.Path] {
			t.Errorf("%s: %q, git has %q", en.Path, got, want[en.Path])
		}
	}
	again, err := e.m.Changes.ChangeSet(ctx, r.ID)
	if err != nil || again.Hash != cs.Hash {
		t.Fatalf("computed again: %v, %s then %s", err, cs.Hash, again.Hash)
	}

	// A change that keeps the size, after a change set cached the file.
	sh(t, e.m, r.ID, "printf 'file 1\\nEDITED\\n' > src/m00/f001.txt")
	must(t, os.WriteFile(filepath.Join(peer, "src/m00/f001.txt"), []byte("file 1\nEDITED\n"), 0o644))
	gittest.Git(t, peer, "add", "-A")
	blob := gittest.Git(t, peer, "rev-parse", ":src/m00/f001.txt")
	submitted, err := e.m.Changes.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range submitted.Entries {
		if en.Path == "src/m00/f001.txt" && en.NewBlob != blob {
			t.Fatalf("the change that kept the size is not seen: %s, git has %s", en.NewBlob, blob)
		}
	}
	if _, err := e.m.Changes.Approve(ctx, r.ID, submitted.Hash, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Changes.Apply(ctx, r.ID, "many-paths", gitx.Identity{Name: "A", Email: "a@example.com"}); err != nil {
		t.Fatal(err)
	}
	if got, want := gittest.Git(t, e.repo, "rev-parse", "many-paths^{tree}"), gittest.Git(t, peer, "write-tree"); got != want {
		t.Fatalf("the applied branch's tree is %s, git's of the same commands %s", got, want)
	}
}
