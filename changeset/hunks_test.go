package changeset

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset/hunks"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestPartialAppliesAsGitWould: a change set cut down to some of its
// hunks is what git makes of the cut-down diff: git apply of Partial's
// diff onto the base gives exactly Partial's contents, whichever hunks are
// chosen, with the hunks' new ranges moved for those left out.
func TestPartialAppliesAsGitWould(t *testing.T) {
	var base, final strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&base, "line %d\n", i)
		switch i {
		case 3:
			fmt.Fprintf(&final, "line three\nand one more\n")
		case 20:
			// removed
		case 37:
			fmt.Fprintf(&final, "line %d\nline 37.5\n", i)
		default:
			fmt.Fprintf(&final, "line %d\n", i)
		}
	}
	dir := gittest.NewRepo(t, filepath.Join(t.TempDir(), "r"), map[string]string{"long.txt": base.String(), "gone.txt": "bye\n", "bin.dat": "\x00\x01"})
	os.WriteFile(filepath.Join(dir, "long.txt"), []byte(final.String()), 0o644)
	os.WriteFile(filepath.Join(dir, "new.txt"), []byte("fresh\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "bin.dat"), []byte("\x00\x02"), 0o644)
	os.Remove(filepath.Join(dir, "gone.txt"))
	gittest.Git(t, dir, "add", "-A")
	diff := gittest.Git(t, dir, "diff", "--cached", "--binary", "--no-color")
	sections, err := hunks.ParseDiff(strings.NewReader(diff))
	if err != nil {
		t.Fatal(err)
	}
	// bin.dat, gone.txt, long.txt (3 hunks), new.txt: 6 units.
	if n := hunks.Units(sections); n != 6 {
		t.Fatalf("%d units in\n%s", n, diff)
	}
	var long *hunks.Section
	for _, s := range sections {
		if s.Path == "long.txt" {
			long = s
		}
	}
	if long == nil || len(long.Hunks) != 3 {
		t.Fatalf("long.txt's hunks: %+v", long)
	}
	entry := func(path string) paddock.ChangeEntry {
		return paddock.ChangeEntry{Path: path, Op: paddock.OpModify, OldMode: "100644", NewMode: "100644", NewBlob: BlobID([]byte(final.String()))}
	}
	cs := &paddock.ChangeSet{RunID: "r-1", BaseRevision: strings.Repeat("a", 40), Entries: []paddock.ChangeEntry{entry("long.txt")}}
	for _, pick := range [][]int{{long.Hunks[0].N}, {long.Hunks[1].N}, {long.Hunks[2].N}, {long.Hunks[0].N, long.Hunks[2].N}, {long.Hunks[1].N, long.Hunks[2].N}} {
		p, blobs, err := Partial(cs, sections, pick, func(string) ([]byte, error) { return []byte(base.String()), nil },
			func(paddock.ChangeEntry) ([]byte, error) { return []byte(final.String()), nil })
		if err != nil {
			t.Fatalf("%v: %v", pick, err)
		}
		if len(p.Entries) != 1 || p.Hash == "" || Verify(p) != nil {
			t.Fatalf("%v: %+v", pick, p)
		}
		want := blobs[p.Entries[0].NewBlob]
		work := t.TempDir()
		os.WriteFile(filepath.Join(work, "long.txt"), []byte(base.String()), 0o644)
		os.WriteFile(filepath.Join(work, "p.diff"), []byte(p.Diff), 0o644)
		cmd := exec.Command("git", "apply", "--unidiff-zero", "p.diff")
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: git apply of the partial diff: %v %s\n%s", pick, err, out, p.Diff)
		}
		got, _ := os.ReadFile(filepath.Join(work, "long.txt"))
		if string(got) != string(want) || BlobID(want) != p.Entries[0].NewBlob {
			t.Fatalf("%v: git made\n%s\nPartial made\n%s", pick, got, want)
		}
	}
	// A whole-file unit is all or nothing; numbers out of range are refused.
	if _, _, err := Partial(cs, sections, []int{99}, nil, nil); !paddock.IsCode(err, paddock.CodeBadRequest) {
		t.Fatalf("hunk 99: %v", err)
	}
	if got, err := hunks.ParseUnits("3, 1-2,2"); err != nil || fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("ParseUnits: %v %v", got, err)
	}
}

// TestLineOrigins: each line of the last version is told by the version
// that wrote it, each removed base line by the version that removed it,
// through rewrites of the same file, as a hunk then sees them.
func TestLineOrigins(t *testing.T) {
	base := "a\nb\nc\nd\n"
	vs := []Version{
		{Seq: 5, Content: []byte("a\nB\nc\nd\n")},      // b → B
		{Seq: 9, Content: []byte("a\nB\nc\nd\ne\n")},   // + e
		{Seq: 12, Content: []byte("a\nB2\nc\nd\ne\n")}, // B → B2
	}
	o := LineOrigins([]byte(base), vs)
	if fmt.Sprint(o.Added) != "[0 12 0 0 9]" || fmt.Sprint(o.Removed) != "[0 5 0 0]" {
		t.Fatalf("added %v removed %v", o.Added, o.Removed)
	}
	diff := "diff --git a/f b/f\nindex 1..2 100644\n--- a/f\n+++ b/f\n@@ -1,4 +1,5 @@\n a\n-b\n+B2\n c\n d\n+e\n"
	sections, err := hunks.ParseDiff(strings.NewReader(diff))
	if err != nil {
		t.Fatal(err)
	}
	if got := HunkOrigins(sections[0], o); fmt.Sprint(got) != "map[1:[5 12 9]]" {
		t.Fatalf("hunk origins: %v", got)
	}

	// A blank line added beside another: git shows the second as added,
	// the line matching may pair it with base's; it is still the edit's.
	base = "package main\n\nimport \"fmt\"\n"
	o = LineOrigins([]byte(base), []Version{{Seq: 5, Content: []byte("package main\n\n// note\n\nimport \"fmt\"\n")}})
	diff = "diff --git a/m.go b/m.go\nindex 1..2 100644\n--- a/m.go\n+++ b/m.go\n@@ -1,3 +1,5 @@\n package main\n \n+// note\n+\n import \"fmt\"\n"
	if sections, err = hunks.ParseDiff(strings.NewReader(diff)); err != nil {
		t.Fatal(err)
	}
	if got := HunkOrigins(sections[0], o); fmt.Sprint(got) != "map[1:[5]]" {
		t.Fatalf("a blank line added beside another: %v", got)
	}
}
