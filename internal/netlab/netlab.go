// Package netlab is a small network of a test's or a benchmark's own on
// this machine: a namespace acting as the switch, with one bridge per
// network (the store's, the nodes'), and a namespace per machine
// (PostgreSQL, each node), each joined to the networks it is on by a veth
// pair whose switch end Cut takes down. Addresses are 10.213.N.H/24:
// nothing outside reaches them, and they reach nothing outside.
//
// It needs root, ip (iproute2), nsenter (util-linux) and nft (nftables);
// New says ErrUnavailable without them, and Delay without iptables. Close removes every namespace
// (with it its links, addresses and nftables tables), stops every process
// the lab started and removes every directory it made, however far the
// lab got.
package netlab

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
)

// Networks of the lab: the store's (PostgreSQL and the nodes) and the
// nodes' own (the calls they forward to each other).
const (
	StoreNet = "db"
	PeerNet  = "pr"
)

// ErrUnavailable is what New's error wraps when this machine cannot make
// the lab (not root, a tool missing, no network namespaces): a test skips.
var ErrUnavailable = errors.New("the network lab cannot run here")

// Lab is one lab: its switch, its machines, its PostgreSQL servers.
type Lab struct {
	// Prefix (pdk-XXXXXXXX) starts the name of every namespace, nftables
	// table and directory of the lab.
	Prefix string
	sw     string
	nets   map[string]int

	mu       sync.Mutex
	machines []string // namespaces, in the order made
	closers  []func() error
	dirs     []string
	delays   map[string]*delayer // by namespace/device
	closed   bool
}

// New makes the lab's switch, with a bridge per network. Its error wraps
// ErrUnavailable when the machine cannot make it.
func New() (_ *Lab, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: network partitions need root: network namespaces, veth pairs and nftables rules", ErrUnavailable)
	}
	for _, tool := range []string{"ip", "nsenter", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: network partitions need %s (iproute2, util-linux, nftables)", ErrUnavailable, tool)
		}
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("a name for the lab: %w", err)
	}
	l := &Lab{Prefix: "pdk-" + hex.EncodeToString(b[:]), nets: map[string]int{StoreNet: 1, PeerNet: 2}}
	l.sw = l.Prefix + "-sw"
	if out, err := exec.Command("ip", "netns", "add", l.sw).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: cannot make a network namespace (%v): %s", ErrUnavailable, err, strings.TrimSpace(string(out)))
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Close())
		}
	}()
	for _, net := range []string{StoreNet, PeerNet} {
		if err := l.ip(l.sw, "link", "add", "br-"+net, "type", "bridge"); err != nil {
			return nil, err
		}
		if err := l.ip(l.sw, "link", "set", "br-"+net, "up"); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Close stops what the lab started (last first), deletes its machines'
// namespaces and the switch's (their links, addresses and nftables tables
// go with them) and removes its directories. It returns every failure; a
// second Close does nothing.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	closers, machines, dirs := l.closers, l.machines, l.dirs
	l.mu.Unlock()
	var errs []error
	for _, c := range slices.Backward(closers) {
		errs = append(errs, c())
	}
	for _, ns := range slices.Backward(machines) {
		errs = append(errs, deleteNS(ns))
	}
	errs = append(errs, deleteNS(l.sw))
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// onClose has Close call fn, before it deletes the namespaces; the last
// registered is called first.
func (l *Lab) onClose(fn func() error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closers = append(l.closers, fn)
}

// TempDir makes a directory Close removes, one every user may enter
// (PostgreSQL runs as its own user).
func (l *Lab) TempDir(name string) (string, error) {
	dir, err := os.MkdirTemp("", l.Prefix+"-"+name+"-")
	if err != nil {
		return "", fmt.Errorf("a directory for the lab: %w", err)
	}
	l.mu.Lock()
	l.dirs = append(l.dirs, dir)
	l.mu.Unlock()
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", fmt.Errorf("a directory for the lab: %w", err)
	}
	return dir, nil
}

func deleteNS(ns string) error {
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del %s: %w: %s", ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ip runs ip -n ns args….
func (l *Lab) ip(ns string, args ...string) error {
	return run("ip", append([]string{"-n", ns}, args...)...)
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Machine makes namespace Prefix-name (its loopback up) on the networks
// given, host h on each: its address there is Addr(net, h). It returns
// the namespace's name. Close deletes it.
func (l *Lab) Machine(name string, h int, nets ...string) (string, error) {
	ns := l.Prefix + "-" + name
	if err := run("ip", "netns", "add", ns); err != nil {
		return "", err
	}
	l.mu.Lock()
	l.machines = append(l.machines, ns)
	l.mu.Unlock()
	if err := l.ip(ns, "link", "set", "lo", "up"); err != nil {
		return "", err
	}
	for _, net := range nets {
		if _, ok := l.nets[net]; !ok {
			return "", fmt.Errorf("no network %q in the lab", net)
		}
		end := end(name, net)
		steps := [][]string{
			{"ip", "link", "add", net + "0", "netns", ns, "type", "veth", "peer", "name", end, "netns", l.sw},
			{"ip", "-n", l.sw, "link", "set", end, "master", "br-" + net},
			{"ip", "-n", l.sw, "link", "set", end, "up"},
			{"ip", "-n", ns, "addr", "add", l.Addr(net, h) + "/24", "dev", net + "0"},
			{"ip", "-n", ns, "link", "set", net + "0", "up"},
		}
		for _, s := range steps {
			if err := run(s[0], s[1:]...); err != nil {
				return "", err
			}
		}
	}
	return ns, nil
}

// end is the switch's end of machine name's link to net.
func end(name, net string) string { return net + "-" + name }

// Addr is host h's address on net.
func (l *Lab) Addr(net string, h int) string { return fmt.Sprintf("10.213.%d.%d", l.nets[net], h) }

// Cut takes machine name's link to net down at the switch: its packets go
// nowhere, and nothing comes back, as when a cable or a switch port dies.
// The machine's own interface stays up, with its routes.
func (l *Lab) Cut(name, net string) error { return l.ip(l.sw, "link", "set", end(name, net), "down") }

// Mend brings the link Cut took down back up.
func (l *Lab) Mend(name, net string) error { return l.ip(l.sw, "link", "set", end(name, net), "up") }

// Lossy drops about one packet in every n both ways on machine name's
// link to net (nftables in the switch, on the bridge); n == 0 drops none
// again. The kernel here may lack netem; nftables' random numbers do not.
// The table lives in the switch's namespace, and goes with it.
func (l *Lab) Lossy(name, net string, n int) error {
	table := "lossy-" + name
	exists := exec.Command("ip", "netns", "exec", l.sw, "nft", "list", "table", "bridge", table).Run() == nil
	if exists {
		if err := run("ip", "netns", "exec", l.sw, "nft", "delete", "table", "bridge", table); err != nil {
			return err
		}
	}
	if n == 0 {
		return nil
	}
	e := end(name, net)
	rules := fmt.Sprintf(`table bridge %[1]s {
	chain drops { type filter hook forward priority 0; policy accept;
		iifname %[2]q numgen random mod %[3]d 0 drop
		oifname %[2]q numgen random mod %[3]d 0 drop
	}
}`, table, e, n)
	cmd := exec.Command("ip", "netns", "exec", l.sw, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Via is the argv that starts a program inside namespace ns: nsenter
// execs it, so the process started is the program's own.
func (l *Lab) Via(ns string) []string { return []string{"nsenter", "--net=/run/netns/" + ns, "--"} }

// OnClose has Close call fn before it deletes the namespaces, the last
// registered first: a process started in one of the lab's machines
// stopped before its machine goes.
func (l *Lab) OnClose(fn func() error) { l.onClose(fn) }
