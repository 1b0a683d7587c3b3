package gitx

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
)

// RevTree reads one revision of a repository by its names and files, from
// git's objects (it is a changeset.Tree): what a workspace holds never
// reaches it.
type RevTree struct {
	ctx         context.Context
	g           *Git
	gitDir, rev string
}

// Tree returns the tree of revision rev of the repository at gitDir, read
// with ctx.
func (g *Git) Tree(ctx context.Context, gitDir, rev string) *RevTree {
	return &RevTree{ctx: ctx, g: g, gitDir: gitDir, rev: rev}
}

// File returns what the regular file p holds at the revision:
// fs.ErrNotExist for a path it does not have, a directory, a symbolic link
// (as a checkout's reader sees none) or a submodule. Any name is taken
// literally, a colon or a leading dash too.
func (t *RevTree) File(p string) ([]byte, error) {
	es, err := t.g.EntriesAt(t.ctx, t.gitDir, t.rev, []string{p})
	if err != nil {
		return nil, err
	}
	e, ok := es[p]
	if !ok || (e.Mode != "100644" && e.Mode != "100755") {
		return nil, fs.ErrNotExist
	}
	out, err := t.g.run(t.ctx, gitDirAt(t.gitDir), "cat-file", "blob", e.Blob)
	if err != nil {
		return nil, fmt.Errorf("gitx: cat-file: %w", err)
	}
	return out, nil
}

// Names returns the names the revision holds directly in each of dirs (""
// is the top), one ls-tree for the top and one for up to 500 other
// directories; a directory the revision does not have is left out.
func (t *RevTree) Names(dirs []string) (map[string][]string, error) {
	if err := CheckRef(t.rev); err != nil {
		return nil, err
	}
	want := map[string]bool{}
	var spec []string
	out := map[string][]string{}
	// A full commit id's names never change (no replace object applies:
	// see env): each directory's are kept, under the repository and the
	// commit, and a change set asks for the same ones each time.
	full := isHex(t.rev) && (len(t.rev) == 40 || len(t.rev) == 64)
	key := func(d string) string { return "names\x00" + t.gitDir + "\x00" + t.rev + "\x00" + d }
	var asked []string
	kept := map[string]bool{} // answered from the memo: no listing adds to them
	for _, d := range dirs {
		if full && !want[d] {
			if v, ok := namesMemo.get(key(d), fileStat{}); ok {
				want[d], kept[d] = true, true
				if v != nil {
					out[d] = slices.Clone(v) // the caller's to change
				}
				continue
			}
			asked = append(asked, d)
		}
		switch {
		case want[d]:
		case d == "":
			want[d] = true
			b, err := t.g.run(t.ctx, gitDirAt(t.gitDir), "ls-tree", "-z", "--name-only", "--full-tree", t.rev)
			if err != nil {
				return nil, fmt.Errorf("gitx: ls-tree: %w", err)
			}
			for _, n := range bytes.Split(b, []byte{0}) {
				if len(n) > 0 {
					out[""] = append(out[""], string(n))
				}
			}
		default:
			want[d] = true
			spec = append(spec, d+"/")
		}
	}
	// Given a/ and a/b/, git lists a/b's files rather than a/b itself:
	// each directory's names are the first names below it of what is
	// listed.
	seen := map[string]bool{}
	for len(spec) > 0 {
		n := min(len(spec), 500)
		args := append([]string{"ls-tree", "-z", "--name-only", "--full-tree", t.rev, "--"}, spec[:n]...)
		b, err := t.g.runInput(t.ctx, gitDirAt(t.gitDir), []string{"GIT_LITERAL_PATHSPECS=1"}, nil, args...)
		if err != nil {
			return nil, fmt.Errorf("gitx: ls-tree: %w", err)
		}
		for _, rec := range bytes.Split(b, []byte{0}) {
			p := string(rec)
			for child, d := p, path.Dir(p); d != "."; child, d = d, path.Dir(d) {
				if want[d] && !kept[d] && !seen[child] {
					seen[child] = true
					out[d] = append(out[d], path.Base(child))
				}
			}
		}
		spec = spec[n:]
	}
	for _, d := range asked {
		namesMemo.put(key(d), fileStat{}, len(out[d]), slices.Clone(out[d])) // nil: the commit has no such directory
	}
	return out, nil
}
