package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
)

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
	// The repository is real's own .git, named: git never looks for one
	// above it, nor takes real itself for a bare repository.
	at := repoAt(real)
	if _, err := os.Lstat(filepath.Join(real, ".git")); err != nil {
		if _, err := g.line(ctx, gitDirAt(real), "rev-parse", "--git-dir"); err == nil {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "%s is a bare repository; a project needs a work tree", path)
		}
		if top := enclosingRepo(real); top != "" {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "%s is inside a repository but not its top; declare %s instead", path, top).
				WithDetail("top_level", top)
		}
		return nil, paddock.Errorf(paddock.CodeBadRequest, "%s is not a git repository", path)
	}
	common, err := g.line(ctx, at, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		if gitSaid(err, 128, "not a git repository") {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "%s is not a git repository", path)
		}
		return nil, inspectFailed(path, err)
	}
	// HEAD names a commit: a lookup, not a walk (Inspect runs before every
	// run is made; see identity.go for the fingerprint). --verify --quiet
	// exits 1, saying nothing, when it names none.
	if _, err := g.line(ctx, at, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err != nil {
		if gitSaid(err, 1, "") {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "%s has no commits yet; commit something first", path)
		}
		return nil, inspectFailed(path, err)
	}
	return &Repo{Root: real, CommonDir: common}, nil
}

// gitSaid reports whether err is git's own answer, exiting with code and
// saying said: not a git that could not start, was stopped or timed out,
// which says nothing of the repository (a daemon under a load of 200
// concurrent bootstraps once called its project "not a git repository").
func gitSaid(err error, code int, said string) bool {
	var ce *CommandError
	var ee *exec.ExitError
	return errors.As(err, &ce) && errors.As(err, &ee) && ee.ExitCode() == code && strings.Contains(ce.Stderr, said)
}

// inspectFailed is the error of an Inspect whose git failed to answer.
func inspectFailed(path string, err error) error {
	var pe *paddock.Error
	if errors.As(err, &pe) {
		return err // git timed out: already internal, and says so
	}
	return &paddock.Error{Code: paddock.CodeInternal, Message: "reading the repository at " + path + " failed; try again", Err: err}
}

// enclosingRepo is the nearest directory above dir that holds a .git, or
// "": where to tell an operator to declare a project instead. It asks the
// file system, not git, which would read what it found.
func enclosingRepo(dir string) string {
	for d := filepath.Dir(dir); d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
	}
	return ""
}

// Resolved is a ref resolved to a commit.
type Resolved struct {
	SHA    string
	Branch string // the branch name, when the ref named a local branch
}

// Resolve resolves ref in the repository whose work tree is dir to a commit.
func (g *Git) Resolve(ctx context.Context, dir, ref string) (*Resolved, error) {
	if err := CheckRef(ref); err != nil {
		return nil, err
	}
	at := repoAt(dir)
	sha, err := g.line(ctx, at, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil || sha == "" {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "unknown revision %q", ref)
	}
	r := &Resolved{SHA: sha}
	if full, err := g.line(ctx, at, "rev-parse", "--symbolic-full-name", ref); err == nil {
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
	// clone opens src itself (src/.git, never a directory above it) and
	// makes dst; it runs in dst's parent, which paddock owns.
	if _, err := g.run(ctx, where{dir: filepath.Dir(dst)}, "clone", "--shared", "--no-checkout", "--quiet", "--template=", "--", src, dst); err != nil {
		return fmt.Errorf("gitx: clone: %w", err)
	}
	if _, err := g.run(ctx, repoAt(dst), "remote", "remove", "origin"); err != nil {
		return fmt.Errorf("gitx: clone: %w", err)
	}
	if _, err := g.run(ctx, repoAt(dst), "checkout", "--quiet", "--detach", sha, "--"); err != nil {
		return fmt.Errorf("gitx: checkout: %w", err)
	}
	return nil
}

// worktreeMu holds, per repository, one add or remove of a worktree of it at
// a time in this process: git does not take them at once. An add reads every
// worktree's record (a half-made one fails it: "failed to read
// .git/worktrees/R/commondir"), and the remove of the last record removes
// .git/worktrees under an add about to make its own ("could not create
// directory"). Two adoptions of worktree runs of one project at once failed
// so in 2 of 9 runs of lifecycle's TestConcurrentAdoptions; creates and
// cleanups of runs meet the same way.
var worktreeMu sync.Map // repository path → *sync.Mutex

func lockWorktrees(repo string) (unlock func()) {
	mu, _ := worktreeMu.LoadOrStore(filepath.Clean(repo), new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

// WorktreeAdd adds a detached worktree of repo at path, checked out at sha.
func (g *Git) WorktreeAdd(ctx context.Context, repo, path, sha string) error {
	if err := CheckRef(sha); err != nil {
		return err
	}
	defer lockWorktrees(repo)()
	if _, err := g.run(ctx, repoAt(repo), "worktree", "add", "--quiet", "--detach", "--", path, sha); err != nil {
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
	defer lockWorktrees(repo)()
	_, gitErr := g.run(ctx, repoAt(repo), "worktree", "remove", "--force", "--force", "--", path)
	var ce *CommandError
	if errors.As(gitErr, &ce) && strings.Contains(ce.Stderr, "is not a working tree") {
		gitErr = nil
	}
	common, err := g.line(ctx, repoAt(repo), "rev-parse", "--path-format=absolute", "--git-common-dir")
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

// ExportTree writes the files of rev into dir, which must be empty, through
// a temporary index: no repository, no .git, nothing of the project's index.
func (g *Git) ExportTree(ctx context.Context, gitDir, rev, dir string) error {
	return g.ExportTreeIndexed(ctx, gitDir, rev, dir, "")
}

// Identity is who a commit is authored and committed by.
type Identity struct {
	Name, Email string
	// When, if set, is the commit's author and committer date (else now):
	// the same entries committed on the same parent with the same message
	// at the same When make the same commit, wherever it is written.
	When time.Time
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
// in memory. Before the branch is made, the commit is checked to differ
// from base by exactly the entries (a *TreeMismatchError otherwise). It
// returns the new commit.
func (g *Git) CommitToBranch(ctx context.Context, gitDir, base string, entries []IndexEntry, branch string, who Identity, message string) (string, error) {
	if err := CheckRef(branch); err != nil {
		return "", err
	}
	if _, err := g.run(ctx, nowhere, "check-ref-format", "refs/heads/"+branch); err != nil {
		return "", paddock.Errorf(paddock.CodeBadRequest, "invalid branch name %q", branch)
	}
	commit, err := g.CommitTree(ctx, gitDir, base, entries, who, message)
	if err != nil {
		return "", err
	}
	// The empty old value makes update-ref create the ref only if it does not exist.
	// The reflog's entry is the committer's.
	ident := []string{"GIT_COMMITTER_NAME=" + who.Name, "GIT_COMMITTER_EMAIL=" + who.Email}
	if _, err := g.runInput(ctx, gitDirAt(gitDir), ident, nil, "update-ref", "-m", "paddock apply", "refs/heads/"+branch, commit, ""); err != nil {
		var ce *CommandError
		if errors.As(err, &ce) && (strings.Contains(ce.Stderr, "already exists") || strings.Contains(ce.Stderr, "cannot lock ref")) {
			return "", ErrRefExists
		}
		return "", fmt.Errorf("gitx: apply: %w", err)
	}
	return commit, nil
}

// CommitTree is CommitToBranch without the branch: the commit of entries
// on base, checked, in the object store of the repository at gitDir,
// which no ref names (the repository's refs, index and working tree are
// untouched; git's gc prunes it once nothing holds it).
func (g *Git) CommitTree(ctx context.Context, gitDir, base string, entries []IndexEntry, who Identity, message string) (string, error) {
	// Into the repository's own store, with nothing else to read from: an
	// object git found in another store (WithObjects) it would not write.
	return g.commitTree(withoutObjects(ctx), gitDir, nil, base, entries, who, message)
}

// CommitTreeInto is CommitTree writing every object it makes into
// objectDir, an object directory paddock owns (made if need be), which
// borrows the objects of the repository at gitDir through its
// info/alternates: that repository's files, refs and object store are
// not written at all. The commit is read back with WithObjects(ctx,
// objectDir).
func (g *Git) CommitTreeInto(ctx context.Context, gitDir, objectDir, base string, entries []IndexEntry, who Identity, message string) (string, error) {
	if err := checkObjectDir(objectDir); err != nil {
		return "", err
	}
	projectObjects, err := filepath.Abs(filepath.Join(gitDir, "objects"))
	if err != nil {
		return "", fmt.Errorf("gitx: objects: %w", err)
	}
	if err := checkObjectDir(projectObjects); err != nil {
		return "", err
	}
	for _, d := range []string{"info", "pack"} {
		if err := os.MkdirAll(filepath.Join(objectDir, d), 0o755); err != nil {
			return "", fmt.Errorf("gitx: objects: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(objectDir, "info", "alternates"), []byte(projectObjects+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("gitx: objects: %w", err)
	}
	return g.commitTree(WithObjects(ctx, objectDir), gitDir, []string{"GIT_OBJECT_DIRECTORY=" + objectDir}, base, entries, who, message)
}

// commitTree is CommitTree with more environment for the commands that
// write (where their objects go).
func (g *Git) commitTree(ctx context.Context, gitDir string, writeEnv []string, base string, entries []IndexEntry, who Identity, message string) (string, error) {
	if err := CheckRef(base); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "paddock-apply-")
	if err != nil {
		return "", fmt.Errorf("gitx: apply: %w", err)
	}
	defer os.RemoveAll(tmp)
	extra := append([]string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index"),
		"GIT_AUTHOR_NAME=" + who.Name, "GIT_AUTHOR_EMAIL=" + who.Email,
		"GIT_COMMITTER_NAME=" + who.Name, "GIT_COMMITTER_EMAIL=" + who.Email}, writeEnv...)
	if !who.When.IsZero() {
		date := fmt.Sprintf("@%d +0000", who.When.Unix())
		extra = append(extra, "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date)
	}
	git := func(stdin []byte, args ...string) (string, error) {
		out, err := g.runInput(ctx, gitDirAt(gitDir), extra, stdin, args...)
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
	if err := g.checkCommit(ctx, gitDir, base, commit, entries); err != nil {
		return "", err
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
	out, err := g.run(ctx, gitDirAt(gitDir), "cat-file", "blob", rev+":"+path)
	var ce *CommandError
	if errors.As(err, &ce) {
		return nil, fs.ErrNotExist
	}
	return out, err
}

// FilesAt lists every file path at revision rev of the repository at
// gitDir (slash-separated, as git stores them), read from git's objects.
func (g *Git) FilesAt(ctx context.Context, gitDir, rev string) ([]string, error) {
	if err := CheckRef(rev); err != nil {
		return nil, err
	}
	out, err := g.run(ctx, gitDirAt(gitDir), "ls-tree", "-r", "-z", "--name-only", "--full-tree", rev)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, p := range bytes.Split(out, []byte{0}) {
		if len(p) > 0 {
			files = append(files, string(p))
		}
	}
	return files, nil
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
	out, err := g.run(ctx, where{dir: dir}, "merge-file", "-p", "--", names[0], names[1], names[2])
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

// TreeEntry is what a revision holds at a path: its mode and object.
type TreeEntry struct {
	Mode, Blob string
}

// EntriesAt returns what revision rev of the repository at gitDir holds at
// each of paths (names taken literally, never as patterns); a path the
// revision does not hold is not in the map, and a directory is given with
// mode 040000.
func (g *Git) EntriesAt(ctx context.Context, gitDir, rev string, paths []string) (map[string]TreeEntry, error) {
	if err := CheckRef(rev); err != nil {
		return nil, err
	}
	out := map[string]TreeEntry{}
	for len(paths) > 0 {
		n := min(len(paths), 500)
		args := append([]string{"ls-tree", "-z", "--full-tree", rev, "--"}, paths[:n]...)
		b, err := g.runInput(ctx, gitDirAt(gitDir), []string{"GIT_LITERAL_PATHSPECS=1"}, nil, args...)
		if err != nil {
			return nil, fmt.Errorf("gitx: ls-tree: %w", err)
		}
		for _, rec := range bytes.Split(b, []byte{0}) {
			meta, path, ok := bytes.Cut(rec, []byte{'\t'})
			f := strings.Fields(string(meta))
			if !ok || len(f) != 3 {
				continue
			}
			out[string(path)] = TreeEntry{Mode: f[0], Blob: f[2]}
		}
		paths = paths[n:]
	}
	return out, nil
}

// ErrRefMoved is MoveBranch's error when the branch is no longer where
// the caller saw it.
var ErrRefMoved = errors.New("gitx: the branch moved")

// MoveBranch moves refs/heads/branch of the repository at gitDir from old
// to new, only if it is still at old: one compare-and-swap, so that a
// commit someone else made meanwhile is never lost (ErrRefMoved then).
func (g *Git) MoveBranch(ctx context.Context, gitDir, branch, newCommit, oldCommit string, who Identity, reason string) error {
	for _, r := range []string{branch, newCommit, oldCommit} {
		if err := CheckRef(r); err != nil {
			return err
		}
	}
	ident := []string{"GIT_COMMITTER_NAME=" + who.Name, "GIT_COMMITTER_EMAIL=" + who.Email}
	if _, err := g.runInput(ctx, gitDirAt(gitDir), ident, nil, "update-ref", "-m", reason, "refs/heads/"+branch, newCommit, oldCommit); err != nil {
		var ce *CommandError
		if errors.As(err, &ce) && (strings.Contains(ce.Stderr, "is at") || strings.Contains(ce.Stderr, "cannot lock ref") || strings.Contains(ce.Stderr, "unable to resolve")) {
			return ErrRefMoved
		}
		return fmt.Errorf("gitx: moving %s: %w", branch, err)
	}
	return nil
}

// TreeOf returns the tree of commit in the repository at gitDir.
func (g *Git) TreeOf(ctx context.Context, gitDir, commit string) (string, error) {
	if err := CheckRef(commit); err != nil {
		return "", err
	}
	return g.line(ctx, gitDirAt(gitDir), "rev-parse", "--verify", "--quiet", "--end-of-options", commit+"^{tree}")
}

// DiffCommits is the unified diff from commit a to commit b of the
// repository at gitDir, of paths only (taken literally), with no external
// diff driver or text conversion.
func (g *Git) DiffCommits(ctx context.Context, gitDir, a, b string, paths []string) ([]byte, error) {
	for _, r := range []string{a, b} {
		if err := CheckRef(r); err != nil {
			return nil, err
		}
	}
	args := append([]string{"diff", "--no-ext-diff", "--no-textconv", "--no-color", "--binary", a, b, "--"}, paths...)
	out, err := g.runInput(ctx, gitDirAt(gitDir), []string{"GIT_LITERAL_PATHSPECS=1"}, nil, args...)
	if err != nil {
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	return out, nil
}

// CheckedOut lists the branches checked out in any working tree of the
// repository whose work tree is dir: its own and every linked one
// (git worktree). Moving one of them moves it under someone's files.
func (g *Git) CheckedOut(ctx context.Context, dir string) ([]string, error) {
	out, err := g.run(ctx, repoAt(dir), "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, fmt.Errorf("gitx: worktree list: %w", err)
	}
	var branches []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if b, ok := strings.CutPrefix(string(f), "branch refs/heads/"); ok {
			branches = append(branches, b)
		}
	}
	return branches, nil
}

// TreeBlobs lists every file of revision rev of the repository at gitDir
// with its object id (a submodule's commit too).
func (g *Git) TreeBlobs(ctx context.Context, gitDir, rev string) (map[string]string, error) {
	if err := CheckRef(rev); err != nil {
		return nil, err
	}
	out, err := g.run(ctx, gitDirAt(gitDir), "ls-tree", "-r", "-z", "--full-tree", rev)
	if err != nil {
		return nil, fmt.Errorf("gitx: ls-tree: %w", err)
	}
	m := map[string]string{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		meta, p, ok := bytes.Cut(rec, []byte{'\t'})
		f := strings.Fields(string(meta))
		if ok && len(f) == 3 {
			m[string(p)] = f[2]
		}
	}
	return m, nil
}
