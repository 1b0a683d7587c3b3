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

// CutDiffs makes every diff of a whole index cut into up to n parts
// (however few its changes), and tells parts how many each was cut into,
// until the function it returns puts the rule back.
func CutDiffs(n int, parts func(int)) (restore func()) {
	old := diffParts
	diffParts, testHookParts = func(int) int { return n }, parts
	return func() { diffParts, testHookParts = old, nil }
}

// CutParts is cutParts.
func CutParts(info []byte, n int) [][]byte { return cutParts(info, n) }

// ForgetBases empties the memo of base listings: the next diff reads its
// listing from its cache, or from git.
func ForgetBases() { treeMemo = newMemo[*baseTree](memoEntries) }
