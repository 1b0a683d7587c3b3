// Package pgtest starts a private PostgreSQL cluster for tests: initdb in a
// temporary directory, the server as the test process's child (it dies
// with it), listening only on a unix socket there, one database per key a
// test asks for. Tests skip without PostgreSQL, and fail in CI (CI=true).
// Start gives the same server to a program (bench/cluster), with the
// server's own durability if it asks.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The package's tests share one private PostgreSQL cluster, started by
// TestMain in a temporary directory, listening only on a unix socket there,
// and given one database per store directory a test opens.

// Superuser is the cluster's superuser; initdb names it.
const Superuser = "paddock"

// Cluster is a running test cluster.
type Cluster struct {
	dir  string // holds data/, the socket and postgres.log
	proc *exec.Cmd
	done chan error // proc's exit

	stopOnce sync.Once
	mu       sync.Mutex
	admin    *pgx.Conn
	dbs      map[string]string // store directory → database
}

var (
	once   sync.Once
	shared *Cluster
	// noPostgres says why there is no cluster when PostgreSQL is not
	// installed; startErr, why there is none although it is.
	noPostgres string
	startErr   error
)

// StopShared stops the shared cluster, if one was started, and removes its
// directory: a package's TestMain calls it after m.Run.
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

// Need returns the process's shared cluster, starting it on first use, or
// ends the test: a skip when PostgreSQL is not installed, a failure when it
// is but would not start, or in CI (CI=true), where a skipped store is a
// store nobody tested.
func Need(t testing.TB) *Cluster {
	t.Helper()
	once.Do(func() {
		bin, err := FindBin()
		if err != nil {
			noPostgres = err.Error()
			return
		}
		shared, startErr = Start(bin, false)
	})
	switch {
	case startErr != nil:
		t.Fatalf("the test cluster did not start: %v", startErr)
	case noPostgres != "" && os.Getenv("CI") == "true":
		t.Fatalf("PostgreSQL is required in CI: %s", noPostgres)
	case noPostgres != "":
		t.Skipf("PostgreSQL is not installed (%s); apt-get install postgresql", noPostgres)
	}
	return shared
}

// FindBin returns the directory that holds initdb and postgres: PATH's, or
// else the newest of Debian's /usr/lib/postgresql/*/bin.
func FindBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real // a link in /usr/local/bin: the server is beside its target
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no initdb on PATH or in /usr/lib/postgresql/*/bin")
}

// credential is who the cluster runs as: PostgreSQL refuses to run as
// root, so under root it is the postgres user Debian's package makes (or
// nobody).
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root and there is no postgres or nobody user to run PostgreSQL as")
}

// Start starts a cluster of the server in bin (FindBin). Tests use the
// shared one (Need), whose server does not flush (fsync off): durability
// against a crash is PostgreSQL's to test, and the suite commits thousands
// of times. durable keeps the server's own settings, for a benchmark that
// compares it with a store that does flush. Stop stops it.
func Start(bin string, durable bool) (c *Cluster, err error) {
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "paddock-pg-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initArgs := []string{"-D", data, "-U", Superuser, "-A", "trust", "-E", "UTF8", "--locale=C"}
	if !durable {
		initArgs = append(initArgs, "--no-sync")
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), initArgs...)
	initdb.Dir = dir
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// The server runs as this process's child rather than under pg_ctl, so
	// that it dies with the tests whatever ends them: Pdeathsig sends it
	// SIGQUIT, PostgreSQL's immediate shutdown (pg_ctl stop -m immediate).
	args := []string{"-D", data, "-k", dir, "-c", "listen_addresses=", "-c", "max_connections=100", "-c", "log_min_messages=warning"}
	if !durable {
		args = append(args, "-c", "fsync=off", "-c", "full_page_writes=off")
	}
	proc := exec.Command(filepath.Join(bin, "postgres"), args...)
	proc.Dir = dir
	proc.Stdout, proc.Stderr = logf, logf
	proc.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := proc.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	c = &Cluster{dir: dir, proc: proc, done: make(chan error, 1), dbs: map[string]string{}}
	go func() { c.done <- proc.Wait() }()
	defer func() {
		if err != nil {
			c.kill()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, cerr := pgx.Connect(ctx, c.DSN("postgres"))
		if cerr == nil {
			c.admin = conn
			return c, nil
		}
		select {
		case werr := <-c.done:
			c.done <- werr
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			return nil, fmt.Errorf("postgres exited (%v):\n%s", werr, log)
		case <-ctx.Done():
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			return nil, fmt.Errorf("postgres did not accept connections in 30s (%v):\n%s", cerr, log)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// DSN is a database's keyword/value connection string.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("host=%s port=5432 user=%s sslmode=disable dbname=%s", c.dir, Superuser, db)
}

// URL is the postgres:// URL of the database that belongs to key.
func (c *Cluster) URL(t testing.TB, key string) string {
	t.Helper()
	return c.DatabaseURL(c.databaseName(t, key))
}

// DatabaseURL is the postgres:// URL of database db.
func (c *Cluster) DatabaseURL(db string) string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&sslmode=disable", Superuser, db, c.dir)
}

// kill stops the server at once and waits for it.
func (c *Cluster) kill() {
	c.proc.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.proc.Process.Kill()
		<-c.done
	}
}

// Stop stops the server and removes its directory. It may be called again.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		if c.admin != nil {
			c.admin.Close(context.Background())
		}
		c.kill()
		os.RemoveAll(c.dir)
	})
}

// Database returns the DSN of the database that belongs to key (a store
// directory, say), creating it on first use: opening a store twice with
// the same key reaches the same data, as storetest requires.
func (c *Cluster) Database(t testing.TB, key string) string {
	t.Helper()
	return c.DSN(c.databaseName(t, key))
}

func (c *Cluster) databaseName(t testing.TB, key string) string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	name, ok := c.dbs[key]
	if !ok {
		name = fmt.Sprintf("store_%d", len(c.dbs)+1)
		if _, err := c.admin.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
			t.Fatalf("create database: %v", err)
		}
		c.dbs[key] = name
	}
	return name
}

// Exec runs one statement in key's database, as the superuser.
func (c *Cluster) Exec(t testing.TB, key, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.Database(t, key))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", strings.Fields(sql)[0], err)
	}
}
