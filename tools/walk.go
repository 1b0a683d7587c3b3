package tools

import (
	"context"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock/confine"
	ignore "github.com/sabhiram/go-gitignore"
)

// maxIgnoreFile bounds a .gitignore paddock reads.
const maxIgnoreFile = 1 << 20

// entry is one thing a walk found.
type entry struct {
	rel string        // path relative to the workspace root
	dir *confine.Root // the directory holding it, open during the callback
	d   fs.DirEntry
	wg  *sync.WaitGroup
}

// hold keeps e.dir open after the callback returns, until done is called.
func (e entry) hold() (done func()) {
	e.wg.Add(1)
	return e.wg.Done
}

// ignoreRule is the .gitignore of one directory.
type ignoreRule struct {
	base string // the directory, relative to the workspace root
	gi   *ignore.GitIgnore
}

func (g ignoreRule) matches(rel string, isDir bool) bool {
	p := rel
	if g.base != "." {
		p = strings.TrimPrefix(rel, g.base+"/")
	}
	if isDir {
		p += "/"
	}
	return g.gi.MatchesPath(p)
}

// walk visits the tree below start (a clean relative path), depth-first in
// name order, never following links and never entering a directory that
// folds to .git. Unless all is set, what .gitignore files ignore is skipped.
// maxDepth < 0 means unlimited. fn returning fs.SkipDir skips a directory;
// fs.SkipAll stops the walk.
func walk(ctx context.Context, r *confine.Root, start string, maxDepth int, all bool, fn func(e entry) error) error {
	var rules []ignoreRule
	if !all {
		// The .gitignore files of the directories above start apply too.
		if start != "." {
			parts := strings.Split(start, "/")
			for i := 0; i < len(parts); i++ {
				base := path.Join(parts[:i]...)
				if base == "" {
					base = "."
				}
				rules = appendRule(r, rules, base, path.Join(base, ".gitignore"))
			}
		}
	}
	sub, err := r.Sub(start, start)
	if err != nil {
		return nil // vanished or not a directory: nothing to walk
	}
	err = walkDir(ctx, sub, start, 0, maxDepth, all, rules, fn)
	if err == fs.SkipAll {
		return nil
	}
	return err
}

// appendRule adds the rules of the .gitignore at file (a path through r) that
// govern base, a directory relative to the workspace root.
func appendRule(r *confine.Root, rules []ignoreRule, base, file string) []ignoreRule {
	f, fi, err := r.OpenRead(file, file)
	if err != nil {
		return rules
	}
	defer f.Close()
	if fi.Size() > maxIgnoreFile {
		return rules
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIgnoreFile))
	if err != nil {
		return rules
	}
	return append(rules, ignoreRule{base: base, gi: ignore.CompileIgnoreLines(strings.Split(string(b), "\n")...)})
}

func ignored(rules []ignoreRule, rel string, isDir bool) bool {
	// Later (deeper) files win, as in git; go-gitignore handles negation within a file.
	for i := len(rules) - 1; i >= 0; i-- {
		if rules[i].matches(rel, isDir) {
			return true
		}
	}
	return false
}

// walkDir walks sub, the open directory dir (relative to the workspace
// root); it closes sub when it and every holder of its entries are done.
// Each subdirectory is opened relative to its parent: one openat, no path walk.
func walkDir(ctx context.Context, sub *confine.Root, dir string, depth, maxDepth int, all bool, rules []ignoreRule, fn func(e entry) error) error {
	var held sync.WaitGroup
	defer func() {
		// Close once every holder is done, without making the walk wait.
		go func() { held.Wait(); sub.Close() }()
	}()
	entries, err := fs.ReadDir(sub.OS().FS(), ".")
	if err != nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !all {
		rules = appendRule(sub, rules, dir, ".gitignore")
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, d := range entries {
		if confine.IsDotGit(d.Name()) {
			continue
		}
		rel := path.Join(dir, d.Name())
		if !all && ignored(rules, rel, d.IsDir()) {
			continue
		}
		err := fn(entry{rel: rel, dir: sub, d: d, wg: &held})
		if err == fs.SkipDir {
			continue
		}
		if err != nil {
			return err
		}
		if d.IsDir() && (maxDepth < 0 || depth+1 < maxDepth) {
			child, err := sub.Sub(rel, d.Name())
			if err != nil {
				continue // swapped for something else since the listing
			}
			if err := walkDir(ctx, child, rel, depth+1, maxDepth, all, rules, fn); err != nil {
				return err
			}
		}
	}
	return nil
}
