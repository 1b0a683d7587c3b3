package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paddock-dev/paddock/internal/testenv"
	"github.com/paddock-dev/paddock/postgres/pgtest"
)

// netLab is a small network of the test's own: a namespace acting as the
// switch, with one bridge per network (the store's, the nodes'), and a
// namespace per machine (PostgreSQL, each node), each joined to the
// networks it is on by a veth pair whose switch end the test takes down to
// cut the link. Addresses are 10.213.N.H/24: nothing outside reaches
// them, and they reach nothing outside. Every namespace (and with it its
// links, addresses, rules) is deleted when the test ends, however it ends.
type netLab struct {
	t      *testing.T
	prefix string // pdk-XXXXXXX: the namespaces' names start with it
	sw     string // the switch's namespace
	nets   map[string]int
}

// Networks of the lab: the store's (PostgreSQL and the nodes) and the
// nodes' own (the calls they forward to each other).
const (
	storeNet = "db"
	peerNet  = "pr"
)

// needNetLab makes the lab, or skips: it needs root, ip (iproute2), nft
// and nsenter, and a kernel that makes network namespaces.
func needNetLab(t *testing.T) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network partitions need root: network namespaces, veth pairs and nftables rules")
	}
	for _, tool := range []string{"ip", "nsenter", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Need(t, "network partitions need %s (iproute2, util-linux, nftables)", tool)
		}
	}
	l := &netLab{t: t, prefix: "pdk-" + randomWord(4), nets: map[string]int{storeNet: 1, peerNet: 2}}
	l.sw = l.prefix + "-sw"
	if out, err := exec.Command("ip", "netns", "add", l.sw).CombinedOutput(); err != nil {
		testenv.Need(t, "cannot make a network namespace (%v): %s", err, out)
	}
	t.Cleanup(func() { l.delete(l.sw) })
	for net := range l.nets {
		l.ip(l.sw, "link", "add", "br-"+net, "type", "bridge")
		l.ip(l.sw, "link", "set", "br-"+net, "up")
	}
	return l
}

// ip runs ip -n ns args…, failing the test if it fails.
func (l *netLab) ip(ns string, args ...string) {
	l.t.Helper()
	l.run("ip", append([]string{"-n", ns}, args...)...)
}

func (l *netLab) run(name string, args ...string) {
	l.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		l.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// delete deletes namespace ns: its veth ends go with it, and their peers
// in the switch with them.
func (l *netLab) delete(ns string) {
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		l.t.Logf("ip netns del %s: %v %s", ns, err, out)
	}
}

// machine makes namespace name (its loopback up) on the networks given,
// host h on each: its address there is 10.213.N.h. The namespace is
// deleted when the test ends, after (cleanups run last first) the
// processes started in it afterwards are stopped.
func (l *netLab) machine(name string, h int, nets ...string) string {
	l.t.Helper()
	ns := l.prefix + "-" + name
	l.run("ip", "netns", "add", ns)
	l.t.Cleanup(func() { l.delete(ns) })
	l.ip(ns, "link", "set", "lo", "up")
	for _, net := range nets {
		end := l.end(name, net)
		l.run("ip", "link", "add", net+"0", "netns", ns, "type", "veth", "peer", "name", end, "netns", l.sw)
		l.ip(l.sw, "link", "set", end, "master", "br-"+net)
		l.ip(l.sw, "link", "set", end, "up")
		l.ip(ns, "addr", "add", l.addr(net, h)+"/24", "dev", net+"0")
		l.ip(ns, "link", "set", net+"0", "up")
	}
	return ns
}

// end is the switch's end of machine name's link to net.
func (l *netLab) end(name, net string) string { return net + "-" + name }

// addr is host h's address on net.
func (l *netLab) addr(net string, h int) string { return fmt.Sprintf("10.213.%d.%d", l.nets[net], h) }

// cut takes machine name's link to net down at the switch: its packets go
// nowhere, and nothing comes back, as when a cable or a switch port dies.
// The machine's own interface stays up, with its routes.
func (l *netLab) cut(name, net string) { l.ip(l.sw, "link", "set", l.end(name, net), "down") }

// mend brings the link cut took down back up.
func (l *netLab) mend(name, net string) { l.ip(l.sw, "link", "set", l.end(name, net), "up") }

// lossy drops about one packet in every n both ways on machine name's
// link to net (nftables in the switch, on the bridge); n == 0 drops none
// again. The kernel here may lack netem; nftables' random numbers do not.
func (l *netLab) lossy(name, net string, n int) {
	l.t.Helper()
	exec.Command("ip", "netns", "exec", l.sw, "nft", "delete", "table", "bridge", "lossy-"+name).Run()
	if n == 0 {
		return
	}
	end := l.end(name, net)
	rules := fmt.Sprintf(`table bridge lossy-%[1]s {
	chain drops { type filter hook forward priority 0; policy accept;
		iifname %[2]q numgen random mod %[3]d 0 drop
		oifname %[2]q numgen random mod %[3]d 0 drop
	}
}`, name, end, n)
	cmd := exec.Command("ip", "netns", "exec", l.sw, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		l.t.Fatalf("nft: %v\n%s", err, out)
	}
}

// via is the argv that starts a program inside namespace ns.
func (l *netLab) via(ns string) []string { return []string{"nsenter", "--net=/run/netns/" + ns, "--"} }

// labPostgres is a PostgreSQL server of the test's own, in its own
// namespace: the nodes reach it over the lab's store network, the test
// itself over a unix socket in its directory.
type labPostgres struct {
	t        *testing.T
	lab      *netLab
	ns, dir  string
	bin      string
	uid, gid int
	proc     *exec.Cmd
	done     chan error
}

// startLabPostgres makes a cluster (initdb) and starts its server in
// machine "pg" (host 1 of the store network), trusting the lab's
// addresses. It skips without PostgreSQL.
func startLabPostgres(t *testing.T, l *netLab) *labPostgres {
	t.Helper()
	bin, err := pgtest.FindBin()
	if err != nil {
		testenv.Need(t, "PostgreSQL is not installed (%v); apt-get install postgresql", err)
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		testenv.Need(t, "no postgres user to run PostgreSQL as: %v", err)
	}
	// Not under t.TempDir, whose parent only root may enter.
	dir, err := os.MkdirTemp("", l.prefix+"-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &labPostgres{t: t, lab: l, bin: bin, dir: dir}
	p.uid, _ = strconv.Atoi(u.Uid)
	p.gid, _ = strconv.Atoi(u.Gid)
	os.Chown(p.dir, p.uid, p.gid)
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(p.dir, "data"), "-U", pgtest.Superuser,
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(p.uid), Gid: uint32(p.gid)}}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	hba, err := os.OpenFile(filepath.Join(p.dir, "data", "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(hba, "host all all 10.213.0.0/16 trust\n")
	hba.Close()
	p.ns = l.machine("pg", 1, storeNet)
	p.start()
	t.Cleanup(p.stop)
	conn := p.conn("postgres")
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE paddock"); err != nil {
		t.Fatal(err)
	}
	return p
}

// start starts the server and waits until it takes connections.
func (p *labPostgres) start() {
	p.t.Helper()
	argv := append([]string{"nsenter", "--net=/run/netns/" + p.ns, "--setuid", strconv.Itoa(p.uid), "--setgid", strconv.Itoa(p.gid),
		"--", filepath.Join(p.bin, "postgres")}, "-D", filepath.Join(p.dir, "data"), "-k", p.dir,
		"-c", "listen_addresses="+p.lab.addr(storeNet, 1), "-c", "max_connections=100", "-c", "fsync=off", "-c", "log_min_messages=warning")
	logf, err := os.OpenFile(filepath.Join(p.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	defer logf.Close()
	p.proc = exec.Command(argv[0], argv[1:]...)
	p.proc.Stdout, p.proc.Stderr = logf, logf
	if err := p.proc.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.done = make(chan error, 1)
	go func(c *exec.Cmd, done chan error) { done <- c.Wait() }(p.proc, p.done)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, p.dsn("postgres"))
		cancel()
		if err == nil {
			c.Close(context.Background())
			return
		}
		exited := false
		select {
		case werr := <-p.done:
			p.done <- werr
			exited = true
		default:
		}
		if exited || i > 300 {
			logb, _ := os.ReadFile(filepath.Join(p.dir, "postgres.log"))
			p.t.Fatalf("postgres did not start: %v\n%s", err, logb)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop stops the server at once (SIGQUIT: PostgreSQL's immediate
// shutdown, a crash as far as its clients know) and waits for it.
func (p *labPostgres) stop() {
	if p.proc == nil || p.proc.Process == nil {
		return
	}
	p.proc.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.proc.Process.Kill()
		<-p.done
	}
	p.proc = nil
}

// halt stops the server with sig and waits for it and its backends to
// exit: syscall.SIGINT is PostgreSQL's fast shutdown (it ends every
// session, telling its client so, and writes a checkpoint); SIGKILL
// kills the postmaster alone, as a crash would, its backends ending when
// they notice (the next start recovers from the log).
func (p *labPostgres) halt(sig syscall.Signal) {
	p.t.Helper()
	pid := p.proc.Process.Pid
	kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	p.proc.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("postgres did not stop on %v within 30s", sig)
	}
	p.proc = nil
	deadline := time.Now().Add(30 * time.Second)
	for _, f := range strings.Fields(string(kids)) {
		kid, _ := strconv.Atoi(f)
		for kid > 0 && running(kid) {
			if time.Now().After(deadline) {
				syscall.Kill(kid, syscall.SIGKILL)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// running says whether process pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// dsn is the test's own way to database db: the unix socket.
func (p *labPostgres) dsn(db string) string {
	return fmt.Sprintf("host=%s port=5432 user=%s sslmode=disable dbname=%s", p.dir, pgtest.Superuser, db)
}

// url is the nodes' way to the paddock database: over the store network.
func (p *labPostgres) url() string {
	return fmt.Sprintf("postgres://%s@%s:5432/paddock?sslmode=disable", pgtest.Superuser, p.lab.addr(storeNet, 1))
}

func (p *labPostgres) conn(db string) *pgx.Conn {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, p.dsn(db))
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// pool is a pool of the test's own connections to database db, closed
// when the test ends.
func (p *labPostgres) pool(db string) *pgxpool.Pool {
	p.t.Helper()
	pool, err := pgxpool.New(context.Background(), p.dsn(db))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(pool.Close)
	return pool
}
