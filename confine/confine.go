// Package confine resolves and opens every path an agent names, inside one
// workspace. Every working tool goes through it; nothing else in paddock opens
// a file on an agent's behalf.
//
// It is built on Go's os.Root: every open is relative to a directory
// descriptor, each component is opened without following symbolic links
// blindly, and a link may lead anywhere inside the root but never out of it.
// A path check made once and trusted later (the prefix check that let
// "/ws-evil" through, the link followed after the check) cannot happen: the
// kernel walks the path at the moment of use.
//
// # What it guarantees
//
//   - No operation reads, writes, creates or deletes anything outside the
//     root, whatever the path (.. chains, absolute paths, sibling prefixes,
//     links out, chains of links, dangling links, /proc/self links), and
//     whatever an attacker swaps concurrently: a race can redirect a call
//     within the workspace, never out of it.
//   - Reads and writes touch regular files and directories only. A FIFO,
//     socket or device is refused without blocking: the file is opened
//     non-blocking and checked on its descriptor.
//   - Writes replace the file atomically (a temporary file, fsynced, renamed
//     over the target), so a hard link or symbolic link at the target is
//     replaced, never written through, and a reader never sees half a file.
//   - Writes to protected paths are refused (see Policy): any path with a
//     component that folds to ".git", and the agent and editor configuration
//     that runs code when a person opens the project, at any depth and under
//     any spelling that folds to it (see Fold). The check is made on the
//     path as given and on the path its links resolve to, and holds for paths
//     that do not exist yet.
//   - Every refusal is a *paddock.Error with the rule that refused it, the
//     path as the agent gave it, and what it may do instead. No message names
//     a host path outside the workspace.
//
// # What it does not guarantee
//
//   - Bind mounts and mount points inside the root are crossed like any
//     directory; paddock never makes one inside a workspace.
//   - /proc, /sys and device files inside the root are not special to
//     os.Root; paddock refuses non-regular files instead, and absolute links
//     (such as a link to /proc/self/root) are refused outright.
//   - A hard link inside the root to a file outside it shares that file's
//     data. A link count above one is refused for reads, and writes replace
//     rather than write through, but a hard link made after the check is not.
//     The OS sandbox, which keeps the outside out of reach, is the guarantee.
//   - Protected-path checks run at the time of the call; a concurrent swap of
//     a directory for a link can redirect a write within the workspace, into
//     a protected directory. The sandbox's read-only mounts of protected paths
//     are the guarantee; these checks keep the honest path honest.
package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	"github.com/paddock-dev/paddock"
)

// Rules name why a path was refused; they are the errors' Rule.
const (
	RuleInvalidPath paddock.Rule = "invalid_path"      // empty, NUL, too long, or not a path
	RuleOutside     paddock.Rule = "outside_workspace" // it leads out of the workspace
	RuleProtected   paddock.Rule = "protected_path"    // policy keeps agents from writing it
	RuleNotRegular  paddock.Rule = "not_regular_file"  // a FIFO, socket, device, or a directory where a file is needed
	RuleHardLink    paddock.Rule = "hard_link"         // a regular file with other names, possibly outside
	RuleLinkLoop    paddock.Rule = "link_loop"         // too many levels of symbolic links
	RuleReadOnly    paddock.Rule = "read_only"         // the run may not write
	RuleNotFound    paddock.Rule = "not_found"         // no such file or directory
	RuleNotEmpty    paddock.Rule = "not_empty"         // a directory to remove holds something
	RuleExists      paddock.Rule = "exists"            // the path to create is taken
	RulePermission  paddock.Rule = "permission"        // the file system refused
)

// MaxPath is the longest path accepted, in bytes.
const MaxPath = 4096

// Refuse builds the structured refusal every rule uses.
func Refuse(code paddock.Code, rule paddock.Rule, given, msg, hint string) *paddock.Error {
	e := paddock.Errorf(code, "%s", msg).WithRule(rule).WithDetail("path", given)
	if hint != "" {
		e.WithDetail("hint", hint)
	}
	return e
}

// Root is a workspace opened for confined access.
type Root struct {
	dir    string // the workspace's path on the host
	prefix string // where this root sits in the workspace ("" for the workspace itself)
	root   *os.Root
	policy *Policy

	dirOnce sync.Once // the directory's own descriptor, for ReadEntry
	dirf    *os.File
	dirErr  error
}

// Open opens the workspace at dir. policy may be nil for the default.
func Open(dir string, policy *Policy) (*Root, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("confine: open workspace: %w", err)
	}
	if policy == nil {
		policy = DefaultPolicy()
	}
	return &Root{dir: dir, root: r, policy: policy}, nil
}

// Path is a path inside a Root: clean and relative to it, and as it was
// named, which is what a refusal shows (an agent's "README.md/" names a
// directory, and a refusal of "/ws/a" says "/ws/a"). Root.Rel makes one of
// a path an agent gave; Trusted one of a path paddock made.
type Path struct {
	given string
	rel   string
}

// Trusted is rel, a clean relative path of paddock's own making, named as
// itself.
func Trusted(rel string) Path { return Path{given: rel, rel: rel} }

// Given is the path as it was named.
func (p Path) Given() string { return p.given }

// Rel is the path clean, slash-separated and relative to the root ("."
// for the root itself).
func (p Path) Rel() string { return p.rel }

// Sub returns a Root for the directory p inside r, for walks that open many
// files in one directory (one openat each instead of one per component).
// Protected-path checks still see the whole path.
func (r *Root) Sub(p Path) (*Root, error) {
	given, rel := p.given, p.rel
	sub, err := r.root.OpenRoot(rel)
	if err != nil {
		return nil, mapErr(err, given)
	}
	return &Root{dir: path.Join(r.dir, rel), prefix: path.Join(r.prefix, rel), root: sub, policy: r.policy}, nil
}

// Close releases the root's descriptors.
func (r *Root) Close() error {
	if r.dirf != nil {
		r.dirf.Close()
	}
	return r.root.Close()
}

// OS returns the underlying os.Root, for walks (its FS is confined too).
func (r *Root) OS() *os.Root { return r.root }

// Rel validates p as an agent gave it and returns it as a Path, clean,
// slash-separated and relative to the root ("." for the root itself).
// Absolute paths are accepted only lexically inside the workspace's own
// path.
func (r *Root) Rel(p string) (Path, error) {
	rel, err := r.rel(p)
	if err != nil {
		return Path{}, err
	}
	return Path{given: p, rel: rel}, nil
}

func (r *Root) rel(p string) (string, error) {
	switch {
	case p == "":
		return "", Refuse(paddock.CodeBadRequest, RuleInvalidPath, p, "the path is empty", "name a path relative to the workspace root, such as src/main.go")
	case strings.IndexByte(p, 0) >= 0:
		return "", Refuse(paddock.CodeBadRequest, RuleInvalidPath, p, "the path contains a NUL byte", "")
	case len(p) > MaxPath:
		return "", Refuse(paddock.CodeBadRequest, RuleInvalidPath, p[:64]+"…", fmt.Sprintf("the path is longer than %d bytes", MaxPath), "")
	}
	if path.IsAbs(p) {
		rel, ok := strings.CutPrefix(path.Clean(p), strings.TrimSuffix(r.dir, "/"))
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
			return "", Refuse(paddock.CodeForbidden, RuleOutside, p, "the path is outside the workspace",
				"use a path relative to the workspace root")
		}
		p = strings.TrimPrefix(rel, "/")
		if p == "" {
			p = "."
		}
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", Refuse(paddock.CodeForbidden, RuleOutside, p, "the path leads out of the workspace", "use a path inside the workspace")
	}
	return clean, nil
}

// mapErr turns an error of os.Root into a public refusal about given.
func mapErr(err error, given string) error {
	if err == nil {
		return nil
	}
	var pe *paddock.Error
	if errors.As(err, &pe) {
		return err
	}
	switch {
	case strings.Contains(err.Error(), "path escapes from parent"):
		return Refuse(paddock.CodeForbidden, RuleOutside, given, "the path leads out of the workspace (through .. or a symbolic link)",
			"use a path inside the workspace; links may point only to relative places inside it")
	case errors.Is(err, fs.ErrNotExist):
		return Refuse(paddock.CodeNotFound, RuleNotFound, given, "no such file or directory", "list the directory to see what is there")
	case errors.Is(err, syscall.ELOOP):
		return Refuse(paddock.CodeBadRequest, RuleLinkLoop, given, "too many levels of symbolic links", "")
	case errors.Is(err, syscall.ENOTDIR):
		return Refuse(paddock.CodeBadRequest, RuleInvalidPath, given, "a component of the path is not a directory", "")
	case errors.Is(err, syscall.EISDIR):
		return Refuse(paddock.CodeBadRequest, RuleNotRegular, given, "the path is a directory", "use list to see a directory")
	case errors.Is(err, syscall.ENOTEMPTY):
		return Refuse(paddock.CodeConflict, RuleNotEmpty, given, "the directory is not empty", "delete it with recursive set")
	case errors.Is(err, fs.ErrExist):
		return Refuse(paddock.CodeConflict, RuleExists, given, "the path already exists", "")
	case errors.Is(err, syscall.ENAMETOOLONG):
		return Refuse(paddock.CodeBadRequest, RuleInvalidPath, given, "the path or a component of it is too long", "")
	case errors.Is(err, syscall.EINVAL):
		return Refuse(paddock.CodeBadRequest, RuleInvalidPath, given, "the path is not valid", "")
	case errors.Is(err, fs.ErrPermission):
		return Refuse(paddock.CodeForbidden, RulePermission, given, "permission denied", "")
	}
	// Unknown: keep the detail for the log, show nothing of it.
	return &paddock.Error{Code: paddock.CodeInternal, Message: "file operation failed", Err: err}
}
