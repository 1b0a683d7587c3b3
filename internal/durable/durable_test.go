package durable

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "state.json")
	if err := WriteFile(path, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Fatalf("got %q", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
}

func TestWriteFileFromFailureKeepsTheOld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := WriteFile(path, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteFileFrom(path, false, func(w io.Writer) error {
		io.WriteString(w, "half")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "kept" {
		t.Fatalf("got %q", b)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	if err := SyncFS(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	if err := SyncFS(filepath.Join(path, "missing")); err == nil {
		t.Fatal("SyncFS of a missing directory succeeded")
	}
}

func TestCopy(t *testing.T) {
	src := strings.Repeat("0123456789", 20000) // several buffers
	var dst bytes.Buffer
	n, err := Copy(&dst, strings.NewReader(src))
	if err != nil || n != int64(len(src)) || dst.String() != src {
		t.Fatalf("n=%d err=%v equal=%v", n, err, dst.String() == src)
	}
}

func TestCopyFile(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.WriteFile(src, []byte("the bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, []byte("a longer old content"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CopyFile(src, dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "the bytes" {
		t.Fatalf("copied %q", b)
	}
	fresh := filepath.Join(dir, "fresh")
	if err := CopyFile(src, fresh, 0o750); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm()&0o700 != 0o700 {
		t.Fatalf("a new copy: %v %v", fi, err)
	}
	if err := CopyFile(filepath.Join(dir, "none"), dst, 0o644); !os.IsNotExist(err) {
		t.Fatalf("copying nothing: %v", err)
	}
}
