package gitx

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// ExportTreeIndexed is ExportTree that also keeps the index git made while
// writing the files (at index): it holds their stat data, so a git that
// later looks at the same files (a run's, through an overlay) need not
// read them again to know them unchanged.
func (g *Git) ExportTreeIndexed(ctx context.Context, gitDir, rev, dir, index string) error {
	if err := CheckRef(rev); err != nil {
		return err
	}
	if index == "" {
		tmp, err := os.MkdirTemp("", "paddock-export-")
		if err != nil {
			return fmt.Errorf("gitx: export: %w", err)
		}
		defer os.RemoveAll(tmp)
		index = filepath.Join(tmp, "index")
	}
	extra := []string{"GIT_INDEX_FILE=" + index}
	for _, a := range [][]string{{"read-tree", rev}, {"checkout-index", "--all", "--force"}} {
		if _, err := g.runEnv(ctx, "", extra, append([]string{"--git-dir=" + gitDir, "--work-tree=" + dir}, a...)...); err != nil {
			return fmt.Errorf("gitx: export: %w", err)
		}
	}
	return nil
}
