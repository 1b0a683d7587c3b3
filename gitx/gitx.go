// Package gitx is the only package that runs git. Every command goes through
// one hardened runner, because paddock runs git in places an agent could have
// prepared: a repository's config, hooks and attributes are code, and so is
// a repository an agent leaves inside its workspace.
//
// # What the runner guarantees
//
//   - git never discovers a repository. Every command names its repository
//     (GIT_DIR) and, where it has one, its work tree (GIT_WORK_TREE); a
//     command that needs none runs in a directory paddock made, with
//     GIT_CEILING_DIRECTORIES at its parent. safe.bareRepository=explicit
//     (git 2.38 and later) refuses a bare repository git would otherwise
//     find by itself.
//   - Every command has a deadline (Git.Timeout, DefaultTimeout unless
//     set): past it git and its children are killed and the error says git
//     timed out.
//   - No hooks run: core.hooksPath is /dev/null on every command.
//   - No fsmonitor runs: core.fsmonitor is false on every command.
//   - System and global config are not read (GIT_CONFIG_NOSYSTEM,
//     GIT_CONFIG_GLOBAL=/dev/null), nor system or global attributes, so a
//     filter, pager, credential helper or alias defined there never runs
//     (HooksPaths reads them for core.hooksPath alone, and runs nothing).
//   - No transport but local files (protocol.allow=never,
//     protocol.file.allow=always); no terminal prompts; no automatic gc or
//     maintenance, which would rewrite a project's .git behind its owner.
//   - GIT_OPTIONAL_LOCKS=0, so read-only commands never refresh an index.
//   - The environment is built, not inherited: only PATH is passed on (and
//     HOME to HooksPaths), so a stray GIT_DIR or GIT_CONFIG_PARAMETERS of
//     the caller cannot redirect git.
//   - A ref argument starting with '-' is refused before git sees it, and
//     paths always follow "--".
//
// # What a workspace can make git do: nothing
//
// A workspace is what an agent wrote; DiffWorkTree and DiffPaths read it,
// and git never does. paddock walks the tree itself, relative to directory
// descriptors (never following a link, never opening what fstat does not
// call a regular file, and then without blocking, so a FIFO cannot hold
// it), hashes the files' own bytes (no filter, end-of-line conversion or
// encoding applies) and writes the blobs as packs of its own. git gets
// only blob ids, in a temporary index of a scratch repository paddock
// makes for the one diff: bare, borrowing the project's objects, with a
// config paddock writes (the project's is never read there) and
// attributes that unset every attribute that could change what a blob
// holds or how a diff shows it. So, whatever the workspace holds:
//
//   - a .git file or directory at any depth, in any case or folding
//     (confine.IsDotGit), is never read (a gitdir: is never followed), and
//     a directory git would take for a repository, or that one more file
//     would make one (HEAD beside objects, refs, commondir or config), is
//     never treated as one: their files are reported as Withheld, which a
//     change set labels and never applies. So is a symbolic link named
//     .gitmodules, which git refuses;
//   - no filter (clean, smudge, process), textconv or external diff driver
//     runs, though the project's own config defines one and the
//     workspace's .gitattributes name it, and no attribute (`-diff`,
//     `binary`, `diff=x` with `x.binary`) turns text into a binary patch:
//     a file is binary when its content is (a NUL byte in its first 8000
//     bytes), as git decides without attributes;
//   - the ignore rules are git's own, applied by `git check-ignore` to the
//     paths paddock found, in a shadow tree that holds private copies of
//     the workspace's .gitignore files (regular ones only) and the
//     project's info/exclude;
//   - a file that changes while it is read fails the diff (conflict), and
//     every git command of it has the runner's deadline.
//
// The project's hooks directory, when its config names one inside the
// project (core.hooksPath), is read with git's config reader and nothing
// else (HooksPaths), for the caller to protect it as .git/hooks is.
//
// # What it does not guarantee
//
// A project's own .git/config is read by git on the commands that run in
// the project (resolving a ref, making a clone or a worktree, exporting a
// snapshot, committing an approved change set), and the includes it names
// are followed. The runner overrides the keys that execute code on those
// commands, but what keeps this safe is whose repository it is: the
// operator's. An export of a revision runs the filters the project's
// attributes and config define, as git's own checkout would.
//
// A diff's rules are paddock's, close to git's but not all of them: the
// project's core.excludesFile is not read (its info/exclude is); a
// directory that looks like a repository is judged by what the workspace
// holds, not by what the user's own tree will hold beside it; the stat
// cache trusts a file whose size, times, inode and mode are unchanged
// since it was hashed (git's index makes the same bet), and never one
// changed within a second of the walk that hashed it. A clone's cache is
// seeded right after its checkout (SeedStatCache) with base's blob ids,
// trusting that the checkout wrote base's bytes: not for a file whose
// attributes could convert them, nor one changed in the clock's tick of
// the seed.
//
// Before git 2.38 safe.bareRepository is not known: nothing depends on it,
// since no command relies on discovery. An agent's own git inside its
// sandbox is the agent's; this package never runs it.
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
)

// hardening is prepended to every git command line.
var hardening = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.attributesFile=/dev/null",
	"-c", "core.pager=cat",
	"-c", "core.askPass=",
	"-c", "credential.helper=",
	"-c", "protocol.allow=never",
	"-c", "protocol.file.allow=always",
	"-c", "safe.bareRepository=explicit",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "advice.detachedHead=false",
	"--no-pager",
}

// DefaultTimeout bounds a git command when Git.Timeout is not set: longer
// than any command paddock runs takes on a large repository (a checkout
// of a few hundred thousand files), short enough that a git that can
// never finish does not hold a change set, a run or a lock for good.
const DefaultTimeout = 10 * time.Minute

// ErrTimeout is in the chain of the error of a git command that passed
// its deadline.
var ErrTimeout = errors.New("git timed out")

// Git runs the git binary at Path.
type Git struct {
	Path string
	// Timeout bounds every command (DefaultTimeout when zero).
	Timeout time.Duration
}

// New finds git on PATH and checks that it is recent enough.
func New(ctx context.Context) (*Git, error) {
	p, err := exec.LookPath("git")
	if err != nil {
		return nil, paddock.Errorf(paddock.CodeUnsupported, "git is not installed or not on PATH")
	}
	g := &Git{Path: p}
	v, err := g.Version(ctx)
	if err != nil {
		return nil, err
	}
	if !atLeast(v, 2, 31) {
		return nil, paddock.Errorf(paddock.CodeUnsupported, "git %s is too old; paddock needs git 2.31 or newer", v)
	}
	return g, nil
}

// Version returns git's version number, such as "2.39.5".
func (g *Git) Version(ctx context.Context) (string, error) {
	out, err := g.run(ctx, nowhere, "version")
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(out))
	if len(f) < 3 {
		return "", fmt.Errorf("gitx: unexpected version output %q", out)
	}
	return f[2], nil
}

func atLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

func env() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_PROTOCOL_FROM_USER=0",
	}
}

// where is the repository a command runs against: git is always told, and
// never left to find one.
type where struct {
	gitDir   string // GIT_DIR; empty for a command that needs no repository
	workTree string // GIT_WORK_TREE, if the command has one
	// dir is the working directory of a command without a repository: a
	// directory paddock made (git looks at it, and at nothing above it).
	dir string
}

// nowhere is a command that needs no repository and no directory.
var nowhere = where{}

// repoAt is the repository whose work tree is root (a project, or a
// clone paddock is making): its .git, whether a directory or a file
// naming one.
func repoAt(root string) where {
	return where{gitDir: filepath.Join(root, ".git"), workTree: root}
}

// gitDirAt is the repository at gitDir, with no work tree.
func gitDirAt(gitDir string) where { return where{gitDir: gitDir} }

// environ is what a command at w gets besides env().
func (w where) environ() (dir string, vars []string) {
	if w.gitDir != "" {
		vars = append(vars, "GIT_DIR="+w.gitDir)
		if w.workTree != "" {
			vars = append(vars, "GIT_WORK_TREE="+w.workTree)
			return w.workTree, vars
		}
		return w.gitDir, vars
	}
	dir = w.dir
	if dir == "" {
		dir = "/"
	}
	return dir, append(vars, "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
}

// CommandError is a git command that failed. Its Error text names the command
// and git's message; callers turn it into a public error where that is safe.
type CommandError struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *CommandError) Unwrap() error { return e.Err }

func (g *Git) run(ctx context.Context, at where, args ...string) ([]byte, error) {
	return g.runInput(ctx, at, nil, nil, args...)
}

func (g *Git) line(ctx context.Context, at where, args ...string) (string, error) {
	out, err := g.run(ctx, at, args...)
	return strings.TrimSpace(string(out)), err
}

// runInput runs git with extra environment variables and stdin.
func (g *Git) runInput(ctx context.Context, at where, extra []string, stdin []byte, args ...string) ([]byte, error) {
	var in io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	var stdout bytes.Buffer
	err := g.runIO(ctx, at, extra, in, &stdout, args...)
	return stdout.Bytes(), err
}

func (g *Git) timeout() time.Duration {
	if g.Timeout > 0 {
		return g.Timeout
	}
	return DefaultTimeout
}

// runIO runs git with stdin and stdout where the caller says: an *os.File
// is handed to git as it is, so what git writes there never passes
// through paddock's memory.
func (g *Git) runIO(ctx context.Context, at where, extra []string, stdin io.Reader, stdout io.Writer, args ...string) error {
	cmd, dctx, cancel := g.command(ctx, at, extra, args)
	defer cancel()
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stdout = stdout
	cmd.Stderr = &limitedBuffer{b: &stderr, n: 64 << 10}
	err := cmd.Run()
	if err != nil && dctx.Err() != nil && ctx.Err() == nil {
		return g.timeoutError(args)
	}
	if err != nil {
		return &CommandError{Args: args, Stderr: stderr.String(), Err: err}
	}
	return nil
}

// command makes the exec.Cmd of one git command at at, under the runner's
// deadline (dctx). The caller runs it and then calls cancel.
func (g *Git) command(ctx context.Context, at where, extra []string, args []string) (cmd *exec.Cmd, dctx context.Context, cancel context.CancelFunc) {
	dctx, cancel = context.WithTimeout(ctx, g.timeout())
	cmd = exec.CommandContext(dctx, g.Path, append(append([]string{}, hardening...), args...)...)
	dir, vars := at.environ()
	cmd.Dir = dir
	cmd.Env = withObjectsEnv(ctx, append(append(env(), vars...), extra...))
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A helper git started could hold its output open past its death.
	cmd.WaitDelay = 5 * time.Second
	return cmd, dctx, cancel
}

// timeoutError is the error of a command the runner's deadline stopped.
func (g *Git) timeoutError(args []string) error {
	return &paddock.Error{Code: paddock.CodeInternal,
		Message: fmt.Sprintf("git %s timed out after %s", subcommand(args), g.timeout()),
		Err:     fmt.Errorf("git %s: %w after %s", strings.Join(args, " "), ErrTimeout, g.timeout())}
}

// subcommand is the git command args run ("diff"), for messages.
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "-C":
			i++
		case !strings.HasPrefix(a, "-"):
			return a
		}
	}
	return "(no command)"
}

// stream runs git at at and hands its output to read as it comes. If read
// fails, git is stopped and read's error returned.
func (g *Git) stream(ctx context.Context, at where, extra []string, args []string, read func(*bufio.Reader) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := g.runIO(ctx, at, extra, nil, pw, args...)
		pw.CloseWithError(err)
		done <- err
	}()
	err := read(bufio.NewReaderSize(pr, 64<<10))
	if err != nil {
		cancel()
		pr.CloseWithError(err)
		<-done
		return err
	}
	io.Copy(io.Discard, pr) // what read left, so that git can finish
	return <-done
}

// limitedBuffer keeps the first n bytes written to it and drops the rest:
// git's messages, not a stream that could be large.
type limitedBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// CheckRef refuses a ref that git could read as an option or that no ref
// could be: empty, starting with '-', or holding whitespace or control characters.
func CheckRef(ref string) error {
	bad := ref == "" || strings.HasPrefix(ref, "-") || strings.ContainsFunc(ref, func(r rune) bool {
		return r <= ' ' || r == 0x7f
	})
	if bad {
		return paddock.Errorf(paddock.CodeBadRequest, "invalid ref %q", ref)
	}
	return nil
}
