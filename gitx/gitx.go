// Package gitx is the only package that runs git. Every command goes through
// one hardened runner, because paddock runs git in places an agent could have
// prepared: a repository's config, hooks and attributes are code.
//
// # What the runner guarantees
//
//   - No hooks run: core.hooksPath is /dev/null on every command.
//   - No fsmonitor runs: core.fsmonitor is false on every command.
//   - System and global config are not read (GIT_CONFIG_NOSYSTEM,
//     GIT_CONFIG_GLOBAL=/dev/null), nor system or global attributes, so a
//     filter, pager, credential helper or alias defined there never runs.
//   - No transport but local files (protocol.allow=never,
//     protocol.file.allow=always); no terminal prompts; no automatic gc or
//     maintenance, which would rewrite a project's .git behind its owner.
//   - GIT_OPTIONAL_LOCKS=0, so read-only commands never refresh an index.
//   - The environment is built, not inherited: only PATH is passed on, so a
//     stray GIT_DIR or GIT_CONFIG_PARAMETERS of the caller cannot redirect git.
//   - A ref argument starting with '-' is refused before git sees it, and
//     paths always follow "--".
//
// # What it does not guarantee
//
// A repository's own .git/config is read by git (there is no switch to skip
// it) and the includes it names are followed. The runner overrides the keys
// that execute code on the commands paddock uses, but the rule that keeps
// this safe is where git runs: paddock runs git in a project root (the
// operator's own repository) and in a workspace only while making it, before
// any agent has had it. Nothing in this package reads a workspace's git state
// after handover.
package gitx

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

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
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "advice.detachedHead=false",
	"--no-pager",
}

// Git runs the git binary at Path.
type Git struct {
	Path string
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
	if !atLeast(v, 2, 25) {
		return nil, paddock.Errorf(paddock.CodeUnsupported, "git %s is too old; paddock needs git 2.25 or newer", v)
	}
	return g, nil
}

// Version returns git's version number, such as "2.39.5".
func (g *Git) Version(ctx context.Context) (string, error) {
	out, err := g.run(ctx, "", "version")
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

func (g *Git) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return g.runEnv(ctx, dir, nil, args...)
}

func (g *Git) line(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := g.run(ctx, dir, args...)
	return strings.TrimSpace(string(out)), err
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

// Repo describes a repository that may become a project.
type Repo struct {
	Root      string // the top of the work tree, symlinks resolved
	CommonDir string // the .git directory shared by its worktrees
}

// Inspect checks that path is the top of a non-bare git work tree with at
// least one commit, and returns what paddock records of it. Its errors are
// public: they name only the path the caller gave.
func (g *Git) Inspect(ctx context.Context, path string) (*Repo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "%s does not exist", path)
		}
		return nil, paddock.Errorf(paddock.CodeBadRequest, "cannot read %s: %v", path, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "%s is not a directory", path)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "cannot resolve %s", path)
	}
	bare, err := g.line(ctx, real, "rev-parse", "--is-bare-repository")
	if err != nil {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "%s is not a git repository", path)
	}
	if bare == "true" {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "%s is a bare repository; a project needs a work tree", path)
	}
	top, err := g.line(ctx, real, "rev-parse", "--show-toplevel")
	if err != nil || top == "" {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "%s is not inside a git work tree", path)
	}
	if top, err = filepath.EvalSymlinks(top); err != nil {
		return nil, fmt.Errorf("gitx: resolve top level: %w", err)
	}
	if top != real {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "%s is inside a repository but not its top; declare %s instead", path, top).
			WithDetail("top_level", top)
	}
	common, err := g.line(ctx, real, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return nil, fmt.Errorf("gitx: %w", err)
	}
	// HEAD names a commit: a lookup, not a walk (Inspect runs before every
	// run is made; see identity.go for the fingerprint).
	if _, err := g.line(ctx, real, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err != nil {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "%s has no commits yet; commit something first", path)
	}
	return &Repo{Root: real, CommonDir: common}, nil
}

// Resolved is a ref resolved to a commit.
type Resolved struct {
	SHA    string
	Branch string // the branch name, when the ref named a local branch
}

// Resolve resolves ref in the repository at dir to a commit.
func (g *Git) Resolve(ctx context.Context, dir, ref string) (*Resolved, error) {
	if err := CheckRef(ref); err != nil {
		return nil, err
	}
	sha, err := g.line(ctx, dir, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil || sha == "" {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "unknown revision %q", ref)
	}
	r := &Resolved{SHA: sha}
	if full, err := g.line(ctx, dir, "rev-parse", "--symbolic-full-name", ref); err == nil {
		r.Branch, _ = strings.CutPrefix(full, "refs/heads/")
		if r.Branch == full {
			r.Branch = ""
		}
	}
	return r, nil
}

// CloneShared makes dst a clone of src that borrows src's objects (git clone
// --shared), checked out detached at sha. The clone gets no hooks (an empty
// template) and no remote: nothing pushed from it can reach src.
func (g *Git) CloneShared(ctx context.Context, src, dst, sha string) error {
	if err := CheckRef(sha); err != nil {
		return err
	}
	if _, err := g.run(ctx, "", "clone", "--shared", "--no-checkout", "--quiet", "--template=", "--", src, dst); err != nil {
		return fmt.Errorf("gitx: clone: %w", err)
	}
	if _, err := g.run(ctx, dst, "remote", "remove", "origin"); err != nil {
		return fmt.Errorf("gitx: clone: %w", err)
	}
	if _, err := g.run(ctx, dst, "checkout", "--quiet", "--detach", sha, "--"); err != nil {
		return fmt.Errorf("gitx: checkout: %w", err)
	}
	return nil
}

// WorktreeAdd adds a detached worktree of repo at path, checked out at sha.
func (g *Git) WorktreeAdd(ctx context.Context, repo, path, sha string) error {
	if err := CheckRef(sha); err != nil {
		return err
	}
	if _, err := g.run(ctx, repo, "worktree", "add", "--quiet", "--detach", "--", path, sha); err != nil {
		return fmt.Errorf("gitx: worktree add: %w", err)
	}
	return nil
}

// WorktreeRemove removes the worktree at path from repo's metadata. The
// caller deletes the directory first: git then only validates and deletes its
// own record (.git/worktrees/NAME) and never looks inside a tree an agent
// could have prepared. Removing a worktree git no longer knows is not an error.
//
// A `git worktree add` killed early leaves a record git itself cannot read
// (an empty gitdir file, a "locked: initializing" marker); git then refuses
// to remove it, or does not see it, while the record breaks the project's
// `git worktree` commands. Such a record, when it is provably this
// worktree's, is deleted here directly.
func (g *Git) WorktreeRemove(ctx context.Context, repo, path string) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("gitx: worktree remove: %s still exists; delete it first", path)
	}
	_, gitErr := g.run(ctx, repo, "worktree", "remove", "--force", "--force", "--", path)
	var ce *CommandError
	if errors.As(gitErr, &ce) && strings.Contains(ce.Stderr, "is not a working tree") {
		gitErr = nil
	}
	common, err := g.line(ctx, repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return fmt.Errorf("gitx: worktree remove: %w", errors.Join(gitErr, err))
	}
	worktrees := filepath.Join(common, "worktrees")
	record := filepath.Join(worktrees, filepath.Base(path))
	if _, err := os.Lstat(record); errors.Is(err, fs.ErrNotExist) {
		return nil // git removed it, or it never existed
	}
	gitdir, err := os.ReadFile(filepath.Join(record, "gitdir"))
	owner := strings.TrimSpace(string(gitdir))
	if (err == nil || errors.Is(err, fs.ErrNotExist)) && (owner == "" || owner == filepath.Join(path, ".git")) {
		if err := os.RemoveAll(record); err != nil {
			return fmt.Errorf("gitx: worktree remove: %w", err)
		}
		os.Remove(worktrees) // only if empty, as git does
		return nil
	}
	if gitErr != nil {
		return fmt.Errorf("gitx: worktree remove: %w", gitErr)
	}
	return fmt.Errorf("gitx: worktree remove: %s belongs to another worktree (%s); left alone", record, owner)
}

// Snapshot is what DiffWorkTree reports: git's raw entries and its binary
// unified diff of a work tree against a base commit.
type Snapshot struct {
	Raw []byte // `git diff --raw -z --full-index` output
	// Diff is the `git diff --binary --full-index` output, when the caller
	// gave no DiffOptions.Patch to stream it to.
	Diff    []byte
	Ignored []string // untracked files the ignore rules leave out
}

// DiffOptions are what DiffWorkTree and DiffPaths take besides the trees.
type DiffOptions struct {
	// Cache, if not empty, is a private directory (paddock's, never the
	// work tree's) where what git makes of the work tree is kept between
	// calls (see DiffWorkTree and DiffPaths).
	Cache string
	// IncludeIgnored: files the ignore rules leave out are part of the diff.
	IncludeIgnored bool
	// Check, if not nil, sees the raw entries before the patch is written,
	// and may refuse (a change set over its limits is never rendered).
	Check func(raw []byte) error
	// Patch, if not nil, receives the unified diff as git writes it: the
	// diff never has to fit in memory. Without it Snapshot.Diff holds it.
	Patch io.Writer
	// Exclude leaves paths out (DiffWorkTree only).
	Exclude []string
	// BaseFiles, if not empty, is a directory holding base's tracked files
	// as git checks them out and nothing else (an overlay's lower layer).
	// DiffPaths then learns from it which of its paths base has, instead of
	// asking git, whenever it can tell: every path is a file there or
	// absent, and none lies under an empty directory (a submodule's).
	BaseFiles string
	// Content is how many bytes of files DiffPaths will copy (an overlay's
	// upper layer holds them): its scratch tree is kept in memory (a tmpfs)
	// only when that is small.
	Content int64
}

// inMemoryScratch is the most content a diff's scratch tree keeps on a tmpfs.
const inMemoryScratch = 64 << 20

// DiffWorkTree compares the files of workTree with commit base of the
// repository whose git directory is gitDir. It never touches either's index
// or object store: the index is a temporary file and the blobs git makes of
// the work tree go to a temporary object directory that borrows the
// repository's objects. The work tree's own .git, whatever it holds, is not
// read (git skips any entry named .git). Paths under exclude are left out.
//
// o.Cache keeps the index and the blobs made of the work tree between
// calls: git then hashes only files whose stat data changed since the last
// call (size, mtime, ctime, inode: ctime cannot be set back by the work
// tree's owner), instead of every file. Without it every call hashes the
// whole tree.
func (g *Git) DiffWorkTree(ctx context.Context, gitDir, workTree, base string, o DiffOptions) (*Snapshot, error) {
	if err := CheckRef(base); err != nil {
		return nil, err
	}
	tmp, objects, err := scratch(gitDir, 0)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	ownObjects, cached := filepath.Join(tmp, "objects"), ""
	if o.Cache != "" {
		key := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%t\x00%q", base, o.IncludeIgnored, o.Exclude)))
		dir := filepath.Join(o.Cache, hex.EncodeToString(key[:8]))
		ownObjects, cached = filepath.Join(dir, "objects"), filepath.Join(dir, "index")
	}
	if err := os.MkdirAll(filepath.Join(ownObjects, "pack"), 0o700); err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	index := filepath.Join(tmp, "index")
	extra := []string{
		"GIT_INDEX_FILE=" + index,
		"GIT_OBJECT_DIRECTORY=" + ownObjects,
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + objects,
	}
	args := func(a ...string) []string {
		return append([]string{"--git-dir=" + gitDir, "--work-tree=" + workTree}, a...)
	}
	run := func(a ...string) ([]byte, error) { return g.runEnv(ctx, "", extra, args(a...)...) }
	// A cached index is copied, never used in place: a call that fails
	// midway leaves the cache as it was. The copy keeps the index's time,
	// which git's check for racily clean entries compares with theirs.
	if cached == "" || copyIndex(cached, index) != nil {
		if _, err := run("read-tree", base); err != nil {
			return nil, fmt.Errorf("gitx: diff: %w", err)
		}
	}
	spec := []string{"--", "."}
	for _, x := range o.Exclude {
		spec = append(spec, ":(exclude)"+x)
	}
	add := []string{"add", "--all"}
	if o.IncludeIgnored {
		add = append(add, "--force")
	}
	if _, err := run(append(add, spec...)...); err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	if cached != "" && copyIndex(index, cached+".tmp") == nil {
		os.Rename(cached+".tmp", cached) // a lost cache costs only time
	}
	snap := &Snapshot{}
	if snap.Raw, err = run(append([]string{"diff", "--cached", "--raw", "-z", "--no-renames", "--full-index", "--no-abbrev", base}, spec...)...); err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	if o.Check != nil {
		if err := o.Check(snap.Raw); err != nil {
			return nil, err
		}
	}
	patch, buf := o.patch()
	if err := g.runIO(ctx, "", extra, nil, patch, args(append([]string{"diff", "--cached", "--binary", "--no-renames", "--full-index",
		"--no-color", "--no-ext-diff", "--no-textconv", base}, spec...)...)...); err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	snap.Diff = buf.Bytes()
	if snap.Ignored, err = ignoredIn(run, spec); err != nil {
		return nil, err
	}
	return snap, nil
}

// patch is where the unified diff goes: o.Patch, or a buffer whose bytes
// become Snapshot.Diff.
func (o DiffOptions) patch() (io.Writer, *bytes.Buffer) {
	if o.Patch != nil {
		return o.Patch, &bytes.Buffer{}
	}
	b := &bytes.Buffer{}
	return b, b
}

// scratch makes a private directory for a diff's index and objects (and
// content bytes of files), and returns it with the absolute path of the
// repository's object store, which the diff borrows from.
func scratch(gitDir string, content int64) (tmp, objects string, err error) {
	objects, err = filepath.Abs(filepath.Join(gitDir, "objects"))
	if err != nil {
		return "", "", err
	}
	// In memory where the machine has a tmpfs for it and the content is
	// small: a diff's scratch files (an index, the shadow tree of an
	// overlay's changes) are written and read once; on a disk, making a
	// thousand small files costs more than the diff. Large content goes to
	// disk: a tmpfs is memory.
	err = errors.ErrUnsupported
	var st syscall.Statfs_t
	if content <= inMemoryScratch && syscall.Statfs("/dev/shm", &st) == nil && int64(st.Bavail)*int64(st.Bsize) >= 1<<30 {
		tmp, err = os.MkdirTemp("/dev/shm", "paddock-diff-")
	}
	if err != nil { // no tmpfs, or one too small for the change set's limits
		tmp, err = os.MkdirTemp("", "paddock-diff-")
	}
	if err != nil {
		return "", "", fmt.Errorf("gitx: diff: %w", err)
	}
	return tmp, objects, nil
}

// ignoredIn lists the untracked files the ignore rules leave out, within
// spec (an ignored directory as itself).
func ignoredIn(run func(args ...string) ([]byte, error), spec []string) ([]string, error) {
	out, err := run(append([]string{"ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"}, spec...)...)
	if err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	var ignored []string
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			ignored = append(ignored, p)
		}
	}
	return ignored, nil
}

// MaxDiffPaths bounds the paths DiffPaths takes on its command lines; a
// caller with more diffs the whole tree.
const MaxDiffPaths = 2000

// DiffPaths is DiffWorkTree for a caller that knows which paths can have
// changed (an overlay's upper layer): only those paths are read from base
// and from the work tree, so it costs what changed, not what the tree
// holds. Paths are literal, relative to the work tree; a directory stands
// for everything below it. Its answer equals DiffWorkTree's whenever the
// rest of the tree is unchanged.
//
// git never sees workTree itself: the files under paths (and the
// .gitignore files above them) are copied into a private shadow tree
// first. git resolves a work tree's path through its symbolic links, and a
// view reached through /proc/PID/root (another mount namespace) would
// resolve to a path of the daemon's own namespace.
//
// o.Cache keeps the blobs git makes between calls, so a file that has not
// changed since is hashed again but not written again.
func (g *Git) DiffPaths(ctx context.Context, gitDir, workTree, base string, paths []string, o DiffOptions) (*Snapshot, error) {
	if err := CheckRef(base); err != nil {
		return nil, err
	}
	if len(paths) > MaxDiffPaths {
		return nil, fmt.Errorf("gitx: diff: %d paths; at most %d", len(paths), MaxDiffPaths)
	}
	if len(paths) == 0 {
		return &Snapshot{}, nil
	}
	tmp, objects, err := scratch(gitDir, o.Content)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	ownObjects, shadow := filepath.Join(tmp, "objects"), filepath.Join(tmp, "tree")
	if o.Cache != "" {
		ownObjects = filepath.Join(o.Cache, "objects")
	}
	if err := os.MkdirAll(filepath.Join(ownObjects, "pack"), 0o700); err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	if err := os.Mkdir(shadow, 0o700); err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	extra := []string{
		"GIT_INDEX_FILE=" + filepath.Join(tmp, "index"),
		"GIT_OBJECT_DIRECTORY=" + ownObjects,
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + objects,
		"GIT_LITERAL_PATHSPECS=1",
	}
	args := func(a ...string) []string {
		return append([]string{"--git-dir=" + gitDir, "--work-tree=" + shadow}, a...)
	}
	run := func(a ...string) ([]byte, error) { return g.runEnv(ctx, "", extra, args(a...)...) }
	spec := append([]string{"--"}, paths...)
	// Base's entries under those paths, listed while the shadow tree is
	// made: neither needs the other.
	type listing struct {
		out []byte
		err error
	}
	listed := make(chan listing, 1)
	inBase, known := baseHas(o.BaseFiles, paths) // base's paths under those paths; true: a submodule
	if known {
		listed <- listing{}
	} else {
		go func() {
			out, err := run(append([]string{"ls-tree", "-r", "-z", "--full-tree", base}, spec...)...)
			listed <- listing{out, err}
		}()
	}
	pending := true
	defer func() {
		if pending {
			<-listed // git is done before its scratch directory goes
		}
	}()
	// The shadow tree: every file now under paths, and the ignore rules
	// that apply to them.
	var files []string
	seen := map[string]bool{}
	addFile := func(p string) {
		if !seen[p] {
			seen[p] = true
			files = append(files, p)
		}
	}
	view, err := os.OpenRoot(workTree)
	if err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	defer view.Close()
	vfs := view.FS()
	rules := map[string]bool{}
	for _, p := range paths {
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			rules[filepath.Join(d, ".gitignore")] = true
			rules[filepath.Join(d, ".gitattributes")] = true // eol and filters apply on add
			if d == "." || d == "/" {
				break
			}
		}
		fi, err := view.Lstat(p)
		if err != nil {
			continue // gone: base's entries name it
		}
		if !fi.IsDir() { // fs.WalkDir would follow a link at its root
			if err := copyEntry(view, p, filepath.Join(shadow, p)); err != nil {
				return nil, fmt.Errorf("gitx: diff: %w", err)
			}
			addFile(filepath.ToSlash(p))
			continue
		}
		err = fs.WalkDir(vfs, filepath.ToSlash(p), func(rel string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // gone: base's entries name it
			}
			if d.IsDir() {
				if d.Name() == ".git" {
					return fs.SkipDir
				}
				return os.MkdirAll(filepath.Join(shadow, rel), 0o700)
			}
			if err := copyEntry(view, rel, filepath.Join(shadow, rel)); err != nil {
				return err
			}
			addFile(rel)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("gitx: diff: %w", err)
		}
	}
	for r := range rules {
		if _, err := os.Lstat(filepath.Join(shadow, r)); err == nil {
			continue
		}
		if fi, err := view.Lstat(r); err == nil && fi.Mode().IsRegular() {
			if err := copyEntry(view, r, filepath.Join(shadow, r)); err != nil {
				return nil, fmt.Errorf("gitx: diff: %w", err)
			}
		}
	}
	ls := <-listed
	pending = false
	if ls.err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", ls.err)
	}
	entries := ls.out
	for _, rec := range strings.Split(string(entries), "\x00") {
		if meta, p, ok := strings.Cut(rec, "\t"); ok {
			inBase[p] = strings.HasPrefix(meta, "160000 ")
		}
	}
	var fresh []string
	for _, p := range files {
		if _, ok := inBase[p]; !ok {
			fresh = append(fresh, p)
		}
	}
	for p, link := range inBase {
		if !link {
			addFile(p) // modified or deleted
		}
	}
	// git add refuses a pathspec that matches nothing, and one naming an
	// ignored file: name only files that exist or that base has, and leave
	// out new ignored ones, as `add --all -- .` would.
	anyIgnored := o.IncludeIgnored
	if !o.IncludeIgnored && len(fresh) > 0 {
		// check-ignore takes paths, not pathspecs: no literal magic for it.
		out, err := g.runInput(ctx, "", extra[:len(extra)-1], []byte(strings.Join(fresh, "\x00")+"\x00"), args("check-ignore", "-z", "--stdin")...)
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) { // 1: nothing ignored
			return nil, fmt.Errorf("gitx: diff: %w", err)
		}
		ignored := map[string]bool{}
		for _, p := range strings.Split(string(out), "\x00") {
			if p != "" {
				ignored[p] = true
			}
		}
		anyIgnored = len(ignored) > 0
		kept := files[:0]
		for _, p := range files {
			if !ignored[p] {
				kept = append(kept, p)
			}
		}
		files = kept
	}
	// Every entry base has under those paths is among the files: each is
	// added again from the shadow tree (an unchanged one to the same blob)
	// or removed, so the index needs none of base's entries first, but a
	// submodule's (its directory holds nothing to add).
	var links []byte
	for _, rec := range bytes.Split(entries, []byte{0}) {
		if bytes.HasPrefix(rec, []byte("160000 ")) {
			links = append(append(links, rec...), 0)
		}
	}
	if len(links) > 0 {
		if _, err := g.runInput(ctx, "", extra, links, args("update-index", "-z", "--index-info")...); err != nil {
			return nil, fmt.Errorf("gitx: diff: %w", err)
		}
	}
	if len(files) > 0 {
		// What `add --all` does for these files (ignored ones are out
		// already), without matching each against every other as pathspecs.
		list := []byte(strings.Join(files, "\x00") + "\x00")
		if _, err := g.runInput(ctx, "", extra, list, args("update-index", "--add", "--remove", "-z", "--stdin")...); err != nil {
			return nil, fmt.Errorf("gitx: diff: %w", err)
		}
	}
	// Entries and patch in one git process: a change set of a few files is
	// mostly the cost of starting git. The entries are read first and
	// checked; the patch after them streams to the caller.
	snap := &Snapshot{}
	patch, buf := o.patch()
	err = g.stream(ctx, extra, args(append([]string{"diff", "--cached", "-z", "--raw", "--patch", "--binary", "--no-renames", "--full-index", "--no-abbrev",
		"--no-color", "--no-ext-diff", "--no-textconv", base}, spec...)...), func(out *bufio.Reader) error {
		var err error
		if snap.Raw, err = readRaw(out); err != nil {
			return err
		}
		if o.Check != nil {
			if err := o.Check(snap.Raw); err != nil {
				return err
			}
		}
		_, err = io.Copy(patch, out)
		return err
	})
	var pe *paddock.Error
	if errors.As(err, &pe) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	snap.Diff = buf.Bytes()
	if anyIgnored {
		if snap.Ignored, err = ignoredIn(run, spec); err != nil {
			return nil, err
		}
	}
	return snap, nil
}

// baseHas tells which of paths base has, from dir, its files as checked
// out (DiffOptions.BaseFiles): known is false when dir cannot tell (a path
// is a directory there, or lies under an empty one: a submodule's checkout
// holds nothing), and git must be asked.
func baseHas(dir string, paths []string) (in map[string]bool, known bool) {
	in = map[string]bool{}
	if dir == "" {
		return in, false
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return in, false
	}
	defer root.Close()
	empty := map[string]bool{}
	for _, p := range paths {
		fi, err := root.Lstat(p)
		switch {
		case err == nil && fi.IsDir():
			return map[string]bool{}, false
		case err == nil:
			in[filepath.ToSlash(p)] = false
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return map[string]bool{}, false
		}
		for d := filepath.Dir(p); d != "." && d != "/"; d = filepath.Dir(d) {
			e, seen := empty[d]
			if !seen {
				e = isEmptyDir(root, d)
				empty[d] = e
			}
			if e {
				return map[string]bool{}, false
			}
		}
	}
	return in, true
}

// isEmptyDir reports whether d in root is a directory holding nothing.
func isEmptyDir(root *os.Root, d string) bool {
	f, err := root.Open(d)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		return false
	}
	_, err = f.Readdirnames(1)
	return errors.Is(err, io.EOF)
}

// readRaw reads the raw records at the head of `git diff -z --raw --patch`
// output (":modes ids status" NUL path NUL, each), and the NUL that ends
// them, leaving out positioned at the patch.
func readRaw(out *bufio.Reader) ([]byte, error) {
	var raw []byte
	for {
		b, err := out.Peek(1)
		if err == io.EOF {
			return raw, nil
		}
		if err != nil {
			return nil, err
		}
		if b[0] != ':' {
			if b[0] == 0 {
				out.ReadByte()
			}
			return raw, nil
		}
		for n := 0; n < 2; n++ { // the header, then the path
			rec, err := out.ReadBytes(0)
			if err != nil {
				return nil, fmt.Errorf("a truncated raw record: %w", err)
			}
			raw = append(raw, rec...)
		}
	}
}

// copyEntry copies a file (content and executable bit) or a symbolic link
// of root to dst.
func copyEntry(root *os.Root, src, dst string) error {
	fi, err := root.Lstat(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := root.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case fi.Mode().IsRegular():
		in, err := root.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm()|0o600)
		if err != nil {
			return err
		}
		// A plain read and write: copy_file_range and splice between an
		// overlay in another namespace and this file system cost more
		// than the copy.
		if _, err := io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{in}, make([]byte, 32<<10)); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	return nil // not content git keeps (a device, a socket, a whiteout)
}

// ExportTree writes the files of rev into dir, which must be empty, through
// a temporary index: no repository, no .git, nothing of the project's index.
func (g *Git) ExportTree(ctx context.Context, gitDir, rev, dir string) error {
	if err := CheckRef(rev); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "paddock-export-")
	if err != nil {
		return fmt.Errorf("gitx: export: %w", err)
	}
	defer os.RemoveAll(tmp)
	extra := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	for _, a := range [][]string{{"read-tree", rev}, {"checkout-index", "--all", "--force"}} {
		if _, err := g.runEnv(ctx, "", extra, append([]string{"--git-dir=" + gitDir, "--work-tree=" + dir}, a...)...); err != nil {
			return fmt.Errorf("gitx: export: %w", err)
		}
	}
	return nil
}

// runEnv is run with extra environment variables.
func (g *Git) runEnv(ctx context.Context, dir string, extra []string, args ...string) ([]byte, error) {
	return g.runInput(ctx, dir, extra, nil, args...)
}

// runInput is runEnv with stdin.
func (g *Git) runInput(ctx context.Context, dir string, extra []string, stdin []byte, args ...string) ([]byte, error) {
	var in io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	var stdout bytes.Buffer
	err := g.runIO(ctx, dir, extra, in, &stdout, args...)
	return stdout.Bytes(), err
}

// runIO runs git with stdin and stdout where the caller says: an *os.File
// is handed to git as it is, so what git writes there never passes
// through paddock's memory.
func (g *Git) runIO(ctx context.Context, dir string, extra []string, stdin io.Reader, stdout io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, g.Path, append(append([]string{}, hardening...), args...)...)
	cmd.Stdin = stdin
	cmd.Dir = dir
	cmd.Env = append(env(), extra...)
	// A git left running by a daemon killed mid-operation would race the
	// restarted daemon's rollback of the same directory.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stdout = stdout
	cmd.Stderr = &limitedBuffer{b: &stderr, n: 64 << 10}
	if err := cmd.Run(); err != nil {
		return &CommandError{Args: args, Stderr: stderr.String(), Err: err}
	}
	return nil
}

// stream runs git and hands its output to read as it comes. If read
// fails, git is stopped and read's error returned.
func (g *Git) stream(ctx context.Context, extra []string, args []string, read func(*bufio.Reader) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := g.runIO(ctx, "", extra, nil, pw, args...)
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

// Identity is who a commit is authored and committed by.
type Identity struct {
	Name, Email string
}

// ErrRefExists is returned by CommitToBranch when the branch already exists
// (or appeared while the commit was being made).
var ErrRefExists = errors.New("gitx: the branch already exists")

// IndexEntry is one path a commit made by CommitToBranch sets or removes.
type IndexEntry struct {
	Path string
	Mode string // a git mode; empty removes the path
	Blob string // the object the path gets (a submodule's commit)
	// File holds the content (a file's bytes, a link's target) of a blob
	// the repository may not have yet; git stores it and it must hash to Blob.
	File string
}

// CommitToBranch sets entries on commit base of the repository at gitDir,
// commits the result with base as its only parent, and creates
// refs/heads/branch pointing at it, with a compare-and-swap that fails if
// the branch exists. The user's working tree and index are never touched:
// the index is a temporary file. Contents are streamed from their files
// into git's object store (a large one straight into a pack), never held
// in memory. It returns the new commit.
func (g *Git) CommitToBranch(ctx context.Context, gitDir, base string, entries []IndexEntry, branch string, who Identity, message string) (string, error) {
	if err := CheckRef(base); err != nil {
		return "", err
	}
	if err := CheckRef(branch); err != nil {
		return "", err
	}
	if _, err := g.run(ctx, "", "check-ref-format", "refs/heads/"+branch); err != nil {
		return "", paddock.Errorf(paddock.CodeBadRequest, "invalid branch name %q", branch)
	}
	tmp, err := os.MkdirTemp("", "paddock-apply-")
	if err != nil {
		return "", fmt.Errorf("gitx: apply: %w", err)
	}
	defer os.RemoveAll(tmp)
	extra := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index"),
		"GIT_AUTHOR_NAME=" + who.Name, "GIT_AUTHOR_EMAIL=" + who.Email,
		"GIT_COMMITTER_NAME=" + who.Name, "GIT_COMMITTER_EMAIL=" + who.Email}
	git := func(stdin []byte, args ...string) (string, error) {
		out, err := g.runInput(ctx, "", extra, stdin, append([]string{"--git-dir=" + gitDir}, args...)...)
		return strings.TrimSpace(string(out)), err
	}
	if _, err := git(nil, "read-tree", base); err != nil {
		return "", fmt.Errorf("gitx: apply: %w", err)
	}
	var files []string
	var want []string
	for _, e := range entries {
		if e.File != "" {
			if strings.ContainsAny(e.File, "\n\r") {
				return "", fmt.Errorf("gitx: apply: content file %q", e.File)
			}
			files, want = append(files, e.File), append(want, e.Blob)
		}
	}
	if len(files) > 0 {
		// Above the threshold git streams a file into a pack instead of
		// reading it whole.
		out, err := git([]byte(strings.Join(files, "\n")+"\n"), "-c", "core.bigFileThreshold=32m", "hash-object", "-w", "--no-filters", "--stdin-paths")
		if err != nil {
			return "", fmt.Errorf("gitx: apply: %w", err)
		}
		got := strings.Fields(out)
		for i := range want {
			if i >= len(got) || got[i] != want[i] {
				return "", fmt.Errorf("gitx: apply: %s does not hold blob %s", files[i], want[i])
			}
		}
	}
	// Removals first: a file that becomes a directory, or a directory
	// that becomes a file, is then never both at once.
	var info bytes.Buffer
	for _, e := range entries {
		if e.Mode == "" {
			fmt.Fprintf(&info, "0 %s\t%s\x00", strings.Repeat("0", 40), e.Path)
		}
	}
	for _, e := range entries {
		if e.Mode != "" {
			fmt.Fprintf(&info, "%s %s\t%s\x00", e.Mode, e.Blob, e.Path)
		}
	}
	if info.Len() > 0 {
		if _, err := git(info.Bytes(), "update-index", "-z", "--index-info"); err != nil {
			return "", fmt.Errorf("gitx: apply: %w", err)
		}
	}
	tree, err := git(nil, "write-tree")
	if err != nil {
		return "", fmt.Errorf("gitx: apply: %w", err)
	}
	commit, err := git([]byte(message), "commit-tree", tree, "-p", base)
	if err != nil {
		return "", fmt.Errorf("gitx: apply: %w", err)
	}
	// The empty old value makes update-ref create the ref only if it does not exist.
	if _, err := git(nil, "update-ref", "-m", "paddock apply", "refs/heads/"+branch, commit, ""); err != nil {
		var ce *CommandError
		if errors.As(err, &ce) && (strings.Contains(ce.Stderr, "already exists") || strings.Contains(ce.Stderr, "cannot lock ref")) {
			return "", ErrRefExists
		}
		return "", fmt.Errorf("gitx: apply: %w", err)
	}
	return commit, nil
}

// FileAt returns the content of path at revision rev of the repository at
// gitDir, read from git's objects: what an agent wrote in a workspace never
// reaches it. A path that does not exist there is fs.ErrNotExist.
func (g *Git) FileAt(ctx context.Context, gitDir, rev, path string) ([]byte, error) {
	if err := CheckRef(rev); err != nil {
		return nil, err
	}
	if strings.HasPrefix(path, "-") || strings.Contains(path, ":") {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "invalid path %q", path)
	}
	out, err := g.run(ctx, "", "--git-dir="+gitDir, "cat-file", "blob", rev+":"+path)
	var ce *CommandError
	if errors.As(err, &ce) {
		return nil, fs.ErrNotExist
	}
	return out, err
}

// ErrMergeConflict is returned by MergeFile when the two sides change the
// same lines, or when git cannot merge the contents (binary files).
var ErrMergeConflict = errors.New("gitx: the changes overlap")

// MergeFile merges, line by line, what two sides made of base: ours (the
// file as it is now) and theirs (the approved change). It returns the
// merged content, or ErrMergeConflict; no conflict markers are ever
// returned. The contents go through private temporary files; no
// repository is read or written.
func (g *Git) MergeFile(ctx context.Context, base, ours, theirs []byte) ([]byte, error) {
	dir, err := os.MkdirTemp("", "paddock-merge-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	names := []string{"ours", "base", "theirs"}
	for i, b := range [][]byte{ours, base, theirs} {
		if err := os.WriteFile(filepath.Join(dir, names[i]), b, 0o600); err != nil {
			return nil, err
		}
	}
	out, err := g.run(ctx, dir, "merge-file", "-p", "--", names[0], names[1], names[2])
	var ce *CommandError
	var ee *exec.ExitError
	if errors.As(err, &ce) && errors.As(err, &ee) && ee.ExitCode() > 0 {
		// A positive status is the number of conflicts; binary contents
		// are refused with a message and a status too.
		return nil, ErrMergeConflict
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// copyIndex copies an index file with its modification time.
func copyIndex(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		return err
	}
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}
