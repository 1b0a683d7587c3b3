package bundle

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset"
)

var when = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// contents is a submitted, approved, verified change set of run r-1: a
// modified file, a new binary one and a deletion.
func contents(t *testing.T) *Contents {
	t.Helper()
	blobs := map[string][]byte{}
	blob := func(s string) string {
		id := changeset.BlobID([]byte(s))
		blobs[id] = []byte(s)
		return id
	}
	cs := &paddock.ChangeSet{RunID: "r-1", BaseRevision: strings.Repeat("a", 40), Entries: []paddock.ChangeEntry{
		{Path: "README.md", Op: paddock.OpModify, OldMode: "100644", NewMode: "100644", OldBlob: strings.Repeat("1", 40), NewBlob: blob("hello, bundled\n")},
		{Path: "logo.bin", Op: paddock.OpCreate, NewMode: "100644", NewBlob: blob("\x00\x01PNG\xff"), Binary: true},
		{Path: "old.txt", Op: paddock.OpDelete, OldMode: "100644", OldBlob: strings.Repeat("2", 40)},
	}, Diff: "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-hello\n+hello, bundled\n"}
	h, err := changeset.Hash(cs)
	if err != nil {
		t.Fatal(err)
	}
	cs.Hash = h
	ev := func(seq int64, typ string, data any) *paddock.Event {
		b, _ := json.Marshal(data)
		return &paddock.Event{RunID: "r-1", Seq: seq, Time: when, Type: typ, Data: b}
	}
	return &Contents{
		Run:        RunInfo{ID: "r-1", Project: "app", BaseRef: "HEAD", BaseRevision: cs.BaseRevision, Kind: "overlay", Access: "write", CreatedAt: when},
		ChangeSet:  cs,
		Submission: &paddock.Submission{RunID: "r-1", Hash: h, SubmittedAt: when, ApprovedBy: "ada", ApprovedAt: when},
		Events: []*paddock.Event{ev(1, "run.created", map[string]string{}), ev(2, paddock.EventVerified, map[string]any{"hash": h, "passed": true}),
			ev(3, paddock.EventSubmitted, map[string]string{"hash": h}), ev(4, paddock.EventApproved, map[string]string{"hash": h, "by": "ada"})},
		Blob: func(id string) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(blobs[id])), nil },
	}
}

func newKey(t *testing.T) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func write(t *testing.T, c *Contents, key ed25519.PrivateKey) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, c, key, when); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func trusting(key ed25519.PrivateKey) Options {
	return Options{Trusted: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
}

// TestRoundTrip: what Write makes, Read takes whole, with everything it
// says checked; the same contents at the same time make the same bytes.
func TestRoundTrip(t *testing.T) {
	key := newKey(t)
	c := contents(t)
	raw := write(t, c, key)
	if !bytes.Equal(raw, write(t, c, key)) {
		t.Fatal("the same contents made two different bundles")
	}
	b, err := Read(bytes.NewReader(raw), trusting(key))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !b.Trusted || b.Signer != KeyID(key.Public().(ed25519.PublicKey)) || b.ChangeSet.Hash != c.ChangeSet.Hash ||
		b.Submission.ApprovedBy != "ada" || b.Events != 4 || len(b.Verified) != 1 || !b.Verified[0].Current {
		t.Fatalf("read back: %+v", b)
	}
	got, err := changeset.Store{Dir: filepath.Dir(filepath.Dir(b.BlobPath("x")))}.ReadBlob(c.ChangeSet.Entries[1].NewBlob)
	if err != nil || string(got) != "\x00\x01PNG\xff" {
		t.Fatalf("the binary blob: %q %v", got, err)
	}
	// Several approvals, each recorded in the log.
	c2 := contents(t)
	s := *c2.Submission
	s.ApprovedBy = "ann, bob"
	s.Approvals = []paddock.Approval{{Hash: s.Hash, By: "ann", Principal: "ann", Role: paddock.RoleReviewer}, {Hash: s.Hash, By: "bob", Principal: "bob", Role: paddock.RoleReviewer}}
	c2.Submission = &s
	evb, _ := json.Marshal(map[string]string{"hash": s.Hash, "by": "ann"})
	c2.Events[3] = &paddock.Event{RunID: "r-1", Seq: 4, Time: c2.Events[3].Time, Type: paddock.EventApproved, Data: evb}
	evb, _ = json.Marshal(map[string]string{"hash": s.Hash, "by": "bob"})
	c2.Events = append(c2.Events, &paddock.Event{RunID: "r-1", Seq: 5, Time: c2.Events[3].Time, Type: paddock.EventApproved, Data: evb})
	b3, err := Read(bytes.NewReader(write(t, c2, key)), trusting(key))
	if err != nil || len(b3.Submission.Approvals) != 2 {
		t.Fatalf("two approvals: %v %+v", err, b3)
	}
	b3.Close()
	// Any signer: checked, reported, not trusted.
	b2, err := Read(bytes.NewReader(raw), Options{AnySigner: true})
	if err != nil || b2.Trusted {
		t.Fatalf("any signer: %v %+v", err, b2)
	}
	b2.Close()
	if _, err := Read(bytes.NewReader(raw), trusting(newKey(t))); !paddock.IsCode(err, paddock.CodeForbidden) {
		t.Fatalf("another key's bundle: %v", err)
	}
}

// rewrite copies a bundle's tar, letting edit change each file's bytes
// (nil drops the file); extra files are appended before the manifest.
func rewrite(t *testing.T, raw []byte, edit func(name string, b []byte) []byte, extra map[string][]byte) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(raw))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if h.Name == ManifestFile {
			for n, eb := range extra {
				tw.WriteHeader(header(n, int64(len(eb)), when))
				tw.Write(eb)
			}
		}
		if b = edit(h.Name, b); b == nil {
			continue
		}
		tw.WriteHeader(header(h.Name, int64(len(b)), when))
		tw.Write(b)
	}
	tw.Close()
	return out.Bytes()
}

// resign rewrites a bundle's files through edit (name → new bytes; nil
// keeps them), makes the manifest they need and signs it with key: a
// bundle anyone with a key can make.
func resign(t *testing.T, raw []byte, key ed25519.PrivateKey, edit func(name string, b []byte) []byte) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(raw))
	var m Manifest
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		switch h.Name {
		case ManifestFile:
			var orig Manifest
			if err := json.Unmarshal(b, &orig); err != nil {
				t.Fatal(err)
			}
			m.Format, m.Run, m.Hash, m.CreatedAt = orig.Format, orig.Run, orig.Hash, orig.CreatedAt
			continue
		case SignatureFile:
			continue
		}
		if nb := edit(h.Name, b); nb != nil {
			b = nb
		}
		s := sha256.Sum256(b)
		m.Files = append(m.Files, FileSum{Name: h.Name, Size: int64(len(b)), SHA256: hex.EncodeToString(s[:])})
		tw.WriteHeader(&tar.Header{Name: h.Name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg, ModTime: when})
		tw.Write(b)
	}
	mb, _ := json.Marshal(m)
	pub := key.Public().(ed25519.PublicKey)
	sb, _ := json.Marshal(Signature{Alg: "ed25519", PublicKey: base64.StdEncoding.EncodeToString(pub), KeyID: KeyID(pub),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, mb))})
	for _, f := range []struct {
		name string
		b    []byte
	}{{ManifestFile, mb}, {SignatureFile, sb}} {
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.b)), Typeflag: tar.TypeReg, ModTime: when})
		tw.Write(f.b)
	}
	tw.Close()
	return out.Bytes()
}

// TestTampered: every way a bundle can be changed after it was signed is
// refused, and so is a bundle that was signed saying what it cannot.
func TestTampered(t *testing.T) {
	key := newKey(t)
	c := contents(t)
	raw := write(t, c, key)
	blob := BlobsDir + c.ChangeSet.Entries[0].NewBlob
	flip := func(target string) func(string, []byte) []byte {
		return func(name string, b []byte) []byte {
			if name == target {
				b = append([]byte(nil), b...)
				b[len(b)/2] ^= 1
			}
			return b
		}
	}
	drop := func(target string) func(string, []byte) []byte {
		return func(name string, b []byte) []byte {
			if name == target {
				return nil
			}
			return b
		}
	}
	same := func(_ string, b []byte) []byte { return b }
	for name, bad := range map[string][]byte{
		"a blob's byte":         rewrite(t, raw, flip(blob), nil),
		"the diff":              rewrite(t, raw, flip(DiffFile), nil),
		"the events":            rewrite(t, raw, flip(EventsFile), nil),
		"the manifest":          rewrite(t, raw, flip(ManifestFile), nil),
		"the signature":         rewrite(t, raw, flip(SignatureFile), nil),
		"a blob dropped":        rewrite(t, raw, drop(blob), nil),
		"the signature dropped": rewrite(t, raw, drop(SignatureFile), nil),
		"a file added":          rewrite(t, raw, same, map[string][]byte{"notes.txt": []byte("x")}),
		"a blob added":          rewrite(t, raw, same, map[string][]byte{BlobsDir + changeset.BlobID([]byte("x")): []byte("x")}),
		"a path added":          rewrite(t, raw, same, map[string][]byte{"../escape": []byte("x")}),
		"cut short":             raw[:len(raw)/2],
		"empty":                 {},
	} {
		if b, err := Read(bytes.NewReader(bad), trusting(key)); err == nil {
			b.Close()
			t.Errorf("%s: read as a good bundle", name)
		} else if !paddock.IsCode(err, paddock.CodeConflict) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Read(bytes.NewReader(raw), Options{Trusted: trusting(key).Trusted, MaxSize: 1000}); err == nil {
		t.Error("a bundle larger than allowed was read")
	}

	// Signed, but saying what the rest contradicts.
	for name, edit := range map[string]func(c *Contents){
		"approved without an approval event": func(c *Contents) { c.Events = c.Events[:3] },
		"an approval the log does not record": func(c *Contents) {
			s := *c.Submission
			s.Approvals = []paddock.Approval{{Hash: s.Hash, By: "ada"}, {Hash: s.Hash, By: "bob", Principal: "bob"}}
			c.Submission = &s
		},
		"a gap in the events":      func(c *Contents) { c.Events = append(c.Events[:1], c.Events[2:]...) },
		"another run's submission": func(c *Contents) { s := *c.Submission; s.RunID = "r-2"; c.Submission = &s },
		"another base":             func(c *Contents) { c.Run.BaseRevision = strings.Repeat("b", 40) },
		"a change set that is not its hash": func(c *Contents) {
			cs := *c.ChangeSet
			cs.Entries = append([]paddock.ChangeEntry(nil), cs.Entries[:2]...)
			c.ChangeSet = &cs
		},
	} {
		c := contents(t)
		edit(c)
		var buf bytes.Buffer
		if err := Write(&buf, c, key, when); err != nil {
			continue // refused at the source: fine too
		}
		if b, err := Read(&buf, trusting(key)); err == nil {
			b.Close()
			t.Errorf("%s: read as a good bundle", name)
		}
	}
}

// TestReadBoundsAnEventLogsHeap: Read once kept the event log as one
// decoded slice (found by red-teaming bundles, round 3), and an untrusted
// bundle (import --untrusted, or any verify-bundle: the signature is
// checked, then everything is decoded) may carry 256 MB of it, before any
// check of what the events say. Three bytes, "{}\n", decode to an Event of
// about a hundred: 256 MB of them is billions of bytes of heap in the
// daemon that imports it. A bundle of 300,000 such lines (900 KB) must be
// refused, or read into a heap that does not grow by 30 times its size.
func TestReadBoundsAnEventLogsHeap(t *testing.T) {
	key := newKey(t)
	const n = 300_000
	bad := resign(t, write(t, contents(t), key), key, func(name string, b []byte) []byte {
		if name == EventsFile {
			return append(b, bytes.Repeat([]byte("{}\n"), n)...)
		}
		return nil
	})
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var m runtime.MemStats
		var top uint64
		for {
			runtime.ReadMemStats(&m)
			top = max(top, m.HeapAlloc)
			select {
			case <-done:
				peak <- top
				return
			default:
			}
		}
	}()
	b, err := Read(bytes.NewReader(bad), Options{AnySigner: true, TempDir: t.TempDir()})
	close(done)
	grew := int64(<-peak) - int64(base.HeapAlloc)
	if err == nil {
		b.Close()
	}
	t.Logf("read: %v, heap grew %d KB", err, grew>>10)
	if grew > 16<<20 {
		t.Errorf("a bundle with %d empty events (%d KB) took %d MB of heap to read (it ended: %v); 256 MB of them would take about %d GB",
			n, 3*n/1024, grew>>20, err, grew*(256<<20)/(3*n)>>30)
	}
}

func TestKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "bundle.pem")
	k1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("the key read back differs: %v", err)
	}
	pub := k1.Public().(ed25519.PublicKey)
	got, err := ParsePublicKey(PublicKeyLine(pub) + "\n")
	if err != nil || !got.Equal(pub) {
		t.Fatalf("public key line: %v", err)
	}
	if _, err := ParsePublicKey("ed25519 AAAA"); err == nil {
		t.Fatal("a short key parsed")
	}
}
