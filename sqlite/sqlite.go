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
// UpdateLazy (paddock.LazyUpdater) commits with synchronous=NORMAL: written to
// the WAL, not fsync'd. A process killed keeps it (the WAL's pages are the
// kernel's); a power loss may lose it, until the next Update's fsync of the
// WAL, which holds it too, makes it durable. A batch with any Update in it is
// committed as an Update.
//
// # Concurrency
//
// Writers are serialized through one connection whose transactions begin
// IMMEDIATE, so two writers never deadlock on a lock upgrade and per-run event
// seqs are assigned one after the other. Readers use a separate pool and see
// the last committed state.
//
// Concurrent Updates share one transaction (group commit), each in its own
// savepoint. The driver answers a cancelled context by interrupting SQLite,
// and SQLite answers an interrupted write by rolling back the whole
// transaction, so a write never runs under its caller's cancellation: a
// caller that gives up is told after its fn returns, and only its savepoint
// is rolled back.
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
	"sync"

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
	// The queries of each database, kept prepared.
	readStmts, writeStmts *statements

	// Group commit: concurrent Updates share one transaction and one fsync.
	mu      sync.Mutex
	queue   []*update
	leading bool
	// synchronous is the write connection's synchronous setting as the
	// leader last set it ("" unknown: set before the next commit); only
	// the leader reads or writes it.
	synchronous string
}

// update is one Update waiting for its batch.
type update struct {
	ctx  context.Context
	fn   func(paddock.Tx) error
	done chan error
	lazy bool // UpdateLazy's: committed without an fsync if all its batch is
}

// MaxBatch bounds how many Updates share one commit.
const MaxBatch = 256

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
	s := &Store{write: w, read: r, path: abs, readStmts: newStatements(r), writeStmts: newStatements(w)}
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
	return errors.Join(s.readStmts.close(), s.writeStmts.close(), s.read.Close(), s.write.Close())
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
	defer tx.Rollback() // fn may panic
	err = fn(&Tx{tx: tx, stmts: s.readStmts})
	tx.Rollback()
	s.readStmts.prepareWanted(ctx)
	return err
}

// Update runs fn in a write transaction and commits it if fn returns nil;
// when it returns, fn's changes are durable.
//
// Concurrent Updates are committed together (group commit): the first caller
// to find no batch in progress leads, runs every queued fn in one
// transaction, each inside its own savepoint, and commits once, so that N
// concurrent writers pay one fsync instead of N. A fn that fails is rolled
// back to its savepoint and changes nothing; the others are unaffected. Each
// fn sees the effects of those before it, as if they had run one by one.
//
// ctx does not interrupt fn's statements (an interrupted statement would roll
// back the whole batch). A caller whose ctx ends before its fn runs, or while
// it runs, gets ctx's error and its fn's changes are rolled back.
func (s *Store) Update(ctx context.Context, fn func(paddock.Tx) error) error {
	return s.enqueue(&update{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

// AppendEvents appends evs to run runID, in order, in one Update, their
// seqs taken in one statement (paddock.EventAppender).
func (s *Store) AppendEvents(ctx context.Context, runID string, evs []paddock.EventDraft) (out []*paddock.Event, err error) {
	if len(evs) == 0 {
		return nil, nil
	}
	err = s.Update(ctx, func(tx paddock.Tx) (err error) {
		out, err = appendEvents(ctx, tx.(*Tx), runID, evs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

var _ paddock.EventAppender = (*Store)(nil)

// UpdateLazy is Update without waiting for the disk
// (paddock.LazyUpdater): its commit survives the daemon's crash, and a
// power loss only once the next Update's has been made. It shares a
// batch as Update does; a batch with an Update in it is fsync'd.
func (s *Store) UpdateLazy(ctx context.Context, fn func(paddock.Tx) error) error {
	return s.enqueue(&update{ctx: ctx, fn: fn, done: make(chan error, 1), lazy: true})
}

func (s *Store) enqueue(u *update) error {
	s.mu.Lock()
	s.queue = append(s.queue, u)
	lead := !s.leading
	if lead {
		s.leading = true
	}
	s.mu.Unlock()
	if lead {
		s.lead()
	}
	return <-u.done
}

// lead commits batches until the queue is empty.
func (s *Store) lead() {
	for {
		s.mu.Lock()
		n := min(len(s.queue), MaxBatch)
		batch := s.queue[:n:n]
		s.queue = s.queue[n:]
		if n == 0 {
			s.leading = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.commit(batch)
	}
}

func (s *Store) commit(batch []*update) {
	errs := make([]error, len(batch))
	fail := func(err error) {
		for _, u := range batch {
			u.done <- err
		}
	}
	mode := "NORMAL"
	for _, u := range batch {
		if !u.lazy {
			mode = "FULL"
			break
		}
	}
	if err := s.setSynchronous(mode); err != nil {
		fail(err)
		return
	}
	tx, err := s.write.BeginTx(context.Background(), nil)
	if err != nil {
		fail(fmt.Errorf("sqlite: begin: %w", err))
		return
	}
	ok := 0
	bg := context.Background()
	t := &Tx{tx: tx, shared: true, stmts: s.writeStmts}
	// A batch of one needs no savepoint: its fn failing rolls back the
	// transaction, which holds nothing else (two statements fewer for a
	// writer alone, the common case).
	alone := len(batch) == 1
	for i, u := range batch {
		if err := u.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if alone {
			if errs[i] = runFn(u.fn, t); errs[i] == nil && u.ctx.Err() != nil {
				errs[i] = u.ctx.Err()
			}
			if errs[i] == nil {
				ok++
			}
			continue
		}
		if _, err := t.exec(bg, "SAVEPOINT paddock_update"); err != nil {
			errs[i] = fmt.Errorf("sqlite: savepoint: %w", err)
			continue
		}
		errs[i] = runFn(u.fn, t)
		if errs[i] == nil && u.ctx.Err() != nil {
			// The caller gave up while fn ran: it hears so, and what fn did
			// is undone, so that an error always means nothing was written.
			errs[i] = u.ctx.Err()
		}
		if errs[i] != nil {
			if _, err := t.exec(bg, "ROLLBACK TO paddock_update"); err != nil {
				tx.Rollback()
				fail(fmt.Errorf("sqlite: rollback to savepoint: %w", err))
				return
			}
		} else {
			ok++
		}
		if _, err := t.exec(bg, "RELEASE paddock_update"); err != nil {
			tx.Rollback()
			fail(fmt.Errorf("sqlite: release savepoint: %w", err))
			return
		}
	}
	if ok == 0 {
		tx.Rollback()
	} else if err := tx.Commit(); err != nil {
		fail(fmt.Errorf("sqlite: commit: %w", err))
		return
	}
	for i, u := range batch {
		u.done <- errs[i]
	}
	s.writeStmts.prepareWanted(bg)
}

// setSynchronous sets the write connection's synchronous setting to mode
// (FULL or NORMAL) before a batch, if it is not so already. The one write
// connection is idle between batches, and one the pool makes anew is FULL
// (Open's); a setting that fails leaves it unknown, to be set again.
func (s *Store) setSynchronous(mode string) error {
	if s.synchronous == mode {
		return nil
	}
	s.synchronous = ""
	if _, err := s.write.ExecContext(context.Background(), "PRAGMA synchronous = "+mode); err != nil {
		return fmt.Errorf("sqlite: synchronous %s: %w", mode, err)
	}
	s.synchronous = mode
	return nil
}

// runFn runs fn, turning a panic into an error so that one bad fn cannot
// take a batch down.
func runFn(fn func(paddock.Tx) error, tx paddock.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sqlite: update panicked: %v", r)
		}
	}()
	return fn(tx)
}
