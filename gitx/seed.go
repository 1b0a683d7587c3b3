package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock/internal/fsat"
	"golang.org/x/sys/unix"
)

// SeedStatCache fills cache, a DiffWorkTree cache, with the files of
// workTree (a clone or a worktree) as git has just checked them out at
// base, so that the first DiffWorkTree of it hashes only the files changed
// since: what git's index, written by its checkout, spares git status. It
// returns how many files it recorded.
//
// It trusts that every file of the work tree that base has, with the same
// mode, holds base's content. Call it right after the checkout and before
// anything else can write the work tree (an agent, a restore of files):
// what it records is what it finds then, under base's blob ids. Left out,
// and so hashed by the first diff as before:
//
//   - a file a checkout may have converted: one whose attributes (base's
//     .gitattributes files) name an eol other than lf, or crlf, ident,
//     working-tree-encoding or a filter;
//   - a symbolic link: a link's blob can hold what symlink(2) cuts short
//     (a NUL);
//   - every file of a work tree whose repository's config may convert on
//     checkout (core.autocrlf but input, core.eol but lf, attr.tree, a
//     conditional include or a worktree's own config, which can differ
//     for the worktree's checkout; an attributes file the config names is
//     not read: see hardening), whose info/attributes is not empty (a
//     worktree's are the project's; a clone's config and attributes are
//     its own, made by CloneShared), or on a file system that folds case
//     (core.ignorecase, or markerDir's file system: two of base's paths
//     can be one file there);
//   - a file changed in the same tick of the file system's clock as a
//     marker file made in markerDir (on the work tree's file system) after
//     the walk. Any later change of a file gives it a ctime at least the
//     marker's, and so a stat the cache does not hold.
func SeedStatCache(ctx context.Context, g *Git, gitDir, workTree, base, cache, markerDir string, exclude []string) (int, error) {
	if err := CheckRef(base); err != nil {
		return 0, err
	}
	if cache == "" {
		return 0, errors.New("gitx: seed: no cache directory")
	}
	if why, err := convertsOnCheckout(ctx, g, gitDir, workTree); err != nil || why != "" {
		return 0, err
	}
	if folds, err := foldsCase(markerDir); err != nil || folds {
		return 0, err
	}
	d, err := g.newDiff(ctx, gitDir, base, 0, DiffOptions{Cache: cache, IncludeIgnored: true})
	if err != nil {
		return 0, err
	}
	defer d.close()
	bt, err := d.baseTree(base, cache)
	if err != nil {
		return 0, err
	}
	entries := bt.entries
	root, err := fsat.OpenDir(workTree)
	if err != nil {
		return 0, fmt.Errorf("gitx: seed: %w", err)
	}
	defer unix.Close(root)
	t := &treeReader{root: root, base: bt, ownGit: true, exclude: exclude, keptLinks: map[string]bool{}}
	if err := t.walkAll(); err != nil {
		return 0, fmt.Errorf("gitx: seed: %w", err)
	}
	t.sortFiles()
	limit, err := clockTick(markerDir)
	if err != nil {
		return 0, err
	}
	converted, err := d.converted(base, cache, entries)
	if err != nil {
		return 0, err
	}
	for _, f := range t.files {
		b, ok := entries[f.path]
		if f.why == "" && ok && b.mode == f.mode && f.mode != "120000" && b.oid != "" && !converted[f.path] {
			f.oid = b.oid
		}
	}
	c := &statCache{file: filepath.Join(cache, "stat"), format: d.format.name, entries: map[string]cached{}}
	n, err := c.write(t.files, limit)
	if err != nil {
		return 0, fmt.Errorf("gitx: seed: %w", err)
	}
	return n, nil
}

// convertsOnCheckout names what, besides base's .gitattributes files (see
// converted), may have made workTree's checkout write a file otherwise
// than its blob holds it, or two of base's paths one file; empty when
// nothing can. It reads the config the checkout read (a worktree's is
// the project's: its own .git names the run's git directory as the
// sandbox shows it) and holds it to what is known to convert nothing;
// anything else, or config that can differ between the project's git
// directory and the worktree's own (a conditional include, a worktree's
// own config), names itself. (The checkout ran with hardening's config
// too, listed last, which wins: its core.attributesFile is /dev/null.)
func convertsOnCheckout(ctx context.Context, g *Git, gitDir, workTree string) (string, error) {
	at, common := repoAt(workTree), filepath.Join(workTree, ".git")
	if fi, err := os.Lstat(common); err != nil || !fi.IsDir() {
		at, common = gitDirAt(gitDir), gitDir
	}
	out, err := g.run(ctx, at, "config", "-z", "--list")
	if err != nil {
		return "", fmt.Errorf("gitx: seed: %w", err)
	}
	config := map[string]string{}
	for _, kv := range strings.Split(string(out), "\x00") {
		k, v, valued := strings.Cut(kv, "\n")
		if !valued {
			v = "true" // a key alone is a boolean that is on
		}
		k = strings.ToLower(k)
		if strings.HasPrefix(k, "includeif.") {
			return k, nil
		}
		config[k] = strings.ToLower(v)
	}
	off := func(k string, more ...string) bool {
		v, set := config[k]
		return !set || slices.Contains(append([]string{"false", "no", "off", "0", ""}, more...), v)
	}
	switch {
	case !off("core.autocrlf", "input"): // input converts only what is added
		return "core.autocrlf", nil
	case !off("core.eol", "lf", "native"):
		return "core.eol", nil
	case !off("core.attributesfile", os.DevNull):
		return "core.attributesFile", nil
	case !off("core.ignorecase"):
		return "core.ignorecase", nil
	case !off("extensions.worktreeconfig"):
		return "extensions.worktreeConfig", nil
	}
	if _, set := config["attr.tree"]; set {
		return "attr.tree", nil
	}
	if fi, err := os.Stat(filepath.Join(common, "info", "attributes")); err == nil && fi.Size() > 0 {
		return "info/attributes", nil
	}
	return "", nil
}

// foldsCase reports whether the file system of dir takes a name in
// another case for the same file. A worktree's checkout knows only the
// project's core.ignorecase, which its own file system may belie.
func foldsCase(dir string) (bool, error) {
	f, err := os.CreateTemp(dir, ".paddock-case-")
	if err != nil {
		return false, fmt.Errorf("gitx: seed: %w", err)
	}
	defer os.Remove(f.Name())
	f.Close()
	_, err = os.Lstat(filepath.Join(dir, strings.ToUpper(filepath.Base(f.Name()))))
	return err == nil, nil
}

// clockTick is the ctime the file system in dir gives a file made now:
// every change from now on gives a file at least this ctime.
func clockTick(dir string) (int64, error) {
	f, err := os.CreateTemp(dir, ".paddock-tick-")
	if err != nil {
		return 0, fmt.Errorf("gitx: seed: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, fmt.Errorf("gitx: seed: %w", err)
	}
	return st.Ctim.Nano(), nil
}

// converted names base's files whose checkout may not hold their blob's
// bytes, by the attributes base's .gitattributes files give them: none
// when base has no .gitattributes.
func (d *diffRun) converted(base, cache string, entries map[string]baseEntry) (map[string]bool, error) {
	var paths bytes.Buffer
	attributes := false
	for p, e := range entries {
		if path.Base(p) == ".gitattributes" {
			attributes = true
		}
		if e.mode == "100644" || e.mode == "100755" {
			paths.WriteString(p + "\x00")
		}
	}
	if !attributes {
		return nil, nil
	}
	// Base's own attributes, from its index: the scratch repository's
	// info/attributes, which unsets them all for a diff, goes first.
	if err := os.WriteFile(filepath.Join(d.tmp, "repo", "info", "attributes"), nil, 0o600); err != nil {
		return nil, fmt.Errorf("gitx: seed: %w", err)
	}
	if err := d.baseIndex(base, cache); err != nil {
		return nil, err
	}
	out, err := d.git(paths.Bytes(), "check-attr", "--cached", "-z", "--stdin", "eol", "crlf", "ident", "working-tree-encoding", "filter")
	if err != nil {
		return nil, fmt.Errorf("gitx: seed: %w", err)
	}
	converted := map[string]bool{}
	fields := bytes.Split(out, []byte{0})
	for i := 0; i+2 < len(fields); i += 3 {
		p, attr, v := string(fields[i]), string(fields[i+1]), string(fields[i+2])
		if v == "unspecified" || v == "unset" || (attr == "eol" && v == "lf") {
			continue
		}
		converted[p] = true
	}
	return converted, nil
}
