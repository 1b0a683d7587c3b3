package bundle

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"testing"
)

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

// TestRedteam3EventsHeldWholeInMemory: Read keeps the event log as one
// decoded slice, and an untrusted bundle (import --untrusted, or any
// verify-bundle: the signature is checked, then everything is decoded)
// may carry 256 MB of it, before any check of what the events say. Three
// bytes, "{}\n", decode to an Event of about a hundred: 256 MB of them
// is billions of bytes of heap in the daemon that imports it. A bundle of
// 300,000 such lines (900 KB) must be refused, or read into a heap that
// does not grow by 30 times its size.
func TestRedteam3EventsHeldWholeInMemory(t *testing.T) {
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
