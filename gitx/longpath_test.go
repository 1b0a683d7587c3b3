package gitx_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"golang.org/x/sys/unix"
)

// TestDiffOfAPathLongerThanAnArgument: a new file whose path is longer
// than one argument of a command line may be (128 KiB), made one
// directory at a time as an agent can, is in the diff: a diff of few
// changes put every changed path on git's command line, and git could not
// start ("argument list too long").
func TestDiffOfAPathLongerThanAnArgument(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	work := gittest.NewRepo(t, filepath.Join(t.TempDir(), "work"), map[string]string{"a.txt": "a\n"})
	base := gittest.Git(t, work, "rev-parse", "HEAD")
	fd, err := unix.Open(work, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 250)
	var long strings.Builder
	for long.Len() < 140<<10 {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
		long.WriteString(name + "/")
	}
	f, err := unix.Openat(fd, "f.txt", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(f, []byte("x\n"))
	unix.Close(f)
	want := "\x00" + long.String() + "f.txt\x00"

	gitDir := filepath.Join(work, ".git")
	for kind, diff := range map[string]func() (*gitx.Snapshot, error){
		"DiffWorkTree": func() (*gitx.Snapshot, error) {
			return g.DiffWorkTree(ctx, gitDir, work, base, gitx.DiffOptions{Cache: t.TempDir()})
		},
		"DiffPaths": func() (*gitx.Snapshot, error) {
			return g.DiffPaths(ctx, gitDir, work, base, []string{long.String() + "f.txt"}, gitx.DiffOptions{Cache: t.TempDir()})
		},
	} {
		s, err := diff()
		if err != nil {
			t.Fatalf("%s: %.400v", kind, err)
		}
		if !bytes.Contains(s.Raw, []byte(want)) {
			t.Errorf("%s: the long path is not in the diff (%d bytes of entries)", kind, len(s.Raw))
		}
	}
}
