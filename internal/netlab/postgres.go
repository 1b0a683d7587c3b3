package netlab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/paddock-dev/paddock/postgres/pgtest"
)

// Postgres is a PostgreSQL server of the lab's own, in machine "pg" (host
// 1 of the store network): the nodes reach it over the store network,
// the lab's owner over a unix socket in its directory.
type Postgres struct {
	lab      *Lab
	NS, Dir  string
	bin      string
	uid, gid int
	host     int // its host number on the store network

	mu   sync.Mutex
	proc *exec.Cmd
	done chan error
}

// StartPostgres makes a cluster (initdb) and starts its server, trusting
// the lab's addresses, with a database named paddock. Its error wraps
// ErrUnavailable without PostgreSQL. Close stops it (immediate shutdown).
func (l *Lab) StartPostgres(ctx context.Context) (*Postgres, error) {
	bin, err := pgtest.FindBin()
	if err != nil {
		return nil, fmt.Errorf("%w: PostgreSQL is not installed (%v); apt-get install postgresql", ErrUnavailable, err)
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: no postgres user to run PostgreSQL as: %v", ErrUnavailable, err)
	}
	dir, err := l.TempDir("pg")
	if err != nil {
		return nil, err
	}
	p := &Postgres{lab: l, bin: bin, Dir: dir, host: 1}
	p.uid, _ = strconv.Atoi(u.Uid)
	p.gid, _ = strconv.Atoi(u.Gid)
	if err := os.Chown(p.Dir, p.uid, p.gid); err != nil {
		return nil, fmt.Errorf("the server's directory: %w", err)
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", filepath.Join(p.Dir, "data"), "-U", pgtest.Superuser,
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(p.uid), Gid: uint32(p.gid)}}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	hba, err := os.OpenFile(filepath.Join(p.Dir, "data", "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("pg_hba.conf: %w", err)
	}
	_, werr := fmt.Fprintf(hba, "host all all 10.213.0.0/16 trust\n")
	if err := errors.Join(werr, hba.Close()); err != nil {
		return nil, fmt.Errorf("pg_hba.conf: %w", err)
	}
	if p.NS, err = l.Machine("pg", 1, StoreNet); err != nil {
		return nil, err
	}
	l.onClose(func() error { p.Stop(); return nil })
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	conn, err := p.Conn(ctx, "postgres")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE paddock"); err != nil {
		return nil, fmt.Errorf("CREATE DATABASE paddock: %w", err)
	}
	return p, nil
}

// Start starts the server (stopped by Halt, or not started yet) and waits
// until it takes connections.
func (p *Postgres) Start(ctx context.Context) error {
	argv := append([]string{"nsenter", "--net=/run/netns/" + p.NS, "--setuid", strconv.Itoa(p.uid), "--setgid", strconv.Itoa(p.gid),
		"--", filepath.Join(p.bin, "postgres")}, "-D", filepath.Join(p.Dir, "data"), "-k", p.Dir,
		"-c", "listen_addresses="+p.lab.Addr(StoreNet, p.host), "-c", "max_connections=100", "-c", "fsync=off", "-c", "log_min_messages=warning")
	logf, err := os.OpenFile(p.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("the server's log: %w", err)
	}
	defer logf.Close()
	proc := exec.Command(argv[0], argv[1:]...)
	proc.Stdout, proc.Stderr = logf, logf
	if err := proc.Start(); err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- proc.Wait() }()
	p.mu.Lock()
	p.proc, p.done = proc, done
	p.mu.Unlock()
	for i := 0; ; i++ {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := pgx.Connect(cctx, p.DSN("postgres"))
		cancel()
		if err == nil {
			return c.Close(context.Background())
		}
		exited := false
		select {
		case werr := <-done:
			done <- werr
			exited = true
		default:
		}
		if exited || i > 300 || ctx.Err() != nil {
			logb, _ := os.ReadFile(p.LogPath())
			return fmt.Errorf("postgres did not start: %w\n%s", err, logb)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// LogPath is the server's log.
func (p *Postgres) LogPath() string { return filepath.Join(p.Dir, "postgres.log") }

// Stop stops the server at once (SIGQUIT: PostgreSQL's immediate
// shutdown, a crash as far as its clients know) and waits for it; SIGKILL
// if it has not stopped 10 s later. Stopping a stopped server does
// nothing.
func (p *Postgres) Stop() {
	p.mu.Lock()
	proc, done := p.proc, p.done
	p.proc = nil
	p.mu.Unlock()
	if proc == nil {
		return
	}
	proc.Process.Signal(syscall.SIGQUIT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		proc.Process.Kill()
		<-done
	}
}

// Halt stops the server with sig and waits for it and its backends to
// exit: syscall.SIGINT is PostgreSQL's fast shutdown (it ends every
// session, telling its client so, and writes a checkpoint); SIGKILL
// kills the postmaster alone, as a crash would, its backends ending when
// they notice (the next start recovers from the log). A backend still
// there 30 s later is killed.
func (p *Postgres) Halt(sig syscall.Signal) error {
	p.mu.Lock()
	proc, done := p.proc, p.done
	p.proc = nil
	p.mu.Unlock()
	if proc == nil {
		return errors.New("postgres is not running")
	}
	pid := proc.Process.Pid
	kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err := proc.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling postgres: %w", err)
	}
	var err error
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		err = fmt.Errorf("postgres did not stop on %v within 30s", sig)
		proc.Process.Kill()
		<-done
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, f := range strings.Fields(string(kids)) {
		kid, _ := strconv.Atoi(f)
		for kid > 0 && Running(kid) {
			if time.Now().After(deadline) {
				syscall.Kill(kid, syscall.SIGKILL)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return err
}

// Running says whether process pid exists and is not a zombie.
func Running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// DSN is the lab owner's way to database db: the unix socket.
func (p *Postgres) DSN(db string) string {
	return fmt.Sprintf("host=%s port=5432 user=%s sslmode=disable dbname=%s", p.Dir, pgtest.Superuser, db)
}

// URL is the nodes' way to the paddock database: over the store network.
func (p *Postgres) URL() string {
	return fmt.Sprintf("postgres://%s@%s:5432/paddock?sslmode=disable", pgtest.Superuser, p.lab.Addr(StoreNet, p.host))
}

// Conn is a connection of the lab owner's to database db.
func (p *Postgres) Conn(ctx context.Context, db string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, p.DSN(db))
	if err != nil {
		return nil, fmt.Errorf("connecting to postgres: %w", err)
	}
	return c, nil
}
