package tools

import (
	"context"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/gitignore"
)

// maxIgnoreFile bounds a .gitignore paddock reads; a larger one is not read.
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

// walk visits the tree below start (a clean relative path), depth-first in
// name order, never following links and never entering a directory that
// folds to .git. Unless all is set, what the .gitignore files ignore is
// left out as git leaves it out (package gitignore): each file is compiled
// once, entries are matched by name as the walk reaches them, and an
// ignored directory is never entered. A start inside an ignored directory
// yields nothing, as git check-ignore would call all of it ignored.
// maxDepth < 0 means unlimited. fn returning fs.SkipDir skips a directory;
// fs.SkipAll stops the walk.
func walk(ctx context.Context, r *confine.Root, start string, maxDepth int, all bool, fn func(e entry) error) error {
	var parent *gitignore.Dir // start's parent, when start is not the top
	name := "."
	if start != "." && !all {
		// The .gitignore files of the directories above start apply too.
		parts := strings.Split(start, "/")
		parent = gitignore.Root(ignoreFileIn(r, "."))
		for i, part := range parts[:len(parts)-1] {
			if parent.Ignored(part, true) {
				return nil
			}
			parent = parent.Child(part, ignoreFileIn(r, path.Join(parts[:i+1]...)))
		}
		name = parts[len(parts)-1]
		if parent.Ignored(name, true) {
			return nil
		}
	}
	sub, err := r.Sub(confine.Trusted(start))
	if err != nil {
		return nil // vanished or not a directory: nothing to walk
	}
	err = walkDir(ctx, sub, start, name, 0, maxDepth, all, parent, fn)
	if err == fs.SkipAll {
		return nil
	}
	return err
}

// ignoreFileIn reads the .gitignore of dir, a directory above a walk's start.
func ignoreFileIn(r *confine.Root, dir string) *gitignore.File {
	sub, err := r.Sub(confine.Trusted(dir))
	if err != nil {
		return nil
	}
	defer sub.Close()
	return ignoreFile(sub)
}

// ignoreFile reads and compiles dir's .gitignore, if it has one. As git
// does, it follows no link; as every read of the tools, it reads only a
// regular file with one name (git would read a hard-linked one too).
func ignoreFile(dir *confine.Root) *gitignore.File {
	b, skipped, err := dir.ReadEntry(".gitignore", maxIgnoreFile, nil)
	if err != nil || skipped {
		return nil
	}
	return gitignore.Parse(b)
}

// walkDir walks sub, the open directory dir (relative to the workspace
// root) whose name is name; it closes sub when it and every holder of its
// entries are done. Each subdirectory is opened relative to its parent: one
// openat, no path walk. parent governs dir's parent (nil for the top);
// with all set, it is not used.
func walkDir(ctx context.Context, sub *confine.Root, dir, name string, depth, maxDepth int, all bool, parent *gitignore.Dir, fn func(e entry) error) error {
	var held sync.WaitGroup
	defer func() {
		// Close once every holder is done, without making the walk wait.
		go func() { held.Wait(); sub.Close() }()
	}()
	entries, err := sub.ReadDir()
	if err != nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var ign *gitignore.Dir
	if !all {
		var file *gitignore.File
		if _, found := slices.BinarySearchFunc(entries, ".gitignore", func(e fs.DirEntry, n string) int {
			return strings.Compare(e.Name(), n)
		}); found {
			file = ignoreFile(sub)
		}
		if parent == nil {
			ign = gitignore.Root(file)
		} else {
			ign = parent.Child(name, file)
		}
	}
	for _, d := range entries {
		if dotGit(d.Name()) {
			continue
		}
		if !all && ign.Ignored(d.Name(), d.IsDir()) {
			continue
		}
		rel := path.Join(dir, d.Name())
		err := fn(entry{rel: rel, dir: sub, d: d, wg: &held})
		if err == fs.SkipDir {
			continue
		}
		if err != nil {
			return err
		}
		if d.IsDir() && (maxDepth < 0 || depth+1 < maxDepth) {
			// Named by its own name in sub: a refusal here is never shown.
			child, err := sub.Sub(confine.Trusted(d.Name()))
			if err != nil {
				continue // swapped for something else since the listing
			}
			if err := walkDir(ctx, child, rel, d.Name(), depth+1, maxDepth, all, ign, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// dotGit is confine.IsDotGit, without its folding for the names that need
// none: an ASCII name folds by case alone, so one without a 'g' cannot be
// taken for .git (nor git~1). Most names of a tree are such.
func dotGit(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 0x80 || c == 'g' || c == 'G' {
			return confine.IsDotGit(name)
		}
	}
	return false
}
