package gitx

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ExportTreeIndexed is ExportTree that also keeps the index git made while
// writing the files (at index): it holds their stat data, so a git that
// later looks at the same files (a run's, through an overlay) need not
// read them again to know them unchanged.
func (g *Git) ExportTreeIndexed(ctx context.Context, gitDir, rev, dir, index string) error {
	if err := CheckRef(rev); err != nil {
		return err
	}
	keep := index != ""
	if !keep {
		tmp, err := os.MkdirTemp("", "paddock-export-")
		if err != nil {
			return fmt.Errorf("gitx: export: %w", err)
		}
		defer os.RemoveAll(tmp)
		index = filepath.Join(tmp, "index")
	}
	extra := []string{"GIT_INDEX_FILE=" + index}
	steps := [][]string{{"read-tree", rev}, {"checkout-index", "--all", "--force"}}
	for _, a := range steps {
		if _, err := g.runInput(ctx, where{gitDir: gitDir, workTree: dir}, extra, nil, a...); err != nil {
			return fmt.Errorf("gitx: export: %w", err)
		}
	}
	if !keep {
		return nil
	}
	// Files written in the same clock tick as the index are "racily clean"
	// to git, which then keeps no size for them and reads each again at
	// every status. Once the clock has moved on, a refresh reads them once
	// and writes an index newer than every file.
	time.Sleep(20 * time.Millisecond)
	if _, err := g.runInput(ctx, where{gitDir: gitDir, workTree: dir}, extra, nil, "update-index", "-q", "--refresh"); err != nil {
		return fmt.Errorf("gitx: export: %w", err)
	}
	return nil
}
