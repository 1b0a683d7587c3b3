package changeset

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/internal/durable"
)

// Store keeps a run's change sets in a directory of their own (the run's
// artifacts):
//
//	diffs/computing-*      a diff being computed
//	diffs/HEX.diff         the diffs computed lately (KeptDiffs of them)
//	changeset-HEX.json     a submitted change set, frozen
//	changeset-HEX.diff     its diff
//	blobs/ID               the new content of its entries, by git blob id
//
// HEX is a change set's hash without its sha256: prefix. A file named by a
// hash holds what hashes to it. Every diff and change set here is masked
// (see Build); the blobs hold the agent's bytes, as the workspace does.
type Store struct{ Dir string }

// KeptDiffs is how many computed diffs of a run are kept besides the
// submitted one: enough for a reviewer to fetch the one just shown while
// the run goes on changing.
const KeptDiffs = 4

func (s Store) diffsDir() string { return filepath.Join(s.Dir, "diffs") }

// CreateDiff makes the file a diff is computed into, for Build: a change
// set is never held in memory whole, whatever its size. KeepDiff keeps it
// under its change set's hash; the caller removes it when it is not kept.
func (s Store) CreateDiff() (*os.File, error) {
	if err := os.MkdirAll(s.diffsDir(), 0o700); err != nil {
		return nil, fmt.Errorf("changeset: %w", err)
	}
	f, err := os.CreateTemp(s.diffsDir(), "computing-*")
	if err != nil {
		return nil, fmt.Errorf("changeset: %w", err)
	}
	return f, nil
}

// KeepDiff keeps cs's computed diff under its hash, for a reviewer's
// fetch of it (ComputedDiff) and for a submission of it, and points
// cs.DiffFile there. It prunes the older ones. What was kept under that
// hash before (the same change set computed again) may be left in the
// computed diff's place, which the caller removes.
func (s Store) KeepDiff(cs *paddock.ChangeSet) error {
	kept := filepath.Join(s.diffsDir(), strings.TrimPrefix(cs.Hash, "sha256:")+".diff")
	if err := replaceKept(cs.DiffFile, kept); err != nil {
		return fmt.Errorf("changeset: %w", err)
	}
	cs.DiffFile = kept
	pruneDiffs(s.diffsDir(), kept)
	return nil
}

// ComputedDiff opens the computed diff of the change set with this hash,
// if it is still kept (see KeptDiffs).
func (s Store) ComputedDiff(hash string) (*os.File, error) {
	return os.Open(filepath.Join(s.diffsDir(), strings.TrimPrefix(hash, "sha256:")+".diff"))
}

// pruneDiffs removes all but the newest computed diffs in dir (keep among
// them), and what a crash left mid-computation.
func pruneDiffs(dir, keep string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type diff struct {
		path string
		mod  time.Time
	}
	var all []diff
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), "computing-") {
			if time.Since(fi.ModTime()) > time.Hour {
				os.Remove(p)
			}
			continue
		}
		if p != keep {
			all = append(all, diff{p, fi.ModTime()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mod.After(all[j].mod) })
	for i := KeptDiffs - 1; i < len(all); i++ {
		os.Remove(all[i].path)
	}
}

// ParseHash refuses what cannot be a change set's hash, and gives it the
// sha256: prefix when it has none.
// A hash may come without its prefix or in upper case, as people copy
// them; it is compared in its one canonical form.
func ParseHash(hash string) (string, error) {
	hex := strings.ToLower(strings.TrimSpace(hash))
	hex = strings.TrimPrefix(hex, "sha256:")
	if len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", paddock.Errorf(paddock.CodeBadRequest, "hash %q: want sha256: and 64 hex digits", hash)
	}
	return "sha256:" + hex, nil
}

func artifactName(hash string) string {
	return "changeset-" + strings.TrimPrefix(hash, "sha256:") + ".json"
}

// diffArtifactName is the file beside a frozen change set that holds its diff.
func diffArtifactName(hash string) string {
	return "changeset-" + strings.TrimPrefix(hash, "sha256:") + ".diff"
}

// KeepFrozenDiff keeps cs's diff beside the frozen change set, the same
// file under a second name: a large one is not copied. Not synced:
// FreezeBlobs makes it durable with the blobs.
func (s Store) KeepFrozenDiff(cs *paddock.ChangeSet) error {
	if err := keepFile(cs.DiffFile, filepath.Join(s.Dir, diffArtifactName(cs.Hash))); err != nil {
		return fmt.Errorf("changeset: %w", err)
	}
	return nil
}

// Save writes the frozen change set cs, durably, under its hash. Its
// diff (KeepFrozenDiff) and its blobs (FreezeBlobs) are kept first.
func (s Store) Save(cs *paddock.ChangeSet) error {
	b, err := Marshal(cs)
	if err != nil {
		return fmt.Errorf("changeset: encoding: %w", err)
	}
	if err := durable.WriteFile(filepath.Join(s.Dir, artifactName(cs.Hash)), b); err != nil {
		return fmt.Errorf("changeset: %w", err)
	}
	return nil
}

// Frozen loads the change set submitted under hash, with its diff file.
func (s Store) Frozen(hash string) (*paddock.ChangeSet, error) {
	b, err := os.ReadFile(filepath.Join(s.Dir, artifactName(hash)))
	if err != nil {
		return nil, err
	}
	var cs paddock.ChangeSet
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, err
	}
	cs.DiffFile = filepath.Join(s.Dir, diffArtifactName(hash))
	return &cs, nil
}

// keepFile gives the file at src a second name, dst: a hard link where it
// can (no copy of a large diff), else a copy. Not synced: the caller makes
// it durable with the rest of a submission (FreezeBlobs' syncfs).
func keepFile(src, dst string) error {
	if fileExists(dst) {
		return nil // kept already: its name is its content's hash
	}
	if os.Link(src, dst) == nil {
		return nil
	}
	return durable.WriteFileFrom(dst, false, func(w io.Writer) error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
