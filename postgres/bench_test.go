package postgres_test

import (
	"context"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/postgres"
	"github.com/paddock-dev/paddock/postgres/pgtest"
	"github.com/paddock-dev/paddock/storetest"
)

// BenchmarkAppends: what a notice (its insert and the notice lock) adds
// to an append (storetest.BenchAppends).
func BenchmarkAppends(b *testing.B) {
	storetest.BenchAppends(b, func(b *testing.B, dir string) paddock.Store {
		s, err := postgres.Open(context.Background(), pgtest.Need(b).Database(b, dir))
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
