package gitx

import "context"

// DiffPathsWholeIndex is DiffPaths that diffs a whole index of base
// whatever the number of paths (as it does from fullIndexPaths on).
func (g *Git) DiffPathsWholeIndex(ctx context.Context, gitDir, workTree, base string, paths []string, o DiffOptions) (*Snapshot, error) {
	o.wholeIndex = true
	return g.DiffPaths(ctx, gitDir, workTree, base, paths, o)
}

// SetTestHookBeforeHash sets testHookBeforeHash (nil: none).
func SetTestHookBeforeHash(f func(path string)) { testHookBeforeHash = f }

// DiffWorkTreeWholeIndex is DiffWorkTree that diffs a whole index of base
// however few the changes (as it does from fullIndexPaths on).
func (g *Git) DiffWorkTreeWholeIndex(ctx context.Context, gitDir, workTree, base string, o DiffOptions) (*Snapshot, error) {
	o.wholeIndex = true
	return g.DiffWorkTree(ctx, gitDir, workTree, base, o)
}
