package netlab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/postgres/pgtest"
)

// StartStandby makes a streaming replica of p in a machine of its own
// (name, host h of the store network), from a base backup of p, and
// starts it. Replication is synchronous: p commits a transaction only
// once the standby has it on disk, so what p acknowledged is on the
// standby when p dies, and Promote makes it the primary with all of it.
// Close stops it.
func (p *Postgres) StartStandby(ctx context.Context, name string, h int) (*Postgres, error) {
	l := p.lab
	dir, err := l.TempDir(name)
	if err != nil {
		return nil, err
	}
	s := &Postgres{lab: l, bin: p.bin, Dir: dir, uid: p.uid, gid: p.gid, host: h}
	if err := os.Chown(s.Dir, s.uid, s.gid); err != nil {
		return nil, fmt.Errorf("the standby's directory: %w", err)
	}
	// The standby streams from p over the store network, as a replica on
	// another host does.
	if err := appendLine(filepath.Join(p.Dir, "data", "pg_hba.conf"), "host replication all 10.213.0.0/16 trust"); err != nil {
		return nil, err
	}
	conn, err := p.Conn(ctx, "postgres")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return nil, fmt.Errorf("reloading the primary's configuration: %w", err)
	}
	backup := exec.CommandContext(ctx, filepath.Join(p.bin, "pg_basebackup"), "-h", p.Dir, "-p", "5432", "-U", pgtest.Superuser,
		"-D", filepath.Join(s.Dir, "data"), "-X", "stream", "--checkpoint=fast", "--no-sync")
	backup.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.gid)}}
	if out, err := backup.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	conf := fmt.Sprintf("primary_conninfo = 'host=%s port=5432 user=%s application_name=%s'\n", l.Addr(StoreNet, p.host), pgtest.Superuser, name)
	if err := appendLine(filepath.Join(s.Dir, "data", "postgresql.auto.conf"), conf); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "data", "standby.signal"), nil, 0o600); err != nil {
		return nil, fmt.Errorf("standby.signal: %w", err)
	}
	if err := os.Chown(filepath.Join(s.Dir, "data", "standby.signal"), s.uid, s.gid); err != nil {
		return nil, fmt.Errorf("standby.signal: %w", err)
	}
	if s.NS, err = l.Machine(name, h, StoreNet); err != nil {
		return nil, err
	}
	l.onClose(func() error { s.Stop(); return nil })
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	// Synchronous from now on: p waits for the standby's flush.
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '"+name+"'"); err != nil {
		return nil, fmt.Errorf("making replication synchronous: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return nil, fmt.Errorf("reloading the primary's configuration: %w", err)
	}
	for start := time.Now(); ; {
		var state string
		err := conn.QueryRow(ctx, "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1", name).Scan(&state)
		if err == nil && state == "sync" {
			return s, nil
		}
		if time.Since(start) > 30*time.Second {
			logb, _ := os.ReadFile(s.LogPath())
			return nil, fmt.Errorf("the standby is not a synchronous replica 30s after it started (%q, %v):\n%s", state, err, logb)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Promote makes standby s the primary (pg_promote, which waits until it
// is) and returns how long that took.
func (s *Postgres) Promote(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	conn, err := s.Conn(ctx, "postgres")
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 30)").Scan(&ok); err != nil || !ok {
		return 0, errors.Join(fmt.Errorf("promoting the standby failed (promoted: %t)", ok), err)
	}
	return time.Since(start), nil
}

// URLOf is the nodes' way to the paddock database on any of servers,
// tried in turn, taking only one that accepts writes (libpq's
// target_session_attrs=read-write, which pgx honours): a primary that
// died and the standby promoted in its place are both named, and a node
// finds the one that is primary now by itself.
func URLOf(servers ...*Postgres) string {
	var hosts []string
	for _, p := range servers {
		hosts = append(hosts, p.lab.Addr(StoreNet, p.host)+":5432")
	}
	return fmt.Sprintf("postgres://%s@%s/paddock?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		pgtest.Superuser, strings.Join(hosts, ","))
}

// appendLine appends line (and a newline) to the file at path.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	_, werr := fmt.Fprintln(f, strings.TrimSuffix(line, "\n"))
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}
