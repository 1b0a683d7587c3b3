package main

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/httpapi"
	"github.com/paddock-dev/paddock/internal/durable"
	"github.com/paddock-dev/paddock/internal/paddockcli"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/postgres"
	"github.com/spf13/cobra"
)

// nodeFlags are serve's --node-* flags, over paddock.toml's node_* keys.
type nodeFlags struct {
	id, listen, address, lease, adopt string
	capacity                          int
}

func (f *nodeFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.id, "node-id", "", "with a shared store: this node's id (default: made at the first start, kept in <state dir>/node-id)")
	fl.StringVar(&f.listen, "node-listen", "", "with a shared store: the address calls forwarded by other nodes come to (default 127.0.0.1:0)")
	fl.StringVar(&f.address, "node-address", "", "with a shared store: the URL other nodes reach this one at (default http://NODE-LISTEN)")
	fl.IntVar(&f.capacity, "node-capacity", 0, "with a shared store: the runs with a live workspace this node takes (default 32)")
	fl.StringVar(&f.lease, "node-lease", "", "with a shared store: how long this node counts as alive after renewing its lease (default 15s)")
	fl.StringVar(&f.adopt, "node-adopt", "", "with a shared store: manual (default: paddock adopt RUN) or auto (this node adopts lost nodes' runs while it has room)")
}

// apply lays the flags given over cfg.
func (f *nodeFlags) apply(cfg *config, changed func(string) bool) {
	if changed("node-id") {
		cfg.NodeID = f.id
	}
	if changed("node-listen") {
		cfg.NodeListen = f.listen
	}
	if changed("node-address") {
		cfg.NodeAddress = f.address
	}
	if changed("node-capacity") {
		cfg.NodeCapacity = f.capacity
		if f.capacity == 0 {
			cfg.NodeCapacity = -1 // refused by checkNode: 0 is not the default when asked for
		}
	}
	if changed("node-lease") {
		cfg.NodeLease = f.lease
	}
	if changed("node-adopt") {
		cfg.NodeAdopt = f.adopt
	}
}

// checkNode refuses node settings that could only fail later.
func (c config) checkNode() error {
	if c.NodeID != "" && !paddock.ValidNodeID(c.NodeID) {
		return fmt.Errorf("node_id %q: want letters, digits, '.', '_' or '-' (at most 63, a letter or digit first)", c.NodeID)
	}
	switch c.NodeAdopt {
	case "", "manual", "auto":
	default:
		return fmt.Errorf("node_adopt %q: want manual or auto", c.NodeAdopt)
	}
	if c.NodeCapacity < 0 {
		return fmt.Errorf("node_capacity: want a number of runs of at least 1")
	}
	if c.NodeLease != "" {
		d, err := time.ParseDuration(c.NodeLease)
		if err != nil || d < time.Second {
			return fmt.Errorf("node_lease %q: want a duration of at least 1s, such as 15s", c.NodeLease)
		}
	}
	if c.NodeListen != "" {
		if _, _, err := net.SplitHostPort(c.NodeListen); err != nil {
			return fmt.Errorf("node_listen %q: want HOST:PORT", c.NodeListen)
		}
	}
	if c.NodeAddress != "" {
		u, err := url.Parse(c.NodeAddress)
		if err != nil || u.Scheme != "http" || u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("node_address %q: want http://HOST:PORT", c.NodeAddress)
		}
	}
	return nil
}

// clusterNode is this daemon as one node of several on a shared store.
type clusterNode struct {
	store *postgres.Store
	self  paddock.Node
	ln    net.Listener
	lease time.Duration
	log   *slog.Logger
	m     *lifecycle.Manager
	// stopRenewing ends the lease's renewal (leave); fenced is closed,
	// with fencedErr set, when a renewal finds the lease gone.
	stopRenewing context.CancelFunc
	fenced       chan struct{}
	fencedErr    error
	// autoAdopt: node_adopt = "auto"; adopting is the pass of adoptions
	// under way (one pass at a time), which leave waits for.
	autoAdopt bool
	adopting  sync.WaitGroup
	busy      atomic.Bool
	// tried is when an automatic adoption of a run last failed: it is
	// not tried again for a while.
	triedMu sync.Mutex
	tried   map[string]time.Time
}

// joinCluster makes this daemon a node of the paddock its PostgreSQL
// store is shared by: it takes its node listener (whose address the
// others forward to) and joins with a lease.
func joinCluster(ctx context.Context, home string, cfg config, store *postgres.Store, log *slog.Logger) (*clusterNode, error) {
	id, kept, key, keep, err := nodeIdentity(home, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	if kept != "" && kept != id {
		// This state directory's runs are recorded as kept's: under another
		// id they would be nobody's here, and gc would take their files.
		nodes, err := store.Nodes(ctx)
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			if n.ID == kept && n.LiveRuns > 0 {
				return nil, paddockcli.UsageError(fmt.Sprintf("this state directory is node %s, which holds %d live runs here; start it as --node-id %s (or adopt its runs on another node first)", kept, n.LiveRuns, kept))
			}
		}
	}
	listen := cfg.NodeListen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("node listener: %w", err)
	}
	addr := cfg.NodeAddress
	if addr == "" {
		if ip := ln.Addr().(*net.TCPAddr).IP; ip.IsUnspecified() {
			ln.Close()
			return nil, paddockcli.UsageError(fmt.Sprintf("--node-listen %s listens on every address: say which one the other nodes reach with --node-address http://HOST:PORT", listen))
		}
		addr = "http://" + ln.Addr().String()
	}
	lease := 15 * time.Second
	if cfg.NodeLease != "" {
		lease, _ = time.ParseDuration(cfg.NodeLease) // checked with the config
	}
	capacity := cfg.NodeCapacity
	if capacity == 0 {
		capacity = 32
	}
	self, err := store.Join(ctx, postgres.NodeConfig{ID: id, Home: key, Address: strings.TrimSuffix(addr, "/"), Capacity: capacity, Lease: lease})
	if err != nil {
		ln.Close()
		if errors.Is(err, postgres.ErrNodeTaken) {
			msg := strings.TrimPrefix(err.Error(), "postgres: ") + ": give this daemon another --node-id"
			return nil, &paddock.Error{Code: paddock.CodeBusy, Message: msg, Err: err}
		}
		return nil, err
	}
	if err := keep(); err != nil {
		ln.Close()
		return nil, err
	}
	log.Info("joined as a node", "node", self.ID, "epoch", self.Epoch, "address", self.Address, "capacity", self.Capacity, "lease", lease)
	n := &clusterNode{store: store, self: self, ln: ln, lease: lease, log: log, fenced: make(chan struct{}),
		autoAdopt: cfg.NodeAdopt == "auto", tried: map[string]time.Time{}}
	// Renewed from the join on: what a start does before it serves (its
	// recovery) can take longer than a lease.
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	n.stopRenewing = stop
	go n.renew(rctx)
	return n, nil
}

// nodeIdentity returns the node's id (the one given, or the one kept in
// <home>/node-id, made at the first start), the id kept there (if any),
// the state directory's key, and keep, which records the id and the key
// once the node joined.
func nodeIdentity(home, given string) (id, keptID, key string, keep func() error, err error) {
	path := filepath.Join(home, "node-id")
	if b, err := os.ReadFile(path); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			keptID, key = f[0], f[1]
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", "", "", nil, fmt.Errorf("node id: %w", err)
	}
	if key == "" {
		key = randomWord(16)
	}
	id = given
	if id == "" {
		id = keptID
	}
	if id == "" {
		id = "n-" + randomWord(5)
	}
	keep = func() error {
		if id == keptID {
			return nil
		}
		if err := durable.WriteFile(path, []byte(id+" "+key+"\n")); err != nil {
			return fmt.Errorf("node id: %w", err)
		}
		return nil
	}
	return id, keptID, key, keep, nil
}

func randomWord(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// renew renews the node's lease every third of it until ctx ends, or
// until a renewal finds the lease gone (fenced). A renewal may take two
// leases (Store.Renew): on a lossy link one that is slow is not yet one
// that failed. One still
// unanswered after renewHedge (its packets lost, retransmitted later and
// later) does not hold the lease back: another goes on the lease's other
// connection. One that failed is tried again soon (renewRetry), not a
// third of a lease later.
func (n *clusterNode) renew(ctx context.Context) {
	type renewal struct {
		start time.Time
		err   error
	}
	results := make(chan renewal, postgres.LeaseConns)
	inFlight := 0
	st := &renewState{renewed: time.Now()}
	timer := time.NewTimer(n.lease / 3)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			n.checkLapse(st) // renewals under way may not have failed yet
			if inFlight < postgres.LeaseConns {
				inFlight++
				go func(start time.Time) { results <- renewal{start, n.store.Renew(ctx)} }(time.Now())
			}
			if inFlight < postgres.LeaseConns {
				timer.Reset(renewHedge(n.lease)) // unless it is answered by then
			} else {
				timer.Reset(n.lease / 3)
			}
		case r := <-results:
			inFlight--
			n.log.Debug("lease renewal answered", "node", n.self.ID, "took", time.Since(r.start).Round(time.Millisecond), "in_flight", inFlight, "err", r.err)
			if ctx.Err() != nil {
				return // leaving: a renewal cut short says nothing of the lease
			}
			if n.renewed(st, r.start, r.err) {
				return
			}
			switch {
			case r.err == nil:
				timer.Reset(max(n.lease/3-time.Since(r.start), 0))
			case inFlight == 0:
				timer.Reset(renewRetry(n.lease))
			}
		}
	}
}

// checkLapse says so, once, when the lease ran out by the node's clock:
// the store (lease.go) refuses its calls from then on.
func (n *clusterNode) checkLapse(st *renewState) {
	if !st.lapsed && time.Since(st.renewed) > n.lease {
		st.lapsed, st.failing = true, true
		n.log.Error("this node has not reached the shared store for longer than its lease: it answers node_lost to every call that needs the store until it reaches it again (another node may mark it lost and adopt its runs)",
			"node", n.self.ID, "lease", n.lease, "since", time.Since(st.renewed).Round(time.Millisecond))
	}
}

// renewState is what renew knows of the lease: when the last renewal
// that succeeded started, whether renewals fail since, and whether the
// lease ran out by the node's clock.
type renewState struct {
	renewed         time.Time
	failing, lapsed bool
}

// renewed takes in the outcome of a renewal started at start, and says
// whether the node lost its lease (it must stop).
func (n *clusterNode) renewed(st *renewState, start time.Time, err error) bool {
	switch {
	case errors.Is(err, paddock.ErrFenced):
		// Its lease may have run out by its own clock before the next
		// tick would have said so: said first (TestClusterPartition
		// reads both).
		n.checkLapse(st)
		n.log.Error("this node lost its lease: stopping (its runs may be adopted by another node)", "node", n.self.ID, "err", err)
		n.fencedErr = err
		close(n.fenced)
		return true
	case err != nil && start.Before(st.renewed):
		// Overtaken by a later renewal that succeeded.
	case err != nil:
		// Said once a failing streak: tried again every renewRetry, a
		// store that is down would fill the log.
		level := slog.LevelDebug
		if !st.failing {
			level = slog.LevelWarn
		}
		st.failing = true
		n.log.Log(context.Background(), level, "cannot renew this node's lease", "node", n.self.ID, "err", err)
		n.checkLapse(st)
	case start.After(st.renewed):
		switch {
		case st.lapsed:
			n.log.Info("this node reached the shared store again, its lease still its own", "node", n.self.ID, "after", time.Since(st.renewed).Round(time.Millisecond))
		case st.failing:
			n.log.Info("renewed this node's lease again", "node", n.self.ID, "after", time.Since(st.renewed).Round(time.Millisecond))
		}
		st.renewed, st.lapsed, st.failing = start, false, false
	}
	return false
}

// renewHedge is how long a renewal may go unanswered before another
// starts on the lease's other connection: a tenth of the lease, at least
// 50ms; on a lossy link, about when the kernel retransmits a lost packet
// the first time, and the next time twice as late.
func renewHedge(lease time.Duration) time.Duration { return max(lease/10, 50*time.Millisecond) }

// renewRetry is how soon a renewal that failed is tried again: a
// twentieth of the lease, at least 50ms.
func renewRetry(lease time.Duration) time.Duration { return max(lease/20, 50*time.Millisecond) }

// run serves the node until ctx ends: it marks lost the nodes whose
// leases ran out, every third of a lease, and wakes the event waiters
// when any node appends. fenced is called, once, if the node lost its
// lease: the daemon must stop, its runs may be another's now.
func (n *clusterNode) run(ctx context.Context, fenced func(error)) {
	go n.store.Listen(ctx, func(string) { n.m.Nodes.Wake() })
	tick := time.NewTicker(n.lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.fenced:
			fenced(n.fencedErr)
			return
		case <-tick.C:
		}
		n.reap(ctx)
		if n.autoAdopt && !n.busy.Load() {
			n.busy.Store(true)
			n.adopting.Add(1)
			go func() {
				defer n.adopting.Done()
				defer n.busy.Store(false)
				n.adoptLost(ctx)
			}()
		}
	}
}

// reap marks lost the nodes whose leases ran out (none for a lease after
// this node reached the store again following an outage: Store.Reap).
func (n *clusterNode) reap(ctx context.Context) {
	lost, err := n.store.Reap(ctx)
	for _, l := range lost {
		n.log.Warn("a node stopped renewing its lease: marked lost", "node", l.Node.ID, "epoch", l.Node.Epoch,
			"runs", len(l.Runs), "jobs_interrupted", len(l.Jobs))
	}
	if len(lost) > 0 {
		n.m.Nodes.Wake()
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, paddock.ErrFenced) {
		n.log.Warn("cannot look for lost nodes", "err", err)
	}
}

// adoptRetry is how long an automatic adoption that failed waits before
// it is tried again.
const adoptRetry = 5 * time.Minute

// adoptParallel is how many runs an automatic adoption adopts at once.
// Each is 0.1 to 1 s, the run's workspace made and its files written,
// for which other runs' adoptions do not wait; it is mostly CPU (git,
// the run's harness, its change set), so more at once would mostly share
// the node's cores (and slow down each, those in use first among them).
const adoptParallel = 4

// adoptLost adopts the runs of lost nodes that have a checkpoint
// (node_adopt = "auto") while this node has room, in Adoptable's order
// (those most likely in use first), adoptParallel at a time. Another node
// doing the same takes each run once: the take is a compare-and-swap.
func (n *clusterNode) adoptLost(ctx context.Context) {
	ids, err := n.store.Adoptable(ctx)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("cannot list lost nodes' runs to adopt", "err", err)
		}
		return
	}
	done := make(chan struct{}, len(ids))
	inFlight := 0
	defer func() {
		for ; inFlight > 0; inFlight-- {
			<-done
		}
	}()
	for _, id := range ids {
		if n.triedLately(id) {
			continue
		}
		if !n.roomForOneMore(ctx, done, &inFlight) {
			return
		}
		inFlight++
		go func() {
			defer func() { done <- struct{}{} }()
			n.adoptOne(ctx, id)
		}()
	}
}

// roomForOneMore waits until one more adoption may start beside the
// inFlight ones (each sends on done as it ends): fewer than adoptParallel
// under way, and room on this node for one more live run. The room the
// store counts leaves out the runs under way not yet taken, so they are
// counted against it too (those taken already, twice: an adoption that
// ends frees that). It says false when none may: the node is full, or
// ctx ended.
func (n *clusterNode) roomForOneMore(ctx context.Context, done <-chan struct{}, inFlight *int) bool {
	for {
		if ctx.Err() != nil {
			return false
		}
		if *inFlight < adoptParallel {
			room, err := n.store.Room(ctx)
			if err != nil {
				return false
			}
			if room > *inFlight {
				return true
			}
			if *inFlight == 0 {
				return false
			}
		}
		select {
		case <-done:
			*inFlight--
		case <-ctx.Done():
			return false
		}
	}
}

// adoptOne adopts run id, and remembers when it failed.
func (n *clusterNode) adoptOne(ctx context.Context, id string) {
	res, err := n.m.Nodes.Adopt(ctx, id, "node "+n.self.ID+" (node_adopt = auto)")
	if err != nil {
		if !paddock.IsCode(err, paddock.CodeConflict) { // taken by another node meanwhile: nothing to say
			n.log.Warn("adopting a lost node's run failed", "run", id, "err", err)
		}
		n.triedMu.Lock()
		n.tried[id] = time.Now()
		n.triedMu.Unlock()
		return
	}
	n.log.Info("adopted a lost node's run", "run", id, "from", res.FromNode, "job", res.Job)
}

// triedLately says whether an automatic adoption of run id failed less
// than adoptRetry ago.
func (n *clusterNode) triedLately(id string) bool {
	n.triedMu.Lock()
	defer n.triedMu.Unlock()
	t, ok := n.tried[id]
	return ok && time.Since(t) < adoptRetry
}

// checkAddress asks this node's own listener, at the address the other
// nodes are given, for its health, as another node would: a node whose
// address reaches nothing (a wrong --node-address) would take runs no
// call could reach.
func (n *clusterNode) checkAddress(ctx context.Context, secret string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.self.Address+"/healthz", nil)
	if err != nil {
		return err
	}
	httpapi.AsNode(req.Header, secret, n.self.ID)
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return fmt.Errorf("node %s's address %s does not reach its node listener (%w): set --node-address to an address the other nodes reach it at", n.self.ID, n.self.Address, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node %s's address %s answers %s, not this node's listener: set --node-address to an address the other nodes reach it at", n.self.ID, n.self.Address, resp.Status)
	}
	return nil
}

// errNodeAddress is why a node whose address reaches nothing stopped.
type errNodeAddress struct{ err error }

func (e errNodeAddress) Error() string { return e.err.Error() }
func (e errNodeAddress) Unwrap() error { return e.err }

// leave marks the node stopped cleanly.
func (n *clusterNode) leave() {
	n.adopting.Wait()
	n.stopRenewing()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.store.Leave(ctx); err != nil {
		n.log.Warn("cannot mark this node stopped", "err", err)
	}
}

// The node as the API's httpapi.Cluster.

func (n *clusterNode) Self() paddock.Node { return n.self }
func (n *clusterNode) Locate(ctx context.Context, id string) (paddock.Node, error) {
	return n.store.Locate(ctx, id)
}
func (n *clusterNode) Place(ctx context.Context, project string) (paddock.Node, func(), error) {
	node, held, err := n.store.Place(ctx, project)
	release := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := n.store.Unplace(ctx, held); err != nil {
			n.log.Warn("cannot give a place back", "node", node.ID, "err", err)
		}
	}
	return node, release, err
}
func (n *clusterNode) Nodes(ctx context.Context) ([]paddock.Node, error) { return n.store.Nodes(ctx) }
func (n *clusterNode) Adopt(ctx context.Context, id, by string) (*paddock.AdoptResult, error) {
	return n.m.Nodes.Adopt(ctx, id, by)
}

var _ httpapi.Cluster = (*clusterNode)(nil)
