package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/sqlite"
	"github.com/paddock-dev/paddock/storetest"
)

// BenchmarkAppends: what a notice adds to an append (storetest.BenchAppends).
func BenchmarkAppends(b *testing.B) {
	storetest.BenchAppends(b, func(b *testing.B, dir string) paddock.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
