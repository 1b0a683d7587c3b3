package paddock

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// ChangeOp is what a change set entry does to a path.
type ChangeOp string

const (
	OpCreate ChangeOp = "create"
	OpModify ChangeOp = "modify"
	OpDelete ChangeOp = "delete"
)

// ChangeEntry is one path a run changed against its base.
type ChangeEntry struct {
	Path    string   `json:"path"`
	Op      ChangeOp `json:"op"`
	OldMode string   `json:"old_mode,omitempty"` // git modes: 100644, 100755, 120000 (symlink)
	NewMode string   `json:"new_mode,omitempty"`
	OldBlob string   `json:"old_blob,omitempty"` // git blob ids
	NewBlob string   `json:"new_blob,omitempty"`
	Binary  bool     `json:"binary"`
	Size    int64    `json:"size"` // of the new content; 0 for a deletion
	// Risks label what a reviewer should look at twice.
	Risks []string `json:"risks,omitempty"`
	// Notes say, by label, why the entry has a label when the label alone
	// does not: which other path a name collides with, and how.
	Notes map[string]string `json:"notes,omitempty"`
	// Blocked says why this entry is never applied, approved or not.
	Blocked string `json:"blocked,omitempty"`
}

// ChangeSet is a run's effects against its base revision: the entries, a
// unified diff that `git apply` accepts, and a hash over a canonical form
// that approvals bind to.
type ChangeSet struct {
	RunID        string        `json:"run_id"`
	BaseRevision string        `json:"base_revision"`
	Entries      []ChangeEntry `json:"entries"`
	// Diff is the unified diff, when it is at most InlineDiff bytes. A
	// larger one is left out (DiffOmitted) and streamed on its own from
	// GET /v1/runs/{id}/changeset/diff?hash=HASH.
	Diff        string `json:"diff"`
	DiffSize    int64  `json:"diff_size"`
	DiffOmitted bool   `json:"diff_omitted,omitempty"`
	// DiffFile is where the daemon keeps the whole diff; never sent.
	DiffFile string `json:"-"`
	Hash     string `json:"hash"`
	// Ignored lists files the base's ignore rules leave out (build output,
	// dependencies); they are not in the entries.
	Ignored    []string  `json:"ignored,omitempty"`
	ComputedAt time.Time `json:"computed_at"`
}

// InlineDiff is the largest diff a change set answer carries in full.
const InlineDiff = 4 << 20

// ChangeSetHashHeader names the change set whose diff an answer of
// GET /v1/runs/{id}/changeset/diff holds.
const ChangeSetHashHeader = "Paddock-Changeset-Hash"

// Submission is a frozen change set and what was decided about it.
type Submission struct {
	RunID       string    `json:"run_id"`
	Hash        string    `json:"hash"`
	SubmittedAt time.Time `json:"submitted_at"`
	// ApprovedBy and ApprovedAt are set once the project's approval
	// policy is met: who approved (the approvers' names, joined), and when.
	ApprovedBy string    `json:"approved_by,omitempty"`
	ApprovedAt time.Time `json:"approved_at,omitzero"`
	// Approvals are every approval of the hash so far, and Policy what
	// the project's policy said of them when the last one came.
	Approvals []Approval      `json:"approvals,omitempty"`
	Policy    *PolicyDecision `json:"policy,omitempty"`
	AppliedTo string          `json:"applied_to,omitempty"` // the branch and commit an apply made
	AppliedAt time.Time       `json:"applied_at,omitzero"`
	// PartOf is the submitted change set this one was cut from, when a
	// person approved only some of its hunks (Hunks, as diff --blame
	// numbers them): Hash then covers exactly those.
	PartOf string `json:"part_of,omitempty"`
	Hunks  []int  `json:"hunks,omitempty"`
}

// JSON strings are UTF-8, and a change set is bytes: a path or a diff that
// is not valid UTF-8 is carried in base64 as well (path_b64, diff_b64),
// beside a readable form with U+FFFD for the bytes UTF-8 cannot hold.
// Reading takes the bytes, so a change set frozen, read back and hashed
// again is the same change set (invariant 14).

type plainEntry ChangeEntry

// EntryWire is a change set entry as the API carries it: its path in
// base64 as well when it is not UTF-8.
type EntryWire struct {
	plainEntry
	PathB64 string `json:"path_b64,omitempty"`
}

// wire is the entry as the API carries it.
func (e ChangeEntry) wire() EntryWire {
	v := EntryWire{plainEntry: plainEntry(e)}
	v.Path, v.PathB64 = readable(e.Path)
	return v
}

// readable is s as JSON carries it: as it is when it is UTF-8, else with
// U+FFFD for what UTF-8 cannot hold, and its bytes in base64 beside.
func readable(s string) (text, b64 string) {
	if utf8.ValidString(s) {
		return s, ""
	}
	return strings.ToValidUTF8(s, "\uFFFD"), base64.StdEncoding.EncodeToString([]byte(s))
}

// bytesOf is what readable was given: b64's bytes where there are any,
// else text (key names b64 in errors).
func bytesOf(text, b64, key string) (string, error) {
	if b64 == "" {
		return text, nil
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	return string(b), nil
}

// entry is the entry v carries, its path from path_b64 when there is one.
func (v EntryWire) entry() (ChangeEntry, error) {
	e := ChangeEntry(v.plainEntry)
	var err error
	if e.Path, err = bytesOf(v.Path, v.PathB64, "path_b64"); err != nil {
		return ChangeEntry{}, err
	}
	return e, nil
}

// MarshalJSON writes the entry, with its path's bytes in path_b64 when
// they are not UTF-8.
func (e ChangeEntry) MarshalJSON() ([]byte, error) {
	return json.Marshal(e.wire())
}

// UnmarshalJSON reads an entry, its path from path_b64 when there is one.
func (e *ChangeEntry) UnmarshalJSON(b []byte) error {
	var v EntryWire
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	var err error
	*e, err = v.entry()
	return err
}

// ChangeSetWire is a change set as the API carries it: its paths and diff
// in base64 as well where they are not UTF-8. It has no JSON methods of
// its own, nor have its entries, so encoding/json writes and reads it in
// one pass: a change set's MarshalJSON output is scanned again whole by
// encoding/json (a 2 MB diff cost 10 ms and more each way), and its
// UnmarshalJSON is handed the whole object after a scan of it. The API's
// handler of a change set answers with its Wire, and the Go client reads
// one; MarshalJSON writes a Wire, with its fields in ChangeSet's order
// and diff_b64 last (TestChangeSetJSONKeepsBytes holds it to that).
type ChangeSetWire struct {
	RunID        string      `json:"run_id"`
	BaseRevision string      `json:"base_revision"`
	Entries      []EntryWire `json:"entries"`
	Diff         string      `json:"diff"`
	DiffSize     int64       `json:"diff_size"`
	DiffOmitted  bool        `json:"diff_omitted,omitempty"`
	Hash         string      `json:"hash"`
	Ignored      []string    `json:"ignored,omitempty"`
	ComputedAt   time.Time   `json:"computed_at"`
	DiffB64      string      `json:"diff_b64,omitempty"`
}

// Wire is the change set as the API carries it (nil for nil).
func (cs *ChangeSet) Wire() *ChangeSetWire {
	if cs == nil {
		return nil
	}
	v := &ChangeSetWire{RunID: cs.RunID, BaseRevision: cs.BaseRevision, Diff: cs.Diff, DiffSize: cs.DiffSize,
		DiffOmitted: cs.DiffOmitted, Hash: cs.Hash, Ignored: cs.Ignored, ComputedAt: cs.ComputedAt}
	if cs.Entries != nil {
		v.Entries = make([]EntryWire, len(cs.Entries))
	}
	for i, e := range cs.Entries {
		v.Entries[i] = e.wire()
	}
	v.Diff, v.DiffB64 = readable(cs.Diff)
	return v
}

// ChangeSet is the change set w carries: its paths and diff from base64
// where they were sent so.
func (w *ChangeSetWire) ChangeSet() (*ChangeSet, error) {
	cs := ChangeSet{RunID: w.RunID, BaseRevision: w.BaseRevision, DiffSize: w.DiffSize,
		DiffOmitted: w.DiffOmitted, Hash: w.Hash, Ignored: w.Ignored, ComputedAt: w.ComputedAt}
	var err error
	if cs.Diff, err = bytesOf(w.Diff, w.DiffB64, "diff_b64"); err != nil {
		return nil, err
	}
	if w.Entries != nil {
		cs.Entries = make([]ChangeEntry, len(w.Entries))
	}
	for i, e := range w.Entries {
		if cs.Entries[i], err = e.entry(); err != nil {
			return nil, err
		}
	}
	return &cs, nil
}

// MarshalJSON writes the change set, with its diff's bytes in diff_b64
// when they are not UTF-8.
func (cs ChangeSet) MarshalJSON() ([]byte, error) {
	return json.Marshal(cs.Wire())
}

// UnmarshalJSON reads a change set, its diff from diff_b64 when there is one.
func (cs *ChangeSet) UnmarshalJSON(b []byte) error {
	var w ChangeSetWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	v, err := w.ChangeSet()
	if err != nil {
		return err
	}
	*cs = *v
	return nil
}
