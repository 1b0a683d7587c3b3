// Package bundle writes and checks portable run bundles: one signed file
// that carries a run's submitted change set (its entries, its diff and the
// new content of every file) with what is needed to trust it elsewhere:
// the base revision, the agent's definition and grants, the recorded
// enforcement, the event log (verify results included) and the approvals.
//
// A bundle is a tar stream, read in one pass:
//
//	run.json          the run: id, project, base revision, agent definition and hash
//	changeset.json    the frozen change set (its hash names it)
//	changeset.diff    its diff, as the hash covers it (masked as paddock keeps it)
//	blobs/ID          the new content of each created or modified entry, by git blob id
//	submission.json   the submission: hash, when, who approved it, where it was applied
//	access.json       the agent's access requests and what was decided
//	enforcement.json  the sandbox's recorded enforcement (null when nothing ran)
//	events.jsonl      the run's event log, one event a line, masked as paddock keeps it
//	manifest.json     the format, the run, the hash, and every file above: name, size, sha256
//	signature.json    an ed25519 signature of manifest.json's bytes, and the public key
//
// Verify checks all of it offline: each file against the manifest, the
// manifest against the signature and a trusted key, the change set against
// its hash, each blob against its id, the approvals and verify results
// against the hash, and the event log's sequence. Nothing else is accepted:
// an unknown name, a file twice, a link, a file the manifest does not list.
package bundle

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/internal/durable"
)

// Format names this layout in the manifest.
const Format = "paddock-bundle/1"

// The files of a bundle, in the order they are written.
const (
	RunFile         = "run.json"
	ChangeSetFile   = "changeset.json"
	DiffFile        = "changeset.diff"
	BlobsDir        = "blobs/"
	SubmissionFile  = "submission.json"
	AccessFile      = "access.json"
	EnforcementFile = "enforcement.json"
	EventsFile      = "events.jsonl"
	ManifestFile    = "manifest.json"
	SignatureFile   = "signature.json"
)

// RunInfo is run.json: what the run was, where it started and who worked in it.
type RunInfo struct {
	ID           string                   `json:"id"`
	Project      string                   `json:"project"`
	BaseRef      string                   `json:"base_ref"`
	BaseRevision string                   `json:"base_revision"`
	Kind         string                   `json:"kind"`
	Access       string                   `json:"access"`
	Agent        *paddock.AgentDefinition `json:"agent,omitempty"`
	AgentHash    string                   `json:"agent_hash,omitempty"`
	Secrets      []string                 `json:"secrets,omitempty"` // names only, never values
	CreatedAt    time.Time                `json:"created_at"`
}

// FileSum is one file of a bundle, as the manifest lists it.
type FileSum struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Manifest is manifest.json, the document the signature covers.
type Manifest struct {
	Format    string    `json:"format"`
	Run       string    `json:"run"`
	Hash      string    `json:"hash"`
	CreatedAt time.Time `json:"created_at"`
	Files     []FileSum `json:"files"`
}

// Signature is signature.json.
type Signature struct {
	Alg       string `json:"alg"` // ed25519
	PublicKey string `json:"public_key"`
	KeyID     string `json:"key_id"`
	Signature string `json:"signature"` // base64, of manifest.json's bytes
}

// Contents is what a bundle carries besides its blobs, for Write.
type Contents struct {
	Run         RunInfo
	ChangeSet   *paddock.ChangeSet // frozen; DiffFile or Diff holds its diff
	Submission  *paddock.Submission
	Access      []*paddock.AccessRequest
	Enforcement *paddock.Enforcement
	Events      []*paddock.Event
	// Blob opens the content of a blob id (the frozen blobs).
	Blob func(id string) (io.ReadCloser, error)
}

// Write writes c as a bundle to w, signed with key. w gets the bundle's
// bytes as they are made: a failure leaves a stream without its manifest
// and signature, which no reader accepts.
func Write(w io.Writer, c *Contents, key ed25519.PrivateKey, now time.Time) error {
	if c.ChangeSet == nil || c.Submission == nil || c.Submission.Hash != c.ChangeSet.Hash {
		return errors.New("bundle: a bundle holds a submitted change set")
	}
	tw := tar.NewWriter(w)
	m := Manifest{Format: Format, Run: c.Run.ID, Hash: c.ChangeSet.Hash, CreatedAt: now.UTC()}
	add := func(name string, size int64, r io.Reader) error {
		h := sha256.New()
		if err := tw.WriteHeader(header(name, size, now)); err != nil {
			return fmt.Errorf("bundle: %s: %w", name, err)
		}
		n, err := io.Copy(io.MultiWriter(tw, h), r)
		if err != nil {
			return fmt.Errorf("bundle: %s: %w", name, err)
		}
		if n != size {
			return fmt.Errorf("bundle: %s changed while it was written", name)
		}
		m.Files = append(m.Files, FileSum{Name: name, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))})
		return nil
	}
	addJSON := func(name string, v any) error {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("bundle: %s: %w", name, err)
		}
		return add(name, int64(len(b)), bytes.NewReader(b))
	}
	cs := *c.ChangeSet
	diff, size, err := openDiff(&cs)
	if err != nil {
		return err
	}
	defer diff.Close()
	cs.DiffFile = ""
	if err := addJSON(RunFile, c.Run); err != nil {
		return err
	}
	if err := addJSON(ChangeSetFile, &cs); err != nil {
		return err
	}
	if err := add(DiffFile, size, diff); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, e := range cs.Entries {
		if !carriesBlob(e) || seen[e.NewBlob] {
			continue
		}
		seen[e.NewBlob] = true
		if err := addBlob(add, c.Blob, e.NewBlob); err != nil {
			return err
		}
	}
	events := &bytes.Buffer{}
	enc := json.NewEncoder(events)
	for _, e := range c.Events {
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("bundle: events: %w", err)
		}
	}
	access := c.Access
	if access == nil {
		access = []*paddock.AccessRequest{}
	}
	for _, f := range []func() error{
		func() error { return addJSON(SubmissionFile, c.Submission) },
		func() error { return addJSON(AccessFile, access) },
		func() error { return addJSON(EnforcementFile, c.Enforcement) },
		func() error { return add(EventsFile, int64(events.Len()), events) },
	} {
		if err := f(); err != nil {
			return err
		}
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("bundle: manifest: %w", err)
	}
	pub := key.Public().(ed25519.PublicKey)
	sig := Signature{Alg: "ed25519", PublicKey: base64.StdEncoding.EncodeToString(pub), KeyID: KeyID(pub),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, mb))}
	sb, _ := json.MarshalIndent(sig, "", "  ")
	for _, f := range []struct {
		name string
		b    []byte
	}{{ManifestFile, mb}, {SignatureFile, sb}} {
		if err := tw.WriteHeader(header(f.name, int64(len(f.b)), now)); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
		if _, err := tw.Write(f.b); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}

func addBlob(add func(string, int64, io.Reader) error, open func(string) (io.ReadCloser, error), id string) error {
	rc, err := open(id)
	if err != nil {
		return fmt.Errorf("bundle: blob %s: %w", id, err)
	}
	defer rc.Close()
	size := int64(-1)
	if f, ok := rc.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			size = st.Size()
		}
	}
	if size < 0 {
		b, err := io.ReadAll(rc)
		if err != nil {
			return fmt.Errorf("bundle: blob %s: %w", id, err)
		}
		return add(BlobsDir+id, int64(len(b)), bytes.NewReader(b))
	}
	return add(BlobsDir+id, size, rc)
}

// carriesBlob reports whether e's new content travels in the bundle: what
// an apply writes (never a blocked entry, a deletion or a submodule).
func carriesBlob(e paddock.ChangeEntry) bool {
	return e.Op != paddock.OpDelete && e.NewMode != "160000" && e.Blocked == ""
}

// openDiff opens cs's diff and says its size.
func openDiff(cs *paddock.ChangeSet) (io.ReadCloser, int64, error) {
	if cs.DiffOmitted || cs.DiffFile != "" && cs.Diff == "" {
		f, err := os.Open(cs.DiffFile)
		if err != nil {
			return nil, 0, fmt.Errorf("bundle: the diff: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("bundle: the diff: %w", err)
		}
		return f, st.Size(), nil
	}
	return io.NopCloser(strings.NewReader(cs.Diff)), int64(len(cs.Diff)), nil
}

// header is a plain file's tar header; times are the bundle's, so that a
// bundle's bytes depend on what it holds and when it was made only.
func header(name string, size int64, now time.Time) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: now.UTC().Truncate(time.Second), Format: tar.FormatPAX}
}

// KeyID names a public key: the first 16 hex digits of its sha256.
func KeyID(pub ed25519.PublicKey) string {
	s := sha256.Sum256(pub)
	return hex.EncodeToString(s[:8])
}

// PublicKeyLine is a public key as one line of text ("ed25519 BASE64"),
// the form verify-bundle --key and a trusted keys file take.
func PublicKeyLine(pub ed25519.PublicKey) string {
	return "ed25519 " + base64.StdEncoding.EncodeToString(pub)
}

// ParsePublicKey reads a public key line (or the bare base64).
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimSpace(strings.TrimPrefix(s, "ed25519 "))
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "not an ed25519 public key: want a line \"ed25519 BASE64\" (paddock bundle --public-key prints one)")
	}
	return ed25519.PublicKey(b), nil
}

// LoadOrCreateKey reads the signing key at path (PKCS#8 PEM), making one
// (mode 0600, written whole) if there is none.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("bundle: making a key: %w", err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("bundle: making a key: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		pemb := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		// Written whole under another name, then linked into place: a
		// crash leaves no half key, and of two daemons making one at
		// once, the second reads the first's.
		tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
		if err := durable.WriteFile(tmp, pemb); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		defer os.Remove(tmp)
		if err := os.Link(tmp, path); err != nil {
			if errors.Is(err, os.ErrExist) {
				return LoadOrCreateKey(path)
			}
			return nil, fmt.Errorf("bundle: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bundle: the signing key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("bundle: %s is not a PEM private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("bundle: %s: %w", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("bundle: %s is not an ed25519 key", path)
	}
	return key, nil
}
