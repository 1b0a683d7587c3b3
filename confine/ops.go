package confine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/paddock-dev/paddock"
	"golang.org/x/sys/unix"
)

// namesDir reports whether a path as given can only name a directory: it
// ends in a slash, or in "." or "..". Rel cleans these away ("README.md/" is
// "README.md"), so the operations that need a file, or that would act on a
// file where the agent named a directory, look at the path as given.
func namesDir(given string) bool {
	if strings.HasSuffix(given, "/") {
		return true
	}
	last := given[strings.LastIndexByte(given, '/')+1:]
	return last == "." || last == ".."
}

// refuseDirSyntax is the refusal of a path that names a directory where a
// file is needed.
func refuseDirSyntax(given string) error {
	return Refuse(paddock.CodeBadRequest, RuleNotRegular, given, "the path ends in a slash (or in . or ..): it names a directory, not a file",
		"name the file without the trailing slash")
}

// notDir is the refusal of a path that names a directory but is something else.
func notDir(given string) error {
	return Refuse(paddock.CodeBadRequest, RuleNotRegular, given, "the path ends in a slash (or in . or ..) but is not a directory",
		"name a file or a link without the trailing slash")
}

// maxHops bounds link resolution, as the kernel does.
const maxHops = 40

// resolve follows the links in p as far as they exist and returns the
// relative path they lead to, for the protected-path check. A link that is
// absolute or leads out is refused. Components that do not exist are kept.
func (r *Root) resolve(p Path) (string, error) {
	given, rel := p.given, p.rel
	if rel == "." {
		return ".", nil
	}
	todo := strings.Split(rel, "/")
	var done []string
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case ".", "":
			continue
		case "..":
			if len(done) == 0 {
				return "", mapErr(errors.New("path escapes from parent"), given)
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, c)...)
		fi, err := r.root.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			done = append(done, c)
			done = append(done, todo...)
			return path.Clean(path.Join(done...)), nil
		}
		if err != nil {
			return "", mapErr(err, given)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		if hops++; hops > maxHops {
			return "", mapErr(syscall.ELOOP, given)
		}
		target, err := r.root.Readlink(cur)
		if err != nil {
			return "", mapErr(err, given)
		}
		if path.IsAbs(target) {
			return "", mapErr(errors.New("path escapes from parent"), given)
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

// CheckWrite refuses a write to p when the path, or the place its links
// lead, is protected.
func (r *Root) CheckWrite(p Path) error {
	given, rel := p.given, p.rel
	if rel == "." {
		return Refuse(paddock.CodeForbidden, RuleProtected, given, "the workspace root itself cannot be replaced or deleted", "")
	}
	real, err := r.resolve(p)
	if err != nil {
		return err
	}
	for _, q := range []string{rel, real} {
		if why := r.policy.Match(path.Join(r.prefix, q)); why != "" {
			return Refuse(paddock.CodeForbidden, RuleProtected, given, "the path is protected: "+why,
				"change other files; ask the operator if this file must change")
		}
	}
	return nil
}

// OpenRead opens p for reading. Only a regular file with one name is
// opened; the check is made on the descriptor, and the open never blocks.
func (r *Root) OpenRead(p Path) (*os.File, fs.FileInfo, error) {
	given, rel := p.given, p.rel
	if namesDir(given) {
		return nil, nil, refuseDirSyntax(given)
	}
	fi, err := r.root.Stat(rel)
	if err != nil {
		return nil, nil, mapErr(err, given)
	}
	if err := regular(fi, given); err != nil {
		return nil, nil, err
	}
	f, err := r.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, mapErr(err, given)
	}
	fi, err = f.Stat()
	if err == nil {
		err = regular(fi, given)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// ReadEntry reads name, an entry a walk just listed in this directory, into
// buf (grown as needed) if it is a regular file with one name and at most
// max bytes. It is the walk's fast path: one openat relative to the
// directory's descriptor that follows no link and never blocks, one fstat,
// the reads, one close — no path walk and no poller registration. A name is a
// single component, so it cannot lead anywhere but into this directory.
// skipped is true (with a nil error) for what is not such a file.
func (r *Root) ReadEntry(name string, max int64, buf []byte) (data []byte, skipped bool, err error) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return nil, true, nil
	}
	if err := r.dirFD(); err != nil {
		return nil, true, err
	}
	fd, err := unix.Openat(int(r.dirf.Fd()), name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, nil
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink > 1 || st.Size > max {
		return nil, true, nil
	}
	if int64(cap(buf)) < st.Size+1 {
		buf = make([]byte, 0, st.Size+1)
	}
	buf = buf[:cap(buf)]
	n := 0
	for {
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, true, nil
		}
		if m == 0 {
			break
		}
		n += m
		if int64(n) >= st.Size {
			break // all of it; a file that grows meanwhile is read as it was
		}
	}
	return buf[:n], false, nil
}

// dirFD opens the directory itself once, for ReadEntry.
func (r *Root) dirFD() error {
	r.dirOnce.Do(func() {
		r.dirf, r.dirErr = r.root.Open(".")
	})
	return r.dirErr
}

func regular(fi fs.FileInfo, given string) error {
	if fi.IsDir() {
		return Refuse(paddock.CodeBadRequest, RuleNotRegular, given, "the path is a directory", "use list or glob for directories")
	}
	if !fi.Mode().IsRegular() {
		return Refuse(paddock.CodeForbidden, RuleNotRegular, given, "the path is not a regular file (a FIFO, socket or device)", "")
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return Refuse(paddock.CodeForbidden, RuleHardLink, given, "the file has other hard links, possibly outside the workspace",
			"copy what you need into a new file")
	}
	return nil
}

// Stat returns p's information, following links inside the workspace.
func (r *Root) Stat(p Path) (fs.FileInfo, error) {
	given, rel := p.given, p.rel
	fi, err := r.root.Stat(rel)
	return fi, mapErr(err, given)
}

// Lstat returns p's information without following a final link. A path
// given with a trailing slash must be a directory.
func (r *Root) Lstat(p Path) (fs.FileInfo, error) {
	given, rel := p.given, p.rel
	fi, err := r.root.Lstat(rel)
	if err == nil && namesDir(given) && !fi.IsDir() {
		return nil, notDir(given)
	}
	return fi, mapErr(err, given)
}

// Readlink returns the target of the link p.
func (r *Root) Readlink(p Path) (string, error) {
	given, rel := p.given, p.rel
	t, err := r.root.Readlink(rel)
	return t, mapErr(err, given)
}

// WriteFile replaces p with data atomically: a temporary file beside it,
// written and fsynced, then renamed over it. Missing parents are made. With
// mode nil an existing regular file keeps its mode and a new one gets 0644.
// It reports whether the file is new.
func (r *Root) WriteFile(p Path, data []byte, mode *fs.FileMode) (created bool, err error) {
	given, rel := p.given, p.rel
	if namesDir(given) {
		return false, refuseDirSyntax(given)
	}
	if err := r.CheckWrite(p); err != nil {
		return false, err
	}
	created = true
	perm := fs.FileMode(0o644)
	if fi, err := r.root.Lstat(rel); err == nil {
		switch {
		case fi.IsDir():
			return false, Refuse(paddock.CodeBadRequest, RuleNotRegular, given, "the path is a directory", "")
		case fi.Mode().IsRegular():
			perm, created = fi.Mode().Perm(), false
		case fi.Mode()&fs.ModeSymlink != 0:
			created = false // the link itself is replaced, never written through
		default:
			return false, Refuse(paddock.CodeForbidden, RuleNotRegular, given, "the path is not a regular file", "")
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, mapErr(err, given)
	}
	if mode != nil {
		perm = *mode & fs.ModePerm
	}
	if dir := path.Dir(rel); dir != "." {
		if err := r.root.MkdirAll(dir, 0o755); err != nil {
			return false, mapErr(err, given)
		}
	}
	tmp, f, err := r.tempFile(rel, perm)
	if err != nil {
		return false, mapErr(err, given)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			r.root.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return false, mapErr(err, given)
	}
	// Set the mode on the descriptor: Root.Chmod could be raced onto a link.
	if err := f.Chmod(perm); err != nil {
		return false, mapErr(err, given)
	}
	if err := f.Sync(); err != nil {
		return false, mapErr(err, given)
	}
	if err := f.Close(); err != nil {
		return false, mapErr(err, given)
	}
	if err := r.root.Rename(tmp, rel); err != nil {
		return false, mapErr(err, given)
	}
	ok = true
	return created, nil
}

func (r *Root) tempFile(rel string, perm fs.FileMode) (string, *os.File, error) {
	for i := 0; ; i++ {
		var b [6]byte
		rand.Read(b[:])
		tmp := path.Join(path.Dir(rel), ".paddock-tmp-"+hex.EncodeToString(b[:]))
		f, err := r.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
		if err == nil || !errors.Is(err, fs.ErrExist) || i > 5 {
			return tmp, f, err
		}
	}
}

// Remove deletes p; a non-empty directory only if recursive.
func (r *Root) Remove(p Path, recursive bool) error {
	given, rel := p.given, p.rel
	if err := r.CheckWrite(p); err != nil {
		return err
	}
	fi, err := r.Lstat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() && recursive {
		// A protected path below a directory keeps the directory.
		var blocked error
		fs.WalkDir(r.root.FS(), rel, func(q string, d fs.DirEntry, err error) error {
			if err == nil && blocked == nil {
				if why := r.policy.Match(path.Join(r.prefix, q)); why != "" {
					blocked = Refuse(paddock.CodeForbidden, RuleProtected, given,
						"the directory holds a protected path ("+q+"): "+why, "delete the other files one by one")
				}
			}
			return blocked
		})
		if blocked != nil {
			return blocked
		}
		return mapErr(r.root.RemoveAll(rel), given)
	}
	return mapErr(r.root.Remove(rel), given)
}

// Rename moves from to to. Without overwrite an existing target is refused.
func (r *Root) Rename(pFrom, pTo Path, overwrite bool) error {
	givenFrom, from, givenTo, to := pFrom.given, pFrom.rel, pTo.given, pTo.rel
	if err := r.CheckWrite(pFrom); err != nil {
		return err
	}
	if err := r.CheckWrite(pTo); err != nil {
		return err
	}
	fi, err := r.root.Lstat(from)
	if err != nil {
		return mapErr(err, givenFrom)
	}
	// A trailing slash on either side says the agent moves a directory.
	switch {
	case namesDir(givenFrom) && !fi.IsDir():
		return notDir(givenFrom)
	case namesDir(givenTo) && !fi.IsDir():
		return notDir(givenTo)
	}
	if _, err := r.root.Lstat(to); err == nil && !overwrite {
		return Refuse(paddock.CodeConflict, RuleExists, givenTo, "the target already exists", "set overwrite to replace it")
	}
	if dir := path.Dir(to); dir != "." {
		if err := r.root.MkdirAll(dir, 0o755); err != nil {
			return mapErr(err, givenTo)
		}
	}
	return mapErr(r.root.Rename(from, to), givenTo)
}

// MkdirAll makes p and its parents.
func (r *Root) MkdirAll(p Path) error {
	given, rel := p.given, p.rel
	if err := r.CheckWrite(p); err != nil {
		return err
	}
	return mapErr(r.root.MkdirAll(rel, 0o755), given)
}
