package bundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset"
)

// Options says how Read checks a bundle.
type Options struct {
	// Trusted are the keys whose signatures are accepted.
	Trusted []ed25519.PublicKey
	// AnySigner accepts any signer: the bundle's integrity is checked and
	// its signer reported, not trusted.
	AnySigner bool
	// MaxSize bounds the bundle's bytes (DefaultMaxSize if zero).
	MaxSize int64
	// TempDir is where the diff and the blobs are kept while the bundle is
	// open (the system's if empty).
	TempDir string
}

// DefaultMaxSize bounds a bundle Read takes when Options say nothing.
const DefaultMaxSize = paddock.MaxBundle

// maxMeta bounds each JSON document of a bundle (the events excepted).
const maxMeta = 16 << 20

// maxEvents bounds the event log, maxEventLine one event in it.
const (
	maxEvents    = 256 << 20
	maxEventLine = 4 << 20
)

// Verification is what a verify result in the event log says.
type Verification struct {
	Seq     int64  `json:"seq"`
	Hash    string `json:"hash"`
	Passed  bool   `json:"passed"`
	Stale   bool   `json:"stale,omitempty"`
	Current bool   `json:"current"` // of the bundled change set's hash
}

// Bundle is a bundle Read checked whole. Its diff and blobs are in files
// until Close.
type Bundle struct {
	Manifest    Manifest                 `json:"manifest"`
	Signer      string                   `json:"signer"` // the key's id
	PublicKey   string                   `json:"public_key"`
	Trusted     bool                     `json:"trusted"`
	Run         RunInfo                  `json:"run"`
	ChangeSet   *paddock.ChangeSet       `json:"-"`
	Submission  *paddock.Submission      `json:"submission"`
	Access      []*paddock.AccessRequest `json:"access"`
	Enforcement *paddock.Enforcement     `json:"enforcement"`
	// Events counts the event log's events; EventsPath is where it is
	// kept until Close (it is never held in memory whole).
	Events     int            `json:"events"`
	EventsPath string         `json:"-"`
	Verified   []Verification `json:"verified"`
	// Rejected says the log records the run's rejection: an approval
	// before it no longer stands.
	Rejected bool `json:"rejected,omitempty"`
	dir      string
}

// BlobPath is where the blob id of a read bundle is kept.
func (b *Bundle) BlobPath(id string) string { return filepath.Join(b.dir, "blobs", id) }

// Close removes what Read kept.
func (b *Bundle) Close() error { return os.RemoveAll(b.dir) }

func invalid(format string, args ...any) error {
	return paddock.Errorf(paddock.CodeConflict, "the bundle does not verify: "+format, args...).WithRule("bundle_invalid")
}

// Read reads a bundle from r and checks everything it says (see the
// package's doc); any failure is an error and nothing is kept.
func Read(r io.Reader, o Options) (b *Bundle, err error) {
	if o.MaxSize == 0 {
		o.MaxSize = DefaultMaxSize
	}
	dir, err := os.MkdirTemp(o.TempDir, "paddock-bundle-")
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	b = &Bundle{dir: dir}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
			b = nil
		}
	}()
	if err := os.Mkdir(filepath.Join(dir, "blobs"), 0o700); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	tr := tar.NewReader(&limitReader{r: r, n: o.MaxSize, max: o.MaxSize})
	got := map[string]FileSum{}
	var order []string
	docs := map[string][]byte{}
	var manifestBytes, sigBytes []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, invalid("not a whole bundle (%v)", err)
		}
		name := h.Name
		if h.Typeflag != tar.TypeReg {
			return nil, invalid("%q is not a plain file", name)
		}
		if _, dup := got[name]; dup || (name == ManifestFile && manifestBytes != nil) || (name == SignatureFile && sigBytes != nil) {
			return nil, invalid("%q is in it twice", name)
		}
		if sigBytes != nil {
			return nil, invalid("%q comes after the signature", name)
		}
		switch {
		case name == ManifestFile:
			if manifestBytes, err = readAll(tr, maxMeta, name); err != nil {
				return nil, err
			}
			continue
		case name == SignatureFile:
			if manifestBytes == nil {
				return nil, invalid("the signature comes before the manifest")
			}
			if sigBytes, err = readAll(tr, maxMeta, name); err != nil {
				return nil, err
			}
			continue
		case manifestBytes != nil:
			return nil, invalid("%q comes after the manifest", name)
		}
		sum, err := b.readFile(tr, h, docs)
		if err != nil {
			return nil, err
		}
		got[name] = sum
		order = append(order, name)
	}
	if manifestBytes == nil || sigBytes == nil {
		return nil, invalid("it has no manifest or no signature: the file is cut short, or was never whole")
	}
	if err := b.checkSignature(manifestBytes, sigBytes, o); err != nil {
		return nil, err
	}
	if err := strictUnmarshal(manifestBytes, &b.Manifest, ManifestFile); err != nil {
		return nil, err
	}
	if err := b.checkManifest(order, got); err != nil {
		return nil, err
	}
	if err := b.decode(docs); err != nil {
		return nil, err
	}
	if err := b.checkChangeSet(got); err != nil {
		return nil, err
	}
	return b, b.checkRecord()
}

// readFile keeps a content file of the bundle (not the manifest or the
// signature) from tr, whose header h names it: on disk under the bundle's
// directory, or in docs for the small JSON documents. It returns the
// file's sum, to check against the manifest.
func (b *Bundle) readFile(tr *tar.Reader, h *tar.Header, docs map[string][]byte) (FileSum, error) {
	name := h.Name
	switch {
	case name == DiffFile:
		return keep(tr, filepath.Join(b.dir, "changeset.diff"), name, nil)
	case strings.HasPrefix(name, BlobsDir):
		id := strings.TrimPrefix(name, BlobsDir)
		if !isBlobID(id) {
			return FileSum{}, invalid("%q is not a blob's name", name)
		}
		return keep(tr, b.BlobPath(id), name, blobHasher(id, h.Size))
	case name == EventsFile:
		if h.Size > maxEvents {
			return FileSum{}, invalid("%s is larger than %d bytes", name, maxEvents)
		}
		b.EventsPath = filepath.Join(b.dir, "events.jsonl")
		return keep(tr, b.EventsPath, name, nil)
	case slices.Contains([]string{RunFile, ChangeSetFile, SubmissionFile, AccessFile, EnforcementFile}, name):
		doc, err := readAll(tr, maxMeta, name)
		if err != nil {
			return FileSum{}, err
		}
		docs[name] = doc
		s := sha256.Sum256(doc)
		return FileSum{Name: name, Size: int64(len(doc)), SHA256: hex.EncodeToString(s[:])}, nil
	}
	return FileSum{}, invalid("%q is not a bundle's file", name)
}

// checkManifest checks the signed manifest against what the bundle holds:
// its format, the same files in the same order with the same sums, and
// every file a bundle must have.
func (b *Bundle) checkManifest(order []string, got map[string]FileSum) error {
	if b.Manifest.Format != Format {
		return invalid("format %q: this paddock reads %s", b.Manifest.Format, Format)
	}
	if len(b.Manifest.Files) != len(order) {
		return invalid("the manifest lists %d files, the bundle holds %d", len(b.Manifest.Files), len(order))
	}
	for i, f := range b.Manifest.Files {
		if order[i] != f.Name || got[f.Name] != f {
			return invalid("%s is not what the manifest signed", f.Name)
		}
	}
	for _, name := range []string{RunFile, ChangeSetFile, DiffFile, SubmissionFile, AccessFile, EnforcementFile, EventsFile} {
		if _, ok := got[name]; !ok {
			return invalid("it has no %s", name)
		}
	}
	return nil
}

func (b *Bundle) checkSignature(manifest, sigDoc []byte, o Options) error {
	var sig Signature
	if err := strictUnmarshal(sigDoc, &sig, SignatureFile); err != nil {
		return err
	}
	pub, err := base64.StdEncoding.DecodeString(sig.PublicKey)
	if sig.Alg != "ed25519" || err != nil || len(pub) != ed25519.PublicKeySize || sig.KeyID != KeyID(pub) {
		return invalid("the signature is not an ed25519 one")
	}
	raw, err := base64.StdEncoding.DecodeString(sig.Signature)
	if err != nil || !ed25519.Verify(pub, manifest, raw) {
		return invalid("the signature does not match the manifest")
	}
	b.Signer, b.PublicKey = KeyID(pub), PublicKeyLine(pub)
	for _, k := range o.Trusted {
		if k.Equal(ed25519.PublicKey(pub)) {
			b.Trusted = true
		}
	}
	if !b.Trusted && !o.AnySigner {
		return paddock.Errorf(paddock.CodeForbidden, "the bundle is signed by key %s, which is not trusted here (%s)", b.Signer, b.PublicKey).
			WithRule("bundle_untrusted").WithDetail("signer", b.PublicKey)
	}
	return nil
}

func (b *Bundle) decode(docs map[string][]byte) error {
	cs := &paddock.ChangeSet{}
	for name, v := range map[string]any{RunFile: &b.Run, ChangeSetFile: cs, SubmissionFile: &b.Submission, AccessFile: &b.Access, EnforcementFile: &b.Enforcement} {
		if err := strictUnmarshal(docs[name], v, name); err != nil {
			return err
		}
	}
	b.ChangeSet = cs
	if b.Access == nil {
		b.Access = []*paddock.AccessRequest{}
	}
	return nil
}

// checkChangeSet holds the change set to its hash, the manifest's, and its
// blobs to its entries: exactly the blobs an apply writes, each hashing to
// its id (checked as it was read).
func (b *Bundle) checkChangeSet(got map[string]FileSum) error {
	cs := b.ChangeSet
	cs.DiffFile = filepath.Join(b.dir, "changeset.diff")
	if !cs.DiffOmitted {
		d, err := os.ReadFile(cs.DiffFile)
		if err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
		if string(d) != cs.Diff {
			return invalid("the change set's diff and %s differ", DiffFile)
		}
	}
	if cs.Hash != b.Manifest.Hash || cs.BaseRevision != b.Run.BaseRevision {
		return invalid("the change set is not the one the manifest names")
	}
	if err := changeset.Verify(cs); err != nil {
		return invalid("the change set does not hash to %s", cs.Hash)
	}
	want := map[string]bool{}
	for _, e := range cs.Entries {
		if carriesBlob(e) {
			want[BlobsDir+e.NewBlob] = true
		}
	}
	for name := range got {
		if strings.HasPrefix(name, BlobsDir) && !want[name] {
			return invalid("%s belongs to no entry", name)
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			return invalid("the new content of an entry (%s) is missing", name)
		}
	}
	return nil
}

// maxApprovers bounds the approvers of one hash a bundle's log is read
// for: far more than any policy asks (approval.MaxApprovals), and a log
// cannot make the check hold an unbounded set.
const maxApprovers = 1000

// checkRecord holds the submission, the approvals and the event log to
// the change set and to each other.
func (b *Bundle) checkRecord() error {
	s, hash := b.Submission, b.ChangeSet.Hash
	if s == nil || s.Hash != hash || s.RunID != b.Run.ID || b.Manifest.Run != b.Run.ID {
		return invalid("the submission is not of this change set and run")
	}
	var approved, submitted bool
	// Who the log records approving the hash: each approval the
	// submission lists must be one of them.
	approvers := map[string]bool{}
	// The log is read a line at a time from its file: what is kept of it
	// is counts and the verify results, whatever its size.
	f, err := os.Open(b.EventsPath)
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	for sc.Scan() {
		var e paddock.Event
		if err := strictUnmarshal(sc.Bytes(), &e, EventsFile); err != nil {
			return err
		}
		b.Events++
		if e.RunID != b.Run.ID || e.Seq != int64(b.Events) {
			return invalid("the event log is not the run's whole log in order (event %d)", b.Events)
		}
		var d struct {
			Hash   string `json:"hash"`
			By     string `json:"by"`
			Passed bool   `json:"passed"`
			Stale  bool   `json:"stale"`
			To     string `json:"to"`
		}
		json.Unmarshal(e.Data, &d)
		if e.Type == paddock.TransitionEvent && d.To == string(paddock.StateRejected) {
			b.Rejected = true
		}
		switch e.Type {
		case paddock.EventSubmitted:
			// Some hunks approved: the submission was of the whole.
			submitted = submitted || d.Hash == hash || (s.PartOf != "" && d.Hash == s.PartOf)
		case paddock.EventApproved:
			approved = approved || d.Hash == hash
			if d.Hash == hash && len(approvers) < maxApprovers {
				approvers[d.By] = true
			}
		case paddock.EventVerified:
			b.Verified = append(b.Verified, Verification{Seq: e.Seq, Hash: d.Hash, Passed: d.Passed, Stale: d.Stale, Current: d.Hash == hash && !d.Stale})
		}
	}
	if err := sc.Err(); err != nil {
		return invalid("%s: %v", EventsFile, err)
	}
	if !submitted {
		return invalid("the event log does not record the submission of %s", hash)
	}
	if s.ApprovedBy != "" && !approved {
		return invalid("the submission says approved by %s, and the event log records no approval of %s", s.ApprovedBy, hash)
	}
	for _, a := range s.Approvals {
		if a.Hash == hash && !approvers[a.By] {
			return invalid("the submission lists an approval of %s by %s, and the event log records none", hash, a.By)
		}
	}
	if b.Verified == nil {
		b.Verified = []Verification{}
	}
	return nil
}

// keep writes what r holds into path, hashed; check, if set, also sees
// the bytes (a blob's id) and must end as expected.
func keep(r io.Reader, path, name string, check *blobCheck) (FileSum, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return FileSum{}, fmt.Errorf("bundle: %w", err)
	}
	h := sha256.New()
	w := io.MultiWriter(f, h)
	if check != nil {
		w = io.MultiWriter(f, h, check.h)
	}
	n, err := io.Copy(w, r)
	if err = errors.Join(err, f.Close()); err != nil {
		return FileSum{}, invalid("%s: %v", name, err)
	}
	if check != nil && hex.EncodeToString(check.h.Sum(nil)) != check.id {
		return FileSum{}, invalid("%s does not hash to its id", name)
	}
	return FileSum{Name: name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

type blobCheck struct {
	id string
	h  hash.Hash
}

// blobHasher hashes a blob's content as git does (SHA-1, or SHA-256 for a
// 64-digit id), to be compared with id.
func blobHasher(id string, size int64) *blobCheck {
	var h hash.Hash = sha1.New()
	if len(id) == 64 {
		h = sha256.New()
	}
	fmt.Fprintf(h, "blob %d\x00", size)
	return &blobCheck{id: id, h: h}
}

func isBlobID(id string) bool {
	return (len(id) == 40 || len(id) == 64) && strings.Trim(id, "0123456789abcdef") == ""
}

func readAll(r io.Reader, limit int64, name string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, invalid("%s: %v", name, err)
	}
	if int64(len(b)) > limit {
		return nil, invalid("%s is larger than %d bytes", name, limit)
	}
	return b, nil
}

func strictUnmarshal(b []byte, v any, name string) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("%s: %v", name, err)
	}
	if dec.More() {
		return invalid("%s holds more than one document", name)
	}
	return nil
}

// limitReader fails past n bytes rather than ending quietly.
type limitReader struct {
	r      io.Reader
	n, max int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, invalid("it is larger than the %d bytes allowed", l.max)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// ReadEvents reads the whole event log of a read bundle (checked already;
// as large as the log is).
func (b *Bundle) ReadEvents() ([]*paddock.Event, error) {
	f, err := os.Open(b.EventsPath)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	var out []*paddock.Event
	dec := json.NewDecoder(f)
	for dec.More() {
		var e paddock.Event
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		out = append(out, &e)
	}
	return out, nil
}
