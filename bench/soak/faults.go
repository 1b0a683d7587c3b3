package main

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/netlab"
)

// The kinds of fault the schedule draws from.
const (
	faultKill      = "kill"        // SIGKILL a node; start it again after the fault's length
	faultCutStore  = "cut-store"   // cut a node from PostgreSQL
	faultCutPeers  = "cut-peers"   // cut a node from the other nodes
	faultLossy     = "lossy-store" // drop one packet in three each way between a node and PostgreSQL
	faultPGRestart = "pg-restart"  // PostgreSQL's fast shutdown (SIGINT), started again after the fault's length
	faultPGKill    = "pg-kill"     // PostgreSQL's postmaster killed (SIGKILL), started again after the fault's length
)

var faultKinds = []string{faultKill, faultCutStore, faultCutPeers, faultLossy, faultPGRestart, faultPGKill}

// fault is one step of the schedule: at At (from the soak's start), Kind
// on Node (for the node faults) for Len.
type fault struct {
	At   time.Duration
	Kind string
	Node string
	Len  time.Duration

	began, healed time.Time
	err           error
}

func (f *fault) String() string {
	on := ""
	if f.Node != "" {
		on = " " + f.Node
	}
	return fmt.Sprintf("%7s  %-11s%-4s for %s", f.At.Round(time.Second), f.Kind, on, f.Len.Round(100*time.Millisecond))
}

// schedule draws the faults from seed: one about every 70 s (at least
// three), each in a slot of its own between a tenth of the duration and
// 85% of it (the clients' last runs finish with every link whole), none
// overlapping. The first six are the six kinds in a drawn order, so that
// even a short soak sees each kind it has room for.
func schedule(seed int64, d time.Duration, nodes []string) []*fault {
	rng := rand.New(rand.NewSource(seed))
	n := max(3, int(d/(70*time.Second)))
	from, to := d/10, d*85/100
	slot := (to - from) / time.Duration(n)
	kinds := append([]string(nil), faultKinds...)
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	var out []*fault
	for i := range n {
		f := &fault{Kind: kinds[i%len(kinds)]}
		if i >= len(kinds) {
			f.Kind = faultKinds[rng.Intn(len(faultKinds))]
		}
		if f.Kind != faultPGRestart && f.Kind != faultPGKill {
			f.Node = nodes[rng.Intn(len(nodes))]
		}
		// 3 to 12 s, within 60% of the slot; the start somewhere in the
		// rest of it.
		f.Len = min(3*time.Second+time.Duration(rng.Int63n(int64(9*time.Second))), slot*6/10)
		f.At = from + time.Duration(i)*slot + time.Duration(rng.Int63n(int64(slot-f.Len)/2+1))
		out = append(out, f)
	}
	return out
}

// inject plays the schedule from start until it ends or ctx does,
// healing each fault after its length.
func (s *soak) inject(ctx context.Context, start time.Time, faults []*fault) {
	for _, f := range faults {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(f.At))):
		}
		f.began = time.Now()
		s.logf("fault: %s", strings.TrimSpace(f.String()))
		f.err = s.play(ctx, f)
		f.healed = time.Now()
		if f.err != nil {
			s.logf("fault %s: %v", f.Kind, f.err)
		}
	}
}

// play does fault f and heals it after its length.
func (s *soak) play(ctx context.Context, f *fault) error {
	n := s.node(f.Node)
	wait := func() {
		select {
		case <-ctx.Done():
		case <-time.After(f.Len):
		}
	}
	switch f.Kind {
	case faultKill:
		n.kill(f.Len) // the supervisor starts it again after f.Len
		wait()
		return nil
	case faultCutStore, faultCutPeers:
		net := netlab.StoreNet
		if f.Kind == faultCutPeers {
			net = netlab.PeerNet
		}
		if err := s.lab.Cut(n.id, net); err != nil {
			return err
		}
		wait()
		return s.lab.Mend(n.id, net)
	case faultLossy:
		if err := s.lab.Lossy(n.id, netlab.StoreNet, 3); err != nil {
			return err
		}
		wait()
		return s.lab.Lossy(n.id, netlab.StoreNet, 0)
	case faultPGRestart, faultPGKill:
		sig := syscall.SIGINT
		if f.Kind == faultPGKill {
			sig = syscall.SIGKILL
		}
		herr := s.pg.Halt(sig)
		wait()
		if err := s.pg.Start(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("starting PostgreSQL again: %w (halting it: %v)", err, herr)
		}
		s.db.Reset() // the soak's own connections died with the server
		return herr
	}
	return fmt.Errorf("no fault %q", f.Kind)
}

// heal mends every link and starts PostgreSQL if it is down: the state
// the checks run in (the nodes come back by their supervisors).
func (s *soak) heal(ctx context.Context) error {
	var errs []string
	for _, n := range s.nodes {
		for _, net := range []string{netlab.StoreNet, netlab.PeerNet} {
			if err := s.lab.Mend(n.id, net); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if err := s.lab.Lossy(n.id, netlab.StoreNet, 0); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("healing the lab: %s", strings.Join(errs, "; "))
	}
	return nil
}
