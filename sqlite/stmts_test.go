package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestStatementsKeptPrepared: a query is kept prepared after the
// transaction that first ran it, on both databases, and runs the same kept
// or not; concurrent reads and writes share the kept statements; a query
// that does not prepare is not kept and keeps its error.
func TestStatementsKeptPrepared(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	create := func(name string) error {
		return s.Update(ctx, func(tx paddock.Tx) error {
			return tx.CreateProject(ctx, &paddock.Project{Name: name, Root: "/src/" + name})
		})
	}
	list := func() int {
		var n int
		if err := s.View(ctx, func(tx paddock.Tx) error {
			ps, err := tx.Projects(ctx)
			n = len(ps)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := create("a"); err != nil {
		t.Fatal(err)
	}
	if n := list(); n != 1 {
		t.Fatalf("%d projects, want 1", n)
	}
	if err := s.View(ctx, func(tx paddock.Tx) error { _, err := tx.Project(ctx, "a"); return err }); err != nil {
		t.Fatal(err)
	}
	kept := func(st *statements) int {
		st.mu.Lock()
		defer st.mu.Unlock()
		return len(st.kept)
	}
	if kept(s.readStmts) == 0 || kept(s.writeStmts) == 0 {
		t.Fatalf("kept after one use: %d read, %d write; want some of each", kept(s.readStmts), kept(s.writeStmts))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Add(2)
		go func() { defer wg.Done(); errs <- create(fmt.Sprintf("p%d", i)) }()
		go func() { defer wg.Done(); list() }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := list(); n != 21 {
		t.Fatalf("%d projects, want 21", n)
	}
	if err := create("a"); err == nil {
		t.Fatal("a second project a was created through a kept statement")
	}
	for range 2 {
		err := s.View(ctx, func(tx paddock.Tx) error {
			var n int
			return tx.(*Tx).queryRow(ctx, "SELEC nothing").Scan(&n)
		})
		if err == nil {
			t.Fatal("a query that does not parse ran")
		}
	}
	// A query run again inside its own rows' loop, as kept (the second
	// time) as not (a kept statement cannot step two result sets at once).
	for pass := range 2 {
		var outer, inner int
		err := s.View(ctx, func(tx paddock.Tx) error {
			const q = `SELECT name FROM projects WHERE name > ? ORDER BY name`
			rows, err := tx.(*Tx).query(ctx, q, "p")
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var name string
				if err := rows.Scan(&name); err != nil {
					return err
				}
				outer++
				in, err := tx.(*Tx).query(ctx, q, name)
				if err != nil {
					return err
				}
				for in.Next() {
					inner++
				}
				if err := in.Close(); err != nil {
					return err
				}
			}
			return rows.Err()
		})
		if err != nil || outer != 20 || inner != 190 {
			t.Fatalf("pass %d: %d outer rows, %d inner, %v; want 20, 190", pass, outer, inner, err)
		}
	}
	s.readStmts.mu.Lock()
	defer s.readStmts.mu.Unlock()
	if s.readStmts.kept["SELEC nothing"] != nil {
		t.Fatal("a query that does not prepare was kept")
	}
}
