package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// maxStatements bounds the statements a store keeps prepared: the queries
// built at run time (an IN list of as many placeholders as items) are
// kept too, up to this many in all.
const maxStatements = 512

// statements keeps the queries of one database prepared: SQLite parses and
// plans a statement each time it is prepared, a tenth of a command's time
// in the daemon (docs/PERFORMANCE.md). A query is prepared on its first
// use after the transaction that first ran it ends: preparing on the
// database needs a connection of its own, and the write database has one,
// which that transaction holds. database/sql prepares a kept statement
// again on each other connection it is used on, once.
type statements struct {
	db *sql.DB

	mu     sync.Mutex
	kept   map[string]*sql.Stmt
	wanted map[string]bool
	closed bool
}

func newStatements(db *sql.DB) *statements {
	return &statements{db: db, kept: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

// get is q's prepared statement, or nil if it is not prepared yet (it
// will be, by the next prepareWanted).
func (s *statements) get(q string) *sql.Stmt {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.kept[q]
	if st == nil && !s.closed && len(s.kept)+len(s.wanted) < maxStatements {
		s.wanted[q] = true
	}
	return st
}

// prepareWanted prepares the queries run since it was last called; it is
// called when no transaction of this goroutine holds a connection. A query
// that does not prepare is not kept (its error is its caller's, as it ran).
func (s *statements) prepareWanted(ctx context.Context) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if len(s.wanted) == 0 || s.closed {
		s.mu.Unlock()
		return
	}
	wanted := s.wanted
	s.wanted = map[string]bool{}
	s.mu.Unlock()
	for q := range wanted {
		st, err := s.db.PrepareContext(context.WithoutCancel(ctx), q)
		if err != nil {
			continue
		}
		s.mu.Lock()
		if s.kept[q] != nil || s.closed {
			st.Close()
		} else {
			s.kept[q] = st
		}
		s.mu.Unlock()
	}
}

// close closes every kept statement; none is kept after.
func (s *statements) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for _, st := range s.kept {
		errs = append(errs, st.Close())
	}
	s.kept = nil
	return errors.Join(errs...)
}

// query runs q in t, prepared anew: a kept statement is one SQLite
// statement per connection, which cannot step two result sets at once, and
// rows stay open while their caller reads them (a query run again inside
// its own rows' loop failed so: "bad parameter or other API misuse").
func (t *Tx) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(t.ctx(ctx), q, args...)
}

// queryRead is query with q's kept statement, for a caller that reads
// its rows to their end, and runs nothing else in t meanwhile, before it
// returns (a list read whole on every call: a run's access requests).
func (t *Tx) queryRead(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx = t.ctx(ctx)
	if st := t.stmts.get(q); st != nil {
		return t.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, q, args...)
}

// queryRow and exec run q in t, its kept statement if there is one: each
// is done with it when it returns (a Row is scanned at once).
func (t *Tx) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	ctx = t.ctx(ctx)
	if st := t.stmts.get(q); st != nil {
		return t.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, q, args...)
}

func (t *Tx) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx = t.ctx(ctx)
	if st := t.stmts.get(q); st != nil {
		return t.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, q, args...)
}
