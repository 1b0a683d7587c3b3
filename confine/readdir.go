package confine

import (
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ReadDir lists the directory r is, sorted by name, as a walk needs it: each
// entry's type comes from the directory listing itself (d_type), and its
// Info is an lstat through r, relative to the directory's descriptor. It is
// os.Root's ReadDir without its cost: a directory read through os.Root
// lstats every entry as it lists them (Go 1.26), which made up most of a
// walk of a large tree.
func (r *Root) ReadDir() ([]fs.DirEntry, error) {
	if err := r.dirFD(); err != nil {
		return nil, err
	}
	// A descriptor of its own: a listing moves its offset.
	fd, err := unix.Openat(int(r.dirf.Fd()), ".", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, mapErr(&os.PathError{Op: "open", Path: ".", Err: err}, r.prefix)
	}
	f := os.NewFile(uintptr(fd), r.dir)
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, mapErr(err, r.prefix)
	}
	out := make([]fs.DirEntry, len(entries))
	for i, e := range entries {
		out[i] = dirEntry{e, r}
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// dirEntry is an entry of ReadDir: its Info never resolves a path from the
// top (the os version lstats parent+"/"+name, which a link swapped in above
// could lead outside the workspace).
type dirEntry struct {
	fs.DirEntry
	r *Root
}

func (e dirEntry) Info() (fs.FileInfo, error) {
	return e.r.root.Lstat(e.Name())
}
