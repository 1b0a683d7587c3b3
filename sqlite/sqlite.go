// Package sqlite is paddock's default state store: an embedded SQLite database
// through a pure-Go driver (modernc.org/sqlite), so the paddock binary stays
// static and needs nothing installed.
//
// # Durability
//
// The database runs in WAL mode with synchronous=FULL: when Update returns, the
// transaction, and every event it appended, is on disk. A process killed at any
// moment leaves either the whole transaction or none of it.
//
// # Concurrency
//
// Writers are serialized through one connection whose transactions begin
// IMMEDIATE, so two writers never deadlock on a lock upgrade and per-run event
// seqs are assigned one after the other. Readers use a separate pool and see
// the last committed state.
//
// # Migrations
//
// The schema is embedded (migrations/NNNN_name.sql) and applied in order at
// Open; PRAGMA user_version records how far. A database newer than this binary
// is refused rather than guessed at.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is a paddock.Store on one SQLite file.
type Store struct {
	write *sql.DB
	read  *sql.DB
	path  string
}

var _ paddock.Store = (*Store)(nil)

// Open opens (creating if needed) the database at path and brings its schema
// up to date.
func Open(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	dsn := func(txlock string) string {
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Add("_pragma", "foreign_keys(ON)")
		q.Set("_txlock", txlock)
		return "file:" + (&url.URL{Path: abs}).EscapedPath() + "?" + q.Encode()
	}
	w, err := sql.Open("sqlite", dsn("immediate"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	w.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite", dsn("deferred"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	r.SetMaxOpenConns(4)
	s := &Store{write: w, read: r, path: abs}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error {
	return errors.Join(s.read.Close(), s.write.Close())
}

// SchemaVersion returns the database's schema version.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.read.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}

func (s *Store) migrate(ctx context.Context) error {
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	type mig struct {
		version int
		name    string
	}
	var all []mig
	for _, e := range entries {
		n, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(n)
		if !ok || err != nil {
			return fmt.Errorf("sqlite: migration %s: name must start with a number", e.Name())
		}
		all = append(all, mig{v, e.Name()})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].version < all[j].version })

	conn, err := s.write.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	defer conn.Close()
	var current int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return fmt.Errorf("sqlite: read schema version of %s: %w", s.path, err)
	}
	if len(all) > 0 && current > all[len(all)-1].version {
		return fmt.Errorf("sqlite: %s has schema version %d, newer than this paddock knows (%d); use a newer paddock",
			s.path, current, all[len(all)-1].version)
	}
	for _, m := range all {
		if m.version <= current {
			continue
		}
		body, err := migrations.ReadFile("migrations/" + m.name)
		if err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("sqlite: migration %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("sqlite: migration %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version)); err != nil {
			tx.Rollback()
			return fmt.Errorf("sqlite: migration %s: %w", m.name, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("sqlite: migration %s: %w", m.name, err)
		}
	}
	return nil
}

// View runs fn in a read-only transaction.
func (s *Store) View(ctx context.Context, fn func(paddock.Tx) error) error {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	defer tx.Rollback()
	return fn(&Tx{tx: tx})
}

// Update runs fn in a write transaction and commits it if fn returns nil.
func (s *Store) Update(ctx context.Context, fn func(paddock.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	if err := fn(&Tx{tx: tx}); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}
