package main

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paddock-dev/paddock/internal/netlab"
	"github.com/paddock-dev/paddock/internal/testenv"
)

// netLab is internal/netlab's lab for a test: each step fails the test
// when it fails, and the lab is closed (every namespace, process and
// directory of it gone) when the test ends, however it ends.
type netLab struct {
	t *testing.T
	*netlab.Lab
}

const (
	storeNet = netlab.StoreNet
	peerNet  = netlab.PeerNet
)

// needNetLab makes the lab, or skips: it needs root, ip (iproute2), nft
// and nsenter, and a kernel that makes network namespaces.
func needNetLab(t *testing.T) *netLab {
	t.Helper()
	l, err := netlab.New()
	if errors.Is(err, netlab.ErrUnavailable) {
		testenv.Need(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("closing the lab: %v", err)
		}
	})
	return &netLab{t: t, Lab: l}
}

func (l *netLab) must(err error) {
	l.t.Helper()
	if err != nil {
		l.t.Fatal(err)
	}
}

func (l *netLab) machine(name string, h int, nets ...string) string {
	l.t.Helper()
	ns, err := l.Machine(name, h, nets...)
	l.must(err)
	return ns
}

func (l *netLab) addr(net string, h int) string { return l.Addr(net, h) }
func (l *netLab) via(ns string) []string        { return l.Via(ns) }
func (l *netLab) cut(name, net string)          { l.t.Helper(); l.must(l.Cut(name, net)) }
func (l *netLab) mend(name, net string)         { l.t.Helper(); l.must(l.Mend(name, net)) }
func (l *netLab) delay(name, net string, d time.Duration) {
	l.t.Helper()
	err := l.Delay(name, net, d)
	if errors.Is(err, netlab.ErrUnavailable) {
		testenv.Need(l.t, "%v", err)
	}
	l.must(err)
}
func (l *netLab) lossy(name, net string, n int) {
	l.t.Helper()
	l.must(l.Lossy(name, net, n))
}

// labPostgres is the lab's PostgreSQL server for a test.
type labPostgres struct {
	t *testing.T
	*netlab.Postgres
}

// startLabPostgres starts the lab's PostgreSQL, or skips without it.
func startLabPostgres(t *testing.T, l *netLab) *labPostgres {
	t.Helper()
	pg, err := l.StartPostgres(context.Background())
	if errors.Is(err, netlab.ErrUnavailable) {
		testenv.Need(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &labPostgres{t: t, Postgres: pg}
}

func (p *labPostgres) start() {
	p.t.Helper()
	if err := p.Start(context.Background()); err != nil {
		p.t.Fatal(err)
	}
}

func (p *labPostgres) halt(sig syscall.Signal) {
	p.t.Helper()
	if err := p.Halt(sig); err != nil {
		p.t.Fatal(err)
	}
}

func (p *labPostgres) url() string { return p.URL() }

// pool is a pool of the test's own connections to database db, closed
// when the test ends.
func (p *labPostgres) pool(db string) *pgxpool.Pool {
	p.t.Helper()
	pool, err := pgxpool.New(context.Background(), p.DSN(db))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(pool.Close)
	return pool
}
