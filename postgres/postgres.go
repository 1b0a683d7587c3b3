// Package postgres is paddock's shared state store: a PostgreSQL database
// through pgx (github.com/jackc/pgx/v5 and its pool), for several paddock
// nodes that serve the same projects and runs (issue #21). SQLite (package
// sqlite) stays the embedded default; both pass the conformance suite in
// package storetest.
//
// # Durability
//
// Update commits and returns only when PostgreSQL has acknowledged the
// commit, which with the server's default synchronous_commit=on means the
// commit record is flushed to its WAL. A server configured with
// synchronous_commit=off weakens that promise; this package does not change
// the setting.
//
// # Concurrency
//
// Every Update is its own transaction at READ COMMITTED on a pooled
// connection; there is no group commit (the server already batches WAL
// flushes of concurrent commits). A run's event seqs are gap-free because
// AppendEvent takes the next one with UPDATE … RETURNING on the run's row:
// the row lock serializes the run's appenders, across nodes too, until their
// transactions end, and a rolled-back transaction gives its seq back. A run's
// seqs become visible in order, since a later appender cannot take its seq
// before the earlier one has committed.
//
// View runs in a READ ONLY, REPEATABLE READ transaction: one snapshot for
// all of fn's reads, as SQLite's read transactions give.
//
// A Tx method that answers with a paddock error (CodeNotFound, CodeConflict,
// CodeBusy) leaves the transaction usable, as SQLite's do: the statements
// test first or use ON CONFLICT DO NOTHING rather than let PostgreSQL abort
// the transaction. Other errors (a lost connection, a constraint only a
// concurrent transaction could break) abort it, and Update returns them.
//
// # Cancellation
//
// Unlike SQLite's shared batch, a transaction here belongs to one caller, so
// its statements do run under the caller's context: a caller that gives up
// interrupts its own statement (pgx then drops the connection, and the
// server rolls the transaction back) and nobody else's. As in SQLite, a
// caller whose context ends while fn runs gets the context's error and
// nothing of fn is committed; the commit itself is never interrupted, so that
// an error always means nothing was written.
//
// # Limitations
//
//   - Two Updates that lock the same rows in opposite orders (appending to
//     runs a then b, and b then a) can deadlock, which SQLite's single
//     writer never does; PostgreSQL then fails one of them (SQLSTATE 40P01)
//     and Update returns that error. fn is not retried: it may have done
//     things outside the transaction.
//   - A transaction that appends a notable event holds the notice lock
//     (notices.go) until it ends, after the run's row: one that then
//     appends to a second run whose row another transaction holds, while
//     that one waits for the notice lock, deadlocks, and PostgreSQL fails
//     one of them as above. Only Reap appends notices to several runs in
//     one transaction (the lost node's, which no other node writes).
//   - Times are kept to the microsecond (SQLite keeps nanoseconds); an
//     event's Time is cut to the microsecond before it is stored, so the
//     event AppendEvent returns is the one readers see.
//
// # Nodes
//
// Several daemons share one database as nodes (nodes.go): each joins with
// a lease it renews and a fencing token (its epoch); every Update of a
// joined node first checks, on its own row taken FOR KEY SHARE, that its
// lease holds, so that once another node has marked it lost (taking the
// row FOR UPDATE) nothing it writes commits. Events are fanned out to
// every node with LISTEN/NOTIFY.
//
// # Migrations
//
// The schema is embedded (migrations/NNNN_name.sql) and applied at Open in
// one transaction that holds a transaction-level advisory lock, so that two
// nodes starting at once do not both migrate. The table paddock_schema
// records the version, numbered as SQLite's PRAGMA user_version is; a
// database newer than this binary is refused rather than guessed at.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paddock-dev/paddock"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock key Open migrates under: "paddock" in
// ASCII, a key no other application is likely to take.
const migrationLock int64 = 0x7061646f636b

// LeaseConns is how many renewals of a node's lease (Renew) may be under
// way at once: one whose packets were lost, waiting on their
// retransmission, need not hold the next back.
const LeaseConns = 3

// Store is a paddock.Store on one PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
	// lease is a pool of connections of its own (LeaseConns) for Renew:
	// a node's proof that it lives must not wait behind its own work for
	// one of pool's connections (a busy node would lose its lease for
	// being busy), nor behind a renewal stuck on a lossy link.
	lease *pgxpool.Pool
	// node is this daemon's node once it joined (Join), nil before; see
	// nodes.go. Every Update of a joined store is fenced by it.
	node atomic.Pointer[joined]
}

var _ paddock.Store = (*Store)(nil)

// Open connects to the database dsn names (a postgres:// URL or a
// keyword/value string, as libpq reads them) and brings its schema up to
// date. The database must exist; the tables are created in the connection's
// search_path (normally the schema public).
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message can quote the DSN, password and all; say only what failed.
		return nil, errors.New("postgres: the connection string does not parse")
	}
	// A transaction left open by a stopped process (a node paused with
	// SIGSTOP mid-write) would hold its rows, and its node's row, from
	// the node that marks it lost: the server ends it after this long.
	if _, set := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = "10000"
	}
	leaseCfg := cfg.Copy()
	leaseCfg.MaxConns, leaseCfg.MinConns = LeaseConns, 0
	// A renewal is one round trip, each of which a slow or lossy link
	// makes dear: no ping before it (pgxpool pings a connection idle for
	// a second, and the lease's are idle a third of a lease between
	// renewals; a dead one fails the renewal, and the next goes on a new
	// one), and its statement sent whole, not prepared first.
	leaseCfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	leaseCfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	lease, err := pgxpool.NewWithConfig(ctx, leaseCfg) // connects when first used
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{pool: pool, lease: lease}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		lease.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the pool's connections, waiting for those in use.
func (s *Store) Close() error {
	s.pool.Close()
	s.lease.Close()
	return nil
}

// SchemaVersion returns the database's schema version.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT version FROM paddock_schema`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("postgres: read schema version: %w", err)
	}
	return v, nil
}

type migration struct {
	version int
	name    string
}

func readMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("postgres: migrations: %w", err)
	}
	var all []migration
	for _, e := range entries {
		n, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(n)
		if !ok || err != nil {
			return nil, fmt.Errorf("postgres: migration %s: name must start with a number", e.Name())
		}
		all = append(all, migration{v, e.Name()})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].version < all[j].version })
	return all, nil
}

// migrate applies the migrations the database lacks, all in one
// transaction: PostgreSQL's DDL is transactional, so a failure leaves the
// schema as it was, and the advisory lock, held until that transaction
// ends, makes a second node wait and then find the work done.
func (s *Store) migrate(ctx context.Context) error {
	all, err := readMigrations()
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: begin migration: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("postgres: take the migration lock: %w", err)
	}
	// Looked for before it is made: a role that may write the tables but
	// not create any opens a migrated database all the same.
	var made bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('paddock_schema') IS NOT NULL`).Scan(&made); err != nil {
		return fmt.Errorf("postgres: look for paddock_schema: %w", err)
	}
	if !made {
		if _, err := tx.Exec(ctx, `CREATE TABLE paddock_schema (
			one     boolean PRIMARY KEY DEFAULT true CHECK (one),
			version integer NOT NULL
		)`); err != nil {
			return fmt.Errorf("postgres: create paddock_schema: %w", err)
		}
	}
	var current int
	err = tx.QueryRow(ctx, `SELECT version FROM paddock_schema`).Scan(&current)
	if errors.Is(err, pgx.ErrNoRows) {
		current = 0
	} else if err != nil {
		return fmt.Errorf("postgres: read schema version: %w", err)
	}
	if len(all) > 0 && current > all[len(all)-1].version {
		return fmt.Errorf("postgres: the database has schema version %d, newer than this paddock knows (%d); use a newer paddock",
			current, all[len(all)-1].version)
	}
	applied := current
	for _, m := range all {
		if m.version <= current {
			continue
		}
		body, err := migrations.ReadFile("migrations/" + m.name)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		if _, err := tx.Exec(ctx, string(body)); err != nil {
			return fmt.Errorf("postgres: migration %s: %w", m.name, err)
		}
		applied = m.version
	}
	if applied == current {
		return nil // the rollback only releases the lock
	}
	if _, err := tx.Exec(ctx, `INSERT INTO paddock_schema (version) VALUES ($1)
		ON CONFLICT (one) DO UPDATE SET version = excluded.version`, applied); err != nil {
		return fmt.Errorf("postgres: record schema version: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: commit migration: %w", err)
	}
	return nil
}

// View runs fn in a read-only transaction on one snapshot.
func (s *Store) View(ctx context.Context, fn func(paddock.Tx) error) (err error) {
	ctx, finish, err := s.within(ctx)
	if err != nil {
		return err
	}
	defer finish(&err)
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	return fn(&Tx{tx: tx, node: s.nodeID()})
}

// Update runs fn in a write transaction and commits it if fn returns nil;
// when it returns nil, fn's changes are durable. A caller whose ctx ends
// before the commit gets ctx's error, and fn's changes are rolled back.
// A panic in fn rolls back and is returned as an error, as in SQLite.
// On a joined node, all of it, the commit too, is cut short when the
// node's lease runs out by its own clock (lease.go): a commit cut short
// may or may not have been stored, and its error says so.
func (s *Store) Update(ctx context.Context, fn func(paddock.Tx) error) error {
	ctx, own, done, err := s.bound(ctx)
	if err != nil {
		return err
	}
	defer done()
	// The fence goes with the BEGIN where it can (fenceBegin): a round
	// trip less for every write.
	begin, n := s.fenceBegin()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: begin})
	if err != nil {
		var pe *pgconn.PgError
		if n != nil && errors.As(err, &pe) {
			return s.notWritten(ctx, n, wrap("check the node's lease", err))
		}
		return s.notWritten(ctx, n, fmt.Errorf("postgres: begin: %w", err))
	}
	// Rollback and commit run whatever happens to the caller (own: only
	// the lease's end cuts them short): a transaction left open would
	// hold its row locks, and other writers with them.
	if n == nil {
		if err := s.fence(ctx, tx); err != nil {
			tx.Rollback(own)
			return s.lapsed(ctx, err, "nothing was written")
		}
	}
	if err := runFn(fn, &Tx{tx: tx, node: s.nodeID(), write: true}); err != nil {
		tx.Rollback(own)
		return s.lapsed(ctx, err, "nothing was written")
	}
	if err := ctx.Err(); err != nil {
		// The caller gave up while fn ran: it hears so, and what fn did is
		// undone, so that an error always means nothing was written.
		tx.Rollback(own)
		return s.lapsed(ctx, err, "nothing was written")
	}
	if err := tx.Commit(own); err != nil {
		return s.lapsed(own, fmt.Errorf("postgres: commit: %w", err), "the write under way may or may not have been stored")
	}
	return nil
}

// runFn runs fn, turning a panic into an error.
func runFn(fn func(paddock.Tx) error, tx paddock.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("postgres: update panicked: %v", r)
		}
	}()
	return fn(tx)
}
