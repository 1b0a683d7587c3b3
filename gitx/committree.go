package gitx

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
)

// checkCommit verifies that commit differs from base by exactly entries:
// each entry's path with its new mode and blob, or gone, and no other path.
// git's index replaces a file by a directory, or a directory by a file,
// without a word (update-index drops the entry in the way); a set of
// entries that would make it drop one that the set does not name is
// refused here, before any ref names the commit.
func (g *Git) checkCommit(ctx context.Context, gitDir, base, commit string, entries []IndexEntry) error {
	want := make(map[string]IndexEntry, len(entries))
	for _, e := range entries {
		want[e.Path] = e
	}
	seen := map[string]bool{}
	var bad []string
	args := []string{"diff-tree", "-r", "-z", "--no-renames", "--raw", base, commit}
	err := g.stream(ctx, gitDirAt(gitDir), nil, args, func(r *bufio.Reader) error {
		for {
			meta, err := r.ReadString(0)
			if err == io.EOF && meta == "" {
				return nil
			}
			if err != nil {
				return err
			}
			p, err := r.ReadString(0)
			if err != nil {
				return err
			}
			p = strings.TrimSuffix(p, "\x00")
			f := strings.Fields(strings.TrimPrefix(strings.TrimSuffix(meta, "\x00"), ":"))
			if len(f) != 5 {
				return fmt.Errorf("unexpected diff-tree output %q", meta)
			}
			newMode, newBlob := f[1], f[3]
			e, ok := want[p]
			seen[p] = true
			switch {
			case !ok:
				bad = append(bad, p+" changed, though no entry names it")
			case e.Mode == "" && newMode != "000000":
				bad = append(bad, p+" is still there")
			case e.Mode != "" && (newMode != e.Mode || newBlob != e.Blob):
				bad = append(bad, fmt.Sprintf("%s is %s %s, not %s %s", p, newMode, newBlob, e.Mode, e.Blob))
			}
		}
	})
	if err != nil {
		return fmt.Errorf("gitx: apply: checking the commit: %w", err)
	}
	for _, e := range entries {
		if !seen[e.Path] {
			bad = append(bad, e.Path+" did not change")
		}
	}
	if len(bad) > 0 {
		return &TreeMismatchError{Paths: bad}
	}
	return nil
}

// TreeMismatchError is returned by CommitToBranch when the commit it made
// is not the base with exactly the entries set: no branch is made.
type TreeMismatchError struct{ Paths []string }

func (e *TreeMismatchError) Error() string {
	return "gitx: the commit is not the base with exactly the change set's entries: " + strings.Join(e.Paths, "; ")
}
