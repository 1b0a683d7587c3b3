package gitx

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/paddock-dev/paddock/internal/fsat"
	"golang.org/x/sys/unix"
)

// maxIgnoreFile bounds a .gitignore file copied for git to read.
const maxIgnoreFile = 16 << 20

// ignorer answers which of a work tree's new paths its ignore rules leave
// out, with git's own rules: one `git check-ignore` that runs beside the
// walk, in a shadow tree that holds private copies of the work tree's
// .gitignore files (regular files only, copied as the walk finds them) and
// nothing else. git never reads the work tree: a .gitignore that is a
// FIFO or a link is not one, as git itself skips a link there.
type ignorer struct {
	g      *Git
	ctx    context.Context
	gitDir string // the scratch repository (its info/exclude)
	shadow string

	// mu holds one copy of rules or one question at a time: a whole
	// tree's walk reads its directories on several goroutines. The rules
	// of a directory are always kept before any path below it is asked
	// about, as the walk enters a directory before what it holds.
	mu     sync.Mutex
	cmd    *exec.Cmd
	dctx   context.Context // its deadline
	cancel context.CancelFunc
	in     io.WriteCloser
	out    *bufio.Reader
}

func newIgnorer(ctx context.Context, g *Git, gitDir, shadow string) (*ignorer, error) {
	if err := os.MkdirAll(shadow, 0o700); err != nil {
		return nil, err
	}
	return &ignorer{g: g, ctx: ctx, gitDir: gitDir, shadow: shadow}, nil
}

// keepRules copies the .gitignore of the directory dirfd (at rel) into
// the shadow tree, if it has one that is a regular file.
func (ig *ignorer) keepRules(dirfd int, rel string) error {
	ig.mu.Lock()
	defer ig.mu.Unlock()
	fd, err := fsat.OpenAt(dirfd, ".gitignore", false)
	if gone(err) || errors.Is(err, unix.ENXIO) {
		return nil
	}
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), ".gitignore")
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return err
	}
	if fi.Size() > maxIgnoreFile {
		return fmt.Errorf("%s is over %d bytes", filepath.Join(rel, ".gitignore"), maxIgnoreFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIgnoreFile+1))
	if err != nil {
		return err
	}
	dst := filepath.Join(ig.shadow, filepath.FromSlash(rel), ".gitignore")
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil || ig.cmd == nil {
		return err
	}
	// check-ignore reads a directory's rules once, when first asked about
	// it or a path below it, and keeps them until a question elsewhere
	// moves it out: asked about the directory itself (rel/) before its
	// .gitignore was copied, it holds no rules for it. A question at the
	// top moves it out of every directory, so it reads these next time.
	_, err = ig.queryLocked([]string{rulesKept})
	return err
}

// rulesKept is the path a question about makes check-ignore read again
// the rules of every directory below the top.
const rulesKept = ".paddock-rules-kept"

// start runs check-ignore, once: -v -n gives one record for every path,
// matched or not, so that answers pair with questions.
func (ig *ignorer) start() error {
	if ig.cmd != nil {
		return nil
	}
	args := []string{"check-ignore", "--no-index", "--stdin", "-z", "-v", "-n"}
	cmd, dctx, cancel := ig.g.command(ig.ctx, where{gitDir: ig.gitDir, workTree: ig.shadow}, []string{"GIT_FLUSH=1"}, args)
	in, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return err
	}
	cmd.Stderr = &limitedBuffer{b: &bytes.Buffer{}, n: 64 << 10}
	if err := cmd.Start(); err != nil {
		cancel()
		return err
	}
	ig.cmd, ig.dctx, ig.cancel, ig.in, ig.out = cmd, dctx, cancel, in, bufio.NewReader(out)
	return nil
}

// query asks about paths (a directory's ends in "/") and returns, in
// order, whether each is ignored.
func (ig *ignorer) query(paths []string) ([]bool, error) {
	ig.mu.Lock()
	defer ig.mu.Unlock()
	return ig.queryLocked(paths)
}

// queryLocked is query, with ig.mu held.
func (ig *ignorer) queryLocked(paths []string) ([]bool, error) {
	if err := ig.start(); err != nil {
		return nil, err
	}
	written := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(ig.in)
		for _, p := range paths {
			// "./" keeps git from reading a leading ':' as pathspec magic.
			w.WriteString("./" + p + "\x00")
		}
		written <- w.Flush()
	}()
	answers := make([]bool, len(paths))
	for i := range paths {
		var rec [4]string
		for k := range rec {
			s, err := ig.out.ReadString(0)
			if err != nil {
				return nil, ig.failed(err)
			}
			rec[k] = s[:len(s)-1]
		}
		pattern := rec[2]
		answers[i] = pattern != "" && pattern[0] != '!'
	}
	if err := <-written; err != nil {
		return nil, ig.failed(err)
	}
	return answers, nil
}

// failed is the error of a check-ignore that stopped answering.
func (ig *ignorer) failed(err error) error {
	ig.in.Close()
	ig.cmd.Wait()
	if ig.dctx.Err() != nil && ig.ctx.Err() == nil {
		return ig.g.timeoutError(ig.cmd.Args[len(hardening)+1:])
	}
	var msg string
	if lb, ok := ig.cmd.Stderr.(*limitedBuffer); ok {
		msg = lb.b.String()
	}
	return &CommandError{Args: ig.cmd.Args[len(hardening)+1:], Stderr: msg, Err: err}
}

// dir reports whether the directory rel is ignored.
func (ig *ignorer) dir(rel string) (bool, error) {
	a, err := ig.query([]string{rel + "/"})
	if err != nil {
		return false, err
	}
	return a[0], nil
}

// files returns which of paths are ignored.
func (ig *ignorer) files(paths []string) (map[string]bool, error) {
	a, err := ig.query(paths)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for i, p := range paths {
		if a[i] {
			out[p] = true
		}
	}
	return out, nil
}

// close ends check-ignore.
func (ig *ignorer) close() {
	if ig == nil || ig.cmd == nil {
		return
	}
	ig.in.Close()
	ig.cmd.Wait()
	ig.cancel()
}
