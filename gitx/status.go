package gitx

import (
	"bytes"
	"context"
)

// Uncommitted counts the paths of the work tree at dir that a run made
// from a revision does not have: changed against HEAD or the index, or
// untracked and not ignored. It only reads: GIT_OPTIONAL_LOCKS=0 keeps git
// from refreshing the index, so the project stays byte-identical.
func (g *Git) Uncommitted(ctx context.Context, dir string) (int, error) {
	out, err := g.run(ctx, repoAt(dir), "status", "--porcelain=v1", "-z", "--untracked-files=normal", "--ignore-submodules=dirty")
	if err != nil {
		return 0, err
	}
	n := 0
	for rest := out; len(rest) > 0; n++ {
		entry, after, _ := bytes.Cut(rest, []byte{0})
		rest = after
		if len(entry) > 0 && (entry[0] == 'R' || entry[0] == 'C') {
			_, rest, _ = bytes.Cut(rest, []byte{0}) // the name it came from
		}
	}
	return n, nil
}
