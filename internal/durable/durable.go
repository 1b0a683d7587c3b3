// Package durable writes files atomically and, when asked, durably: the
// state files, change sets, frozen blobs and journals that must survive a
// crash whole or not at all. It also holds the pooled copy the hashing
// and freezing of large change sets share.
package durable

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// WriteFile writes path atomically and durably.
func WriteFile(path string, b []byte) error {
	return WriteFileFrom(path, true, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// WriteFileFrom writes path atomically with what fill writes; durably
// only when sync is set (a caller writing many files makes them durable
// together with SyncFS). If fill fails, path is left as it was.
func WriteFileFrom(path string, sync bool, fill func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = fill(f)
	if err == nil && sync {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// SyncFS makes everything written on dir's file system durable, dir's
// own entries included: one syncfs(2) instead of an fsync per file.
func SyncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return d.Sync()
}

// copyBufs are the buffers of Copy.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// Copy is io.Copy through a pooled buffer: a change set of ten thousand
// files is hashed, frozen and applied file by file, and io.Copy from a
// file into a hash allocates a fresh 32 KiB buffer every time.
func Copy(dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	// Hidden behind a plain Reader: *os.File's WriteTo would take its own buffer.
	return io.CopyBuffer(dst, struct{ io.Reader }{src}, *bp)
}

// CopyFile copies the file src to dst (made, or truncated), with perm if
// it is made: streamed, never held in memory.
func CopyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
