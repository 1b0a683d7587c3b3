package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"
)

// The bench starts its own PostgreSQL server the way postgres/pgtest does
// for the tests (initdb in a temporary directory, the server as this
// process's child, a unix socket only), but with the server's default
// durability: pgtest turns fsync off, which would compare a PostgreSQL
// that does not flush its WAL with a SQLite that does.

// superuser is the role initdb makes; the daemons connect as it.
const superuser = "paddock"

// findPostgres returns the directory that holds initdb and postgres: PATH's,
// or else the newest of Debian's /usr/lib/postgresql/*/bin.
func findPostgres() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real // a link in /usr/local/bin: its directory has pg_isready
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

// pgServer is the bench's PostgreSQL server.
type pgServer struct {
	dir  string // data/, the socket, postgres.log
	proc *exec.Cmd
	done chan error
	url  string // the postgres database's URL, which the nodes share
}

// credential is who the server runs as: PostgreSQL refuses root, so under
// root it is the postgres user Debian's package makes (or nobody).
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

func startPostgres(ctx context.Context, bin string) (s *pgServer, err error) {
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "paddock-bench-pg-")
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
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", superuser, "-A", "trust", "-E", "UTF8", "--locale=C")
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
	// Pdeathsig: the server dies with the bench whatever ends it.
	proc := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir,
		"-c", "listen_addresses=", "-c", "max_connections=100", "-c", "log_min_messages=warning")
	proc.Dir = dir
	proc.Stdout, proc.Stderr = logf, logf
	proc.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := proc.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s = &pgServer{dir: dir, proc: proc, done: make(chan error, 1),
		url: fmt.Sprintf("postgres://%s@/postgres?host=%s&sslmode=disable", superuser, dir)}
	go func() { s.done <- proc.Wait() }()
	sock := filepath.Join(dir, ".s.PGSQL.5432")
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The server answers once its socket takes connections.
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			if ready(bin, dir) {
				return s, nil
			}
		}
		select {
		case werr := <-s.done:
			s.done <- werr
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			return nil, fmt.Errorf("postgres exited (%v):\n%s", werr, log)
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			return nil, fmt.Errorf("postgres did not accept connections in 30s:\n%s", log)
		}
	}
}

// ready asks pg_isready, when there is one, whether the server takes
// connections (it can refuse them while it starts up); without it, the
// socket is taken as a sign, a second later.
func ready(bin, dir string) bool {
	p := filepath.Join(bin, "pg_isready")
	if _, err := os.Stat(p); err != nil {
		time.Sleep(time.Second)
		return true
	}
	return exec.Command(p, "-q", "-h", dir, "-U", superuser, "-d", "postgres").Run() == nil
}

// stop shuts the server down (fast shutdown, SIGINT) and waits for it, then
// removes its directory. It may be called again.
func (s *pgServer) stop() error {
	if s.proc == nil {
		return nil
	}
	s.proc.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.proc.Process.Kill()
		<-s.done
		err = errors.New("postgres did not stop 30 s after SIGINT")
	}
	s.proc = nil
	os.RemoveAll(s.dir)
	return err
}
