package changeset_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset"
)

// hashed is a change set with every field the hash binds set, and a few it
// does not.
func hashed() *paddock.ChangeSet {
	return &paddock.ChangeSet{
		RunID:        "r-00000001",
		BaseRevision: "0123456789abcdef0123456789abcdef01234567",
		Entries: []paddock.ChangeEntry{
			{Path: "a.txt", Op: paddock.OpModify, OldMode: "100644", NewMode: "100755",
				OldBlob: "1111111111111111111111111111111111111111", NewBlob: "2222222222222222222222222222222222222222"},
			{Path: "b/c.go", Op: paddock.OpCreate, NewMode: "100644", NewBlob: "3333333333333333333333333333333333333333",
				Risks: []string{"executable"}, Size: 10},
		},
		Diff:       "diff --git a/a.txt b/a.txt\n",
		DiffSize:   27,
		Ignored:    []string{"build/"},
		ComputedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

// TestHashIsStable: the hash of a change set is fixed by its canonical
// form, which stored change sets and approvals are named by: a new
// version that hashed the same change set differently would orphan every
// submission made before it.
func TestHashIsStable(t *testing.T) {
	t.Parallel()
	// The canonical form, hashed by hand:
	//   printf 'paddock-changeset-v1\nbase 0123…4567\na.txt\0modify\0100644\0100755\01111…\02222…\n
	//           b/c.go\0create\0\0100644\0\03333…\ndiff --git a/a.txt b/a.txt\n' | sha256sum
	const want = "sha256:1d52b2215b2f29ff3d1f36596101ea5b3e81868273d52da845b93a636fac0f11"
	h, err := changeset.Hash(hashed())
	if err != nil {
		t.Fatal(err)
	}
	if h != want {
		t.Fatalf("hash %s, want %s", h, want)
	}
	again, _ := changeset.Hash(hashed())
	if again != h {
		t.Fatalf("two hashes of one change set: %s, %s", h, again)
	}
}

// TestHashBindsEveryField: a change to the base, to any field of any
// entry, to their order or to the diff makes another hash; labels, sizes,
// times and where the diff is kept do not, since they describe the change
// and are not it.
func TestHashBindsEveryField(t *testing.T) {
	t.Parallel()
	base, err := changeset.Hash(hashed())
	if err != nil {
		t.Fatal(err)
	}
	binds := map[string]func(cs *paddock.ChangeSet){
		"base":           func(cs *paddock.ChangeSet) { cs.BaseRevision = "f" + cs.BaseRevision[1:] },
		"path":           func(cs *paddock.ChangeSet) { cs.Entries[0].Path = "A.txt" },
		"op":             func(cs *paddock.ChangeSet) { cs.Entries[1].Op = paddock.OpModify },
		"old mode":       func(cs *paddock.ChangeSet) { cs.Entries[0].OldMode = "100755" },
		"new mode":       func(cs *paddock.ChangeSet) { cs.Entries[0].NewMode = "100644" },
		"old blob":       func(cs *paddock.ChangeSet) { cs.Entries[0].OldBlob = "4444444444444444444444444444444444444444" },
		"new blob":       func(cs *paddock.ChangeSet) { cs.Entries[1].NewBlob = "4444444444444444444444444444444444444444" },
		"entry order":    func(cs *paddock.ChangeSet) { cs.Entries[0], cs.Entries[1] = cs.Entries[1], cs.Entries[0] },
		"an entry fewer": func(cs *paddock.ChangeSet) { cs.Entries = cs.Entries[:1] },
		"diff":           func(cs *paddock.ChangeSet) { cs.Diff += "+one more line\n" },
		"one diff byte":  func(cs *paddock.ChangeSet) { cs.Diff = "diff --git a/a.txt b/a.tXt\n" },
	}
	for name, change := range binds {
		cs := hashed()
		change(cs)
		if h, err := changeset.Hash(cs); err != nil || h == base {
			t.Errorf("%s: the hash did not change (%v)", name, err)
		}
	}
	describes := map[string]func(cs *paddock.ChangeSet){
		"run":      func(cs *paddock.ChangeSet) { cs.RunID = "r-00000002" },
		"risks":    func(cs *paddock.ChangeSet) { cs.Entries[0].Risks = []string{"secret"} },
		"blocked":  func(cs *paddock.ChangeSet) { cs.Entries[0].Blocked = "never applied" },
		"size":     func(cs *paddock.ChangeSet) { cs.Entries[1].Size = 11 },
		"binary":   func(cs *paddock.ChangeSet) { cs.Entries[1].Binary = true },
		"ignored":  func(cs *paddock.ChangeSet) { cs.Ignored = nil },
		"time":     func(cs *paddock.ChangeSet) { cs.ComputedAt = cs.ComputedAt.Add(time.Hour) },
		"the hash": func(cs *paddock.ChangeSet) { cs.Hash = "sha256:whatever" },
	}
	for name, change := range describes {
		cs := hashed()
		change(cs)
		if h, err := changeset.Hash(cs); err != nil || h != base {
			t.Errorf("%s changed the hash (%v)", name, err)
		}
	}
}

// TestHashOfAnOmittedDiff: a diff too large to carry is hashed from its
// file, to the hash the same diff carried inline has; Verify reads it the
// same way and refuses a file that changed.
func TestHashOfAnOmittedDiff(t *testing.T) {
	t.Parallel()
	inline := hashed()
	want, err := changeset.Hash(inline)
	if err != nil {
		t.Fatal(err)
	}
	omitted := hashed()
	omitted.DiffFile = filepath.Join(t.TempDir(), "x.diff")
	if err := os.WriteFile(omitted.DiffFile, []byte(omitted.Diff), 0o600); err != nil {
		t.Fatal(err)
	}
	omitted.Diff, omitted.DiffOmitted = "", true
	if h, err := changeset.Hash(omitted); err != nil || h != want {
		t.Fatalf("omitted diff: %s, %v; inline: %s", h, err, want)
	}
	omitted.Hash = want
	if err := changeset.Verify(omitted); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(omitted.DiffFile, []byte("diff --git a/a.txt b/a.txt\n+x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := changeset.Verify(omitted); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("a changed diff file verified: %v", err)
	}
	os.Remove(omitted.DiffFile)
	if err := changeset.Verify(omitted); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("a missing diff file verified: %v", err)
	}
}

// TestParseHash: a hash is taken as people copy them (no prefix, upper
// case, spaces around) and given in its one form; anything else is a bad
// request.
func TestParseHash(t *testing.T) {
	t.Parallel()
	const hex = "1d52b2215b2f29ff3d1f36596101ea5b3e81868273d52da845b93a636fac0f11"
	for _, in := range []string{"sha256:" + hex, hex, " SHA256:1D52B2215B2F29FF3D1F36596101EA5B3E81868273D52DA845B93A636FAC0F11\n"} {
		if got, err := changeset.ParseHash(in); err != nil || got != "sha256:"+hex {
			t.Errorf("ParseHash(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "sha256:", hex[1:], hex + "0", "sha256:" + hex[:63] + "g", "sha1:" + hex,
		"sha256:sha256:" + hex, "sha256:" + hex[:32] + " " + hex[33:]} {
		if got, err := changeset.ParseHash(in); !paddock.IsCode(err, paddock.CodeBadRequest) {
			t.Errorf("ParseHash(%q) = %q, %v: want a bad request", in, got, err)
		}
	}
}
