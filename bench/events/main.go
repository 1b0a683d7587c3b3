// Command events measures durable event appends, in one run: paddock's store
// (group commit: concurrent appends share a transaction and an fsync)
// beside SQLite's own insert rate with the same durability (WAL,
// synchronous=FULL, one autocommit INSERT per row), both from the same
// number of concurrent writers. It prints a markdown table.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
	"github.com/paddock-dev/paddock/sqlite"
	_ "modernc.org/sqlite"
)

func main() {
	quick := flag.Bool("quick", false, "small workload for a CI smoke run")
	n := flag.Int("n", 5000, "events per side")
	writers := flag.Int("writers", 16, "concurrent writers")
	flag.Parse()
	if *quick {
		*n = 500
	}
	if err := run(*n, *writers); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parallel(n, writers int, fn func(i int) error) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	next := make(chan int, n)
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return time.Since(start), <-errs
}

func run(n, writers int) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "paddock-bench-events-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	store, err := sqlite.Open(ctx, filepath.Join(tmp, "state.db"))
	if err != nil {
		return err
	}
	defer store.Close()
	now := time.Now()
	if err := store.Update(ctx, func(tx paddock.Tx) error {
		if err := tx.CreateProject(ctx, &paddock.Project{Name: "p", Root: "/p", Fingerprint: "f", CreatedAt: now}); err != nil {
			return err
		}
		return tx.CreateRun(ctx, &paddock.Run{ID: "r", Project: "p", CreatedAt: now})
	}); err != nil {
		return err
	}
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(tmp, "raw.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		return err
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	if _, err := raw.Exec(`CREATE TABLE events (run_id TEXT, seq INTEGER, time TEXT, type TEXT, data TEXT, PRIMARY KEY (run_id, seq)) WITHOUT ROWID`); err != nil {
		return err
	}
	benchutil.Step("%d durable event appends each, %d writers: paddock's store, then SQLite autocommit inserts", n, writers)
	ours, err := parallel(n, writers, func(i int) error {
		return store.Update(ctx, func(tx paddock.Tx) error {
			_, err := tx.AppendEvent(ctx, "r", "bench", map[string]int{"i": i})
			return err
		})
	})
	if err != nil {
		return err
	}
	peer, err := parallel(n, writers, func(i int) error {
		_, err := raw.Exec(`INSERT INTO events VALUES ('r', ?, ?, 'bench', ?)`, i+1, time.Now().Format(time.RFC3339Nano), fmt.Sprintf(`{"i":%d}`, i))
		return err
	})
	if err != nil {
		return err
	}
	// The seq rule held under the load.
	var evs []*paddock.Event
	store.View(ctx, func(tx paddock.Tx) (err error) { evs, err = tx.Events(ctx, "r", 0, n+1); return err })
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			return fmt.Errorf("seq %d at %d", e.Seq, i)
		}
	}
	if len(evs) != n {
		return fmt.Errorf("%d events, want %d", len(evs), n)
	}
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	fmt.Printf("\n%s\n\n| figure | paddock | peer | ratio |\n|---|---|---|---|\n", benchutil.Machine(tmp))
	fmt.Printf("| durable event appends, %d writers (%d events, gap-free; the store alone, no tree) | %.0f/s | %.0f/s (SQLite autocommit inserts, same durability) | %.2f× |\n",
		writers, n, rate(ours), rate(peer), rate(ours)/rate(peer))
	return nil
}
