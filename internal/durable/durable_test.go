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
