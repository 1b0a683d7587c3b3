package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/paddock-dev/paddock/internal/fsat"
	"golang.org/x/sys/unix"
)

// SeedStatCache fills cache, a DiffWorkTree cache, with the files of
// workTree as git has just checked them out at base, so that the first
// DiffWorkTree of it hashes only the files changed since: what git's
// index, written by its checkout, spares git status. It returns how many
// files it recorded.
//
// It trusts that every file of the work tree that base has, with the same
// mode, holds base's content. Call it right after the checkout and before
// anything else can write the work tree (an agent, a restore of files):
// what it records is what it finds then, under base's blob ids. Left out,
// and so hashed by the first diff as before:
//
//   - a file a checkout may have converted: one whose attributes (base's
//     .gitattributes files) name an eol other than lf, or crlf, ident,
//     working-tree-encoding or a filter. A clone's checkout reads no other
//     attributes and no config that converts (see CloneShared);
//   - a symbolic link: a link's blob can hold what symlink(2) cuts short
//     (a NUL);
//   - every file of a work tree on a file system that folds case (the
//     clone's core.ignorecase): two of base's paths can be one file there;
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
	if v := g.fileConfig(ctx, filepath.Join(workTree, ".git", "config"), "core.ignorecase"); v != "" && v != "false" {
		return 0, nil
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
