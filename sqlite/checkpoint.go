package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// walRestart is the size of the write-ahead log from which a checkpoint
// restarts it (waiting for the writer once) rather than copying what it
// can beside the writers: the log's bound under a load that never pauses.
const walRestart = 64 << 20

// checkpointInterval is the least time between two checkpoints: a busy
// daemon's commits are copied in batches.
const checkpointInterval = 50 * time.Millisecond

// checkpointer copies the write-ahead log into the database after commits,
// on a connection of its own (see the package doc).
type checkpointer struct {
	db   *sql.DB
	wal  string
	wake chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	err  error
}

func startCheckpointer(db *sql.DB, wal string) *checkpointer {
	c := &checkpointer{db: db, wal: wal, wake: make(chan struct{}, 1), done: make(chan struct{})}
	c.wg.Add(1)
	go c.run()
	return c
}

// poke says a commit wrote to the log; it never waits.
func (c *checkpointer) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer c.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		}
		if err := c.checkpoint(context.Background()); err != nil {
			slog.Warn("sqlite: checkpointing the write-ahead log failed; the next commit tries again", "err", err)
		}
		select {
		case <-c.done:
			return
		case <-time.After(checkpointInterval):
		}
	}
}

// checkpoint copies what it can of the log beside the writers (PASSIVE),
// or, with a log past walRestart, all of it and restarts the log.
func (c *checkpointer) checkpoint(ctx context.Context) error {
	mode := "PASSIVE"
	if fi, err := os.Stat(c.wal); err == nil && fi.Size() > walRestart {
		mode = "RESTART"
	}
	var busy, logged, copied int
	if err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &logged, &copied); err != nil {
		return fmt.Errorf("wal_checkpoint(%s): %w", mode, err)
	}
	return nil
}

// stop ends the goroutine and copies the whole log into the database,
// truncating it, as the last connection's close would.
func (c *checkpointer) stop() error {
	c.once.Do(func() {
		close(c.done)
		c.wg.Wait()
		_, err := c.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
		c.err = errors.Join(err, c.db.Close())
	})
	return c.err
}
