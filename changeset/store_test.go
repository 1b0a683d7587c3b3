package changeset_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset"
)

// view is a workspace's view for freezing: a directory and its os.Root.
func view(t *testing.T, files map[string][]byte) (string, *os.Root) {
	t.Helper()
	dir := t.TempDir()
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return dir, root
}

func create(p string, content []byte) paddock.ChangeEntry {
	return paddock.ChangeEntry{Path: p, Op: paddock.OpCreate, NewMode: "100644", NewBlob: changeset.BlobID(content)}
}

// TestBlobID: the ids are git's (git hash-object).
func TestBlobID(t *testing.T) {
	t.Parallel()
	for content, id := range map[string]string{
		"":        "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
		"hello\n": "ce013625030ba8dba906f756967f9e9ca394464a",
	} {
		if got := changeset.BlobID([]byte(content)); got != id {
			t.Errorf("BlobID(%q) = %s, want %s", content, got, id)
		}
	}
}

// TestFreezeAndRead: what is frozen is the workspace's exact bytes (not
// text: any bytes, a file larger than a copy buffer, a link's target),
// read back under its blob id; deletions, submodules and blocked entries
// freeze nothing.
func TestFreezeAndRead(t *testing.T) {
	t.Parallel()
	notUTF8 := []byte("caf\xe9 \xff\xfe\x00\x01 \xc3\x28 end\r\n")
	large := bytes.Repeat([]byte("0123456789abcdef\x80"), 10000) // past the 64 KiB buffer
	dir, root := view(t, map[string][]byte{"latin1.txt": notUTF8, "sub/large.bin": large, "blocked": []byte("agent config")})
	if err := os.Symlink("sub/large.bin", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	link := create("link", []byte("sub/large.bin"))
	link.NewMode = "120000"
	blocked := create("blocked", []byte("agent config"))
	blocked.Blocked = "protected: never applied"
	cs := &paddock.ChangeSet{Entries: []paddock.ChangeEntry{
		create("latin1.txt", notUTF8),
		create("sub/large.bin", large),
		link,
		blocked,
		{Path: "gone", Op: paddock.OpDelete, OldMode: "100644", OldBlob: changeset.BlobID([]byte("x"))},
		{Path: "module", Op: paddock.OpCreate, NewMode: "160000", NewBlob: "5555555555555555555555555555555555555555"},
	}}
	s := changeset.Store{Dir: t.TempDir()}
	if err := s.FreezeBlobs(root, cs); err != nil {
		t.Fatal(err)
	}
	for content, e := range map[string]paddock.ChangeEntry{string(notUTF8): cs.Entries[0], string(large): cs.Entries[1], "sub/large.bin": link} {
		got, err := s.ReadBlob(e.NewBlob)
		if err != nil || !bytes.Equal(got, []byte(content)) {
			t.Errorf("%s: read back %d bytes (%v), want the %d frozen", e.Path, len(got), err, len(content))
		}
	}
	ents, _ := os.ReadDir(filepath.Join(s.Dir, "blobs"))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := []string{cs.Entries[0].NewBlob, cs.Entries[1].NewBlob, link.NewBlob}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("blobs kept: %v, want only %v", names, want)
	}
	if s.BlobPath(link.NewBlob) != filepath.Join(s.Dir, "blobs", link.NewBlob) {
		t.Errorf("BlobPath = %s", s.BlobPath(link.NewBlob))
	}
}

// TestFreezeRefusesWhatChanged: content that no longer hashes to the
// entry's blob id (the workspace changed since the change set was
// computed) is a conflict, and no blob is kept under that id; what is not
// a file or a link is refused without being waited on.
func TestFreezeRefusesWhatChanged(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]func(t *testing.T, dir string){
		"rewritten": func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "f"), []byte("after"), 0o644)
		},
		"removed": func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "f")) },
		"a FIFO": func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "f"))
			if err := syscall.Mkfifo(filepath.Join(dir, "f"), 0o644); err != nil {
				t.Skipf("no FIFO here: %v", err)
			}
		},
		"a directory": func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "f"))
			os.Mkdir(filepath.Join(dir, "f"), 0o755)
		},
		"a link now": func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "f"))
			os.Symlink("g", filepath.Join(dir, "f"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir, root := view(t, map[string][]byte{"f": []byte("before"), "g": []byte("unchanged")})
			cs := &paddock.ChangeSet{Entries: []paddock.ChangeEntry{create("f", []byte("before")), create("g", []byte("unchanged"))}}
			setup(t, dir)
			s := changeset.Store{Dir: t.TempDir()}
			done := make(chan error, 1)
			go func() { done <- s.FreezeBlobs(root, cs) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("freezing blocked")
			}
			if !paddock.IsCode(err, paddock.CodeConflict) || !strings.Contains(err.Error(), "f changed while the change set was being frozen") {
				t.Fatalf("%v, want a conflict naming f", err)
			}
			if _, err := os.Lstat(s.BlobPath(cs.Entries[0].NewBlob)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a blob is kept under the approved id: %v", err)
			}
			if ents, _ := os.ReadDir(filepath.Join(s.Dir, "blobs")); len(ents) != 0 {
				t.Errorf("%d files left in blobs/", len(ents))
			}
		})
	}
}

// TestReadBlobRefusesAChangedBlob: a frozen blob that no longer hashes to
// its id was not what was approved, and is refused; a missing one is an
// error of its own.
func TestReadBlobRefusesAChangedBlob(t *testing.T) {
	t.Parallel()
	_, root := view(t, map[string][]byte{"f": []byte("approved\xff")})
	cs := &paddock.ChangeSet{Entries: []paddock.ChangeEntry{create("f", []byte("approved\xff"))}}
	s := changeset.Store{Dir: t.TempDir()}
	if err := s.FreezeBlobs(root, cs); err != nil {
		t.Fatal(err)
	}
	id := cs.Entries[0].NewBlob
	if _, err := s.ReadBlob(id); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"rewritten": []byte("approvef\xff"), "truncated": []byte("approved"), "emptied": nil} {
		if err := os.WriteFile(s.BlobPath(id), content, 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := s.ReadBlob(id); !errors.Is(err, changeset.ErrBlobChanged) {
			t.Errorf("%s: read %q, %v; want ErrBlobChanged", name, b, err)
		}
	}
	if _, err := s.ReadBlob(changeset.BlobID([]byte("never frozen"))); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, changeset.ErrBlobChanged) {
		t.Errorf("a missing blob: %v", err)
	}
}

// TestComputedDiffsArePruned: a run keeps its last KeptDiffs computed
// diffs, the one just kept among them whatever its time, and removes what
// a crash left mid-computation once it is an hour old.
func TestComputedDiffsArePruned(t *testing.T) {
	t.Parallel()
	s := changeset.Store{Dir: t.TempDir()}
	diffs := filepath.Join(s.Dir, "diffs")
	start := time.Now().Add(-24 * time.Hour)
	compute := func(i int, at time.Time) *paddock.ChangeSet {
		t.Helper()
		f, err := s.CreateDiff()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(filepath.Base(f.Name()), "computing-") || filepath.Dir(f.Name()) != diffs {
			t.Fatalf("computing in %s", f.Name())
		}
		fmt.Fprintf(f, "diff %d\n", i)
		f.Close()
		os.Chtimes(f.Name(), at, at)
		return &paddock.ChangeSet{DiffFile: f.Name(), Hash: fmt.Sprintf("sha256:%064d", i)}
	}
	var hashes []string
	for i := range 7 {
		at := start.Add(time.Duration(i) * time.Hour)
		if i == 6 {
			// The one kept last is kept, though it is the oldest of all;
			// what a crash left an hour ago goes, what is under way stays.
			at = start.Add(-time.Hour)
			stale := compute(-1, time.Now().Add(-61*time.Minute))
			fresh := compute(-2, time.Now().Add(-59*time.Minute))
			defer func() {
				if _, err := os.Stat(stale.DiffFile); err == nil {
					t.Error("a stale computation is kept")
				}
				if _, err := os.Stat(fresh.DiffFile); err != nil {
					t.Errorf("a computation under way was removed: %v", err)
				}
			}()
		}
		cs := compute(i, at)
		if err := s.KeepDiff(cs); err != nil {
			t.Fatal(err)
		}
		if cs.DiffFile != filepath.Join(diffs, strings.TrimPrefix(cs.Hash, "sha256:")+".diff") {
			t.Fatalf("kept as %s", cs.DiffFile)
		}
		hashes = append(hashes, cs.Hash)
	}
	var kept []int
	for i, h := range hashes {
		d, err := s.ComputedDiff(h)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(d)
		d.Close()
		kept = append(kept, i)
		if string(b) != fmt.Sprintf("diff %d\n", i) {
			t.Errorf("diff %d reads %q", i, b)
		}
	}
	// The one kept last, and the newest KeptDiffs-1 others.
	if want := []int{3, 4, 5, 6}; !slices.Equal(kept, want) || len(want) != changeset.KeptDiffs {
		t.Errorf("kept %v, want %v", kept, want)
	}
}

// TestDiffKeptAgain: the same change set computed again is kept under
// its hash in place of what was kept there, whatever that was (a whole
// diff, one a crash left short or with other bytes, a link), and is the
// newest of the kept; what was kept before is left to the caller.
func TestDiffKeptAgain(t *testing.T) {
	t.Parallel()
	for _, before := range []string{"whole", "short", "other bytes", "a link", "none"} {
		s := changeset.Store{Dir: t.TempDir()}
		// A diff under way is not pruned: the one computed again is, now.
		start := time.Now().Add(-time.Duration(changeset.KeptDiffs) * time.Hour)
		compute := func(body string, hash int, at time.Time) *paddock.ChangeSet {
			t.Helper()
			f, err := s.CreateDiff()
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(f, body)
			f.Close()
			os.Chtimes(f.Name(), at, at)
			return &paddock.ChangeSet{DiffFile: f.Name(), Hash: fmt.Sprintf("sha256:%064d", hash)}
		}
		first := compute("diff 0\n", 0, start)
		if err := s.KeepDiff(first); err != nil {
			t.Fatal(err)
		}
		switch before {
		case "short":
			os.Truncate(first.DiffFile, 0)
		case "other bytes":
			os.WriteFile(first.DiffFile, []byte("diff X\n"), 0o600)
		case "a link":
			elsewhere := filepath.Join(t.TempDir(), "elsewhere")
			os.WriteFile(elsewhere, []byte("diff Y\n"), 0o600)
			os.Remove(first.DiffFile)
			if err := os.Symlink(elsewhere, first.DiffFile); err != nil {
				t.Fatal(err)
			}
		case "none":
			os.Remove(first.DiffFile)
		}
		for i := 1; i < changeset.KeptDiffs; i++ {
			if err := s.KeepDiff(compute(fmt.Sprintf("diff %d\n", i), i, start.Add(time.Duration(i)*time.Hour))); err != nil {
				t.Fatal(err)
			}
		}
		again := compute("diff 0\n", 0, start.Add(time.Duration(changeset.KeptDiffs)*time.Hour))
		computed := again.DiffFile
		if err := s.KeepDiff(again); err != nil {
			t.Fatal(err)
		}
		if again.DiffFile != first.DiffFile {
			t.Errorf("%s: computed again, kept as %s, want %s", before, again.DiffFile, first.DiffFile)
		}
		if fi, err := os.Lstat(again.DiffFile); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: kept %v, %v; want a file", before, fi, err)
		}
		if b, err := os.ReadFile(again.DiffFile); err != nil || string(b) != "diff 0\n" {
			t.Errorf("%s: kept %q, %v", before, b, err)
		}
		os.Remove(computed) // as the caller does, whatever is left there
		// Kept as the newest: the next one prunes diff 1, not diff 0.
		if err := s.KeepDiff(compute("diff 9\n", 9, start.Add(time.Duration(changeset.KeptDiffs+1)*time.Hour))); err != nil {
			t.Fatal(err)
		}
		for hash, want := range map[int]bool{0: true, 1: false, 9: true} {
			d, err := s.ComputedDiff(fmt.Sprintf("sha256:%064d", hash))
			if (err == nil) != want {
				t.Errorf("%s: diff %d kept: %v, want %v", before, hash, err == nil, want)
			}
			if err == nil {
				d.Close()
			}
		}
		if b, err := os.ReadFile(filepath.Join(s.Dir, "diffs", fmt.Sprintf("%064d.diff", 0))); err != nil || string(b) != "diff 0\n" {
			t.Errorf("%s: after pruning, kept %q, %v", before, b, err)
		}
	}
}

// TestFrozenRoundTrip: a submitted change set is kept under its hash with
// its diff beside it (a second name for the computed diff, kept once),
// and loads back to what verifies against its hash, an omitted diff
// included.
func TestFrozenRoundTrip(t *testing.T) {
	t.Parallel()
	for _, omitted := range []bool{false, true} {
		s := changeset.Store{Dir: t.TempDir()}
		f, err := s.CreateDiff()
		if err != nil {
			t.Fatal(err)
		}
		diff := "diff --git a/a.txt b/a.txt\n+caf\xe9\n"
		io.WriteString(f, diff)
		f.Close()
		cs := hashed()
		cs.Diff, cs.DiffFile, cs.DiffSize = diff, f.Name(), int64(len(diff))
		if omitted {
			cs.Diff, cs.DiffOmitted = "", true
		}
		if cs.Hash, err = changeset.Hash(cs); err != nil {
			t.Fatal(err)
		}
		if err := s.KeepDiff(cs); err != nil {
			t.Fatal(err)
		}
		if err := s.KeepFrozenDiff(cs); err != nil {
			t.Fatal(err)
		}
		if err := s.KeepFrozenDiff(cs); err != nil {
			t.Fatalf("kept twice: %v", err)
		}
		if err := s.Save(cs); err != nil {
			t.Fatal(err)
		}
		// The computed diffs go on being pruned: the frozen one stays.
		os.Remove(cs.DiffFile)
		got, err := s.Frozen(cs.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if err := changeset.Verify(got); err != nil {
			t.Errorf("omitted %v: %v", omitted, err)
		}
		d, err := changeset.OpenDiff(got)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(d)
		d.Close()
		if string(b) != diff || got.RunID != cs.RunID || len(got.Entries) != len(cs.Entries) || !got.ComputedAt.Equal(cs.ComputedAt) {
			t.Errorf("omitted %v: loaded %+v with diff %q", omitted, got, b)
		}
		if _, err := s.Frozen("sha256:" + strings.Repeat("0", 64)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a hash never frozen: %v", err)
		}
	}
}
