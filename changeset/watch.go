package changeset

// A change set's diff followed as git writes it: its entries labelled,
// its lines scanned for what masking would change, and its hash taken,
// while git is still writing the rest (see Watch).

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"sort"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/termsafe"
)

// Watch is a change set built beside git's diff instead of after it:
// gitx.DiffOptions.Patch writes the diff through it, and its Entries is
// called from DiffOptions.Check with git's raw entries, before the diff.
// From then on the entries are labelled, the diff's lines are scanned as
// masking's first reading scans them, and the hash is taken, while git
// writes the rest. A diff the scan finds nothing to mask in (no
// credential shape or declared secret, no private key, no character a
// terminal acts on, no line too long to be masked whole) is kept as it
// was written, and its hash is the one taken on the way; any other is
// masked after as Build masks it. Build's change set and a Watch's are
// the same.
type Watch struct {
	diff           io.Writer // the diff's file, written first
	diffFile       string
	base, root     string
	policy         *confine.Policy
	red            *redact.Redactor
	trees          Trees
	raw            []byte
	entries        []paddock.ChangeEntry // labelled on a goroutine
	labelled       chan error
	head           []byte    // what the hash binds before the diff, as the entries were foretold
	sum            hash.Hash // of head, then the diff
	feed           *io.PipeWriter
	scanned        chan scanned
	unseen, closed bool // a write came before the entries; Close ran
	labelErr       error
	scan           scanned
	kept           bool // Build kept the diff as written, and its hash
}

type scanned struct {
	plan  *plan
	clean bool // read to its end, and nothing in it masking would change
}

// NewWatch follows the diff written to diff (the file diffFile) of the
// change set of the workspace at root against base; Build's other
// arguments.
func NewWatch(diff io.Writer, diffFile, base, root string, policy *confine.Policy, red *redact.Redactor, trees Trees) *Watch {
	return &Watch{diff: diff, diffFile: diffFile, base: base, root: root, policy: policy, red: red, trees: trees}
}

// Entries starts the work that needs git's raw entries alone (raw) and
// the files withheld: the labels, and the hash's head. It takes a second
// call for the same raw entries as a no-op.
func (w *Watch) Entries(raw []byte, withheld []gitx.Withheld) error {
	if w.entries != nil || w.closed {
		return nil
	}
	entries, err := parseRaw(raw)
	if err != nil {
		return err
	}
	w.raw, w.entries = raw, entries
	w.head = hashHead(w.base, foretold(entries, withheld, w.red))
	w.sum = sha256.New()
	w.sum.Write(w.head)
	w.labelled = make(chan error, 1)
	go func() { w.labelled <- labelEntries(entries, w.root, w.policy, w.trees) }()
	pr, pw := io.Pipe()
	w.feed, w.scanned = pw, make(chan scanned, 1)
	go func() {
		k := &cleanCheck{red: w.red}
		p, err := scanFrom(w.red, pr, k)
		pr.CloseWithError(errors.Join(err, io.ErrClosedPipe)) // a write after it ends stops feeding
		w.scanned <- scanned{plan: p, clean: err == nil && !k.dirty}
	}()
	return nil
}

// Write writes p to the diff's file, and hands it to the hash and the scan.
func (w *Watch) Write(p []byte) (int, error) {
	n, err := w.diff.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return n, err // the diff fails: nothing of it is kept
	}
	if w.sum == nil {
		w.unseen = true // no head to hash it after: Build masks and hashes it after
		return n, nil
	}
	w.sum.Write(p)
	if w.feed != nil {
		if _, err := w.feed.Write(p); err != nil {
			w.feed, w.unseen = nil, true // the scan ended early: its answer is not trusted
		}
	}
	return n, nil
}

// Close waits for the labels and the scan. A Watch is closed once the
// diff is written, or given up.
func (w *Watch) Close() {
	if w.closed {
		return
	}
	w.closed = true
	if w.feed != nil {
		w.feed.Close()
	}
	if w.scanned != nil {
		w.scan = <-w.scanned
	}
	if w.labelled != nil {
		w.labelErr = <-w.labelled
	}
}

// Build is the change set of git's snapshot, whose diff went through w
// to diffFile; the same as Build's, with the work Entries started done.
func (w *Watch) Build(runID string, snap *gitx.Snapshot) (*paddock.ChangeSet, error) {
	w.Close()
	if w.entries == nil || !bytes.Equal(w.raw, snap.Raw) {
		return Build(runID, w.base, w.root, snap, w.diffFile, w.policy, w.red, w.trees)
	}
	if w.labelErr != nil {
		return nil, w.labelErr
	}
	clean := !w.unseen && w.scan.clean && w.scan.plan.empty() && w.unplaced()
	found := map[string]*Finding{}
	if !clean {
		var err error
		if found, err = maskInPlace(w.red, w.diffFile, w.root, newBlobs(w.entries)); err != nil {
			return nil, err
		}
	}
	cs, err := assemble(runID, w.base, w.root, snap, w.diffFile, w.entries, found, w.policy, w.red)
	if err != nil {
		return nil, err
	}
	if clean && bytes.Equal(hashHead(cs.BaseRevision, cs.Entries), w.head) {
		cs.Hash, w.kept = "sha256:"+hex.EncodeToString(w.sum.Sum(nil)), true
		return cs, nil
	}
	if cs.Hash, err = Hash(cs); err != nil {
		return nil, err
	}
	return cs, nil
}

// empty: nothing of the plan makes masking change a line.
func (p *plan) empty() bool {
	return p != nil && len(p.withhold) == 0 && len(p.keyOpen) == 0
}

// unplaced reports whether no hunk that shows key data but no key marker
// lies in a key of its new file (as masking would place it: see
// keySpanReader), once the labels have learnt what the files hold.
func (w *Watch) unplaced() bool {
	if len(w.scan.plan.placed) == 0 {
		return true
	}
	keys := newKeySpanReader(w.root, newBlobs(w.entries))
	defer keys.close()
	for _, p := range w.scan.plan.placed {
		if len(keys.of(p)) > 0 {
			return false
		}
	}
	return true
}

// foretold are the entries as the hash will bind them (see Build and
// assemble): paths masked as review masks them, then the withheld files
// (theirs masked too), in path order.
func foretold(entries []paddock.ChangeEntry, withheld []gitx.Withheld, red *redact.Redactor) []paddock.ChangeEntry {
	out := make([]paddock.ChangeEntry, 0, len(entries)+len(withheld))
	for _, e := range entries {
		out = append(out, paddock.ChangeEntry{Path: red.String(e.Path), Op: e.Op, OldMode: e.OldMode, NewMode: e.NewMode, OldBlob: e.OldBlob, NewBlob: e.NewBlob})
	}
	if len(withheld) > 0 {
		for _, wh := range withheld {
			e := withheldEntry(wh)
			e.Path = red.String(e.Path)
			out = append(out, e)
		}
		sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	}
	return out
}

// cleanCheck follows scan through a diff and tells whether masking's
// second reading (masker) would write it as it is: it is dirty from the
// first line that could be masked or labelled. What it lets through,
// masker writes unchanged (TestCleanDiffUnmasked holds it to that).
type cleanCheck struct {
	red   *redact.Redactor
	batch []byte
	dirty bool
}

// line sees one line of the diff (a part of one, when not whole), of kind.
func (k *cleanCheck) line(line []byte, whole bool, kind lineKind) {
	if k == nil || k.dirty {
		return
	}
	if !whole {
		k.dirty = true // masked as a stream (masker.long)
		return
	}
	switch kind {
	case hunkHeader:
		// The text after it is masked when it is as long as key data.
		if i := bytes.Index(line[2:], []byte("@@")); i >= 0 {
			if data := bytes.TrimSpace(line[i+4:]); len(data) >= keyLineMin && redact.IsKeyData(data) {
				k.dirty = true
				return
			}
		}
	case binaryData:
		if k.red.Declared() {
			k.dirty = true // decoded and scanned for the secrets
			return
		}
	}
	k.batch = append(k.batch, line...)
	if len(k.batch) >= batchSize {
		k.flush()
	}
}

// end sees the end of the diff.
func (k *cleanCheck) end() {
	if k != nil {
		k.flush()
	}
}

func (k *cleanCheck) flush() {
	b := k.batch
	k.batch = k.batch[:0]
	if k.dirty || len(b) == 0 {
		return
	}
	k.dirty = k.red.MayMask(b) || bytes.Contains(b, []byte("-----BEGIN ")) || bytes.Contains(b, []byte("-----END ")) ||
		bytes.Contains(b, keyWord) || termsafe.Has(b)
}
