package gitx

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// fileConfig is the value of key in the config file file alone (no
// includes), as git reads it; "" when it is not set. Answers are kept
// while the file's size and modification time stay the same.
func (g *Git) fileConfig(ctx context.Context, file, key string) string {
	fi, err := os.Stat(file)
	if err != nil {
		return ""
	}
	ck := configKey{file, key}
	if c, ok := configCache.Load(ck); ok {
		if c := c.(configEntry); c.size == fi.Size() && c.mod.Equal(fi.ModTime()) {
			return c.value
		}
	}
	v, err := g.line(ctx, gitDirAt(filepath.Dir(file)), "config", "--file", file, "--get", key)
	if err != nil {
		v = ""
	}
	configCache.Store(ck, configEntry{fi.Size(), fi.ModTime(), v})
	return v
}

type configKey struct{ file, key string }

type configEntry struct {
	size  int64
	mod   time.Time
	value string
}

var configCache sync.Map
