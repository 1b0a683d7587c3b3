package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/internal/netlab"
)

// node is one paddock daemon of the soak, in a machine (network
// namespace) of its own on both networks, kept running by a supervisor as
// systemd's Restart=always would: a node that stops by itself (fenced,
// its lease lost) is started again a second later; one the schedule
// killed, when the schedule says.
type node struct {
	id   string
	host int
	ns   string
	home string
	c    *client.Client

	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{} // closed when cmd has exited
	downUntil time.Time     // the schedule keeps it down until then
	stopping  bool
	starts    int
	exits     int // exits the schedule did not ask for (a fenced node stops)
	lastErr   error
}

// startNode starts the node's daemon and waits for its socket to answer.
func (s *soak) startNode(ctx context.Context, n *node) error {
	if err := os.MkdirAll(n.home, 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(n.home, "soak-daemon.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	listen := s.lab.Addr(netlab.PeerNet, n.host) + ":7000"
	argv := append(s.lab.Via(n.ns), s.cfg.Bin, "serve", "--home", n.home, "--log-level", "info",
		"--store", s.pg.URL(), "--node-id", n.id, "--node-lease", s.cfg.Lease.String(),
		"--node-listen", listen, "--node-address", "http://"+listen, "--node-adopt", "auto", "--node-capacity", "1000")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "PADDOCK_NO_AUTOSTART=1")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting node %s: %w", n.id, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.starts++
	n.mu.Unlock()
	for i := 0; ; i++ {
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := n.c.Health(hctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("node %s exited as it started: %v\n%s", n.id, cmd.ProcessState, logTail(filepath.Join(n.home, "soak-daemon.log"), 20))
		default:
		}
		if i > 1200 || ctx.Err() != nil {
			return fmt.Errorf("node %s did not answer within 30s: %w\n%s", n.id, err, logTail(filepath.Join(n.home, "soak-daemon.log"), 20))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// running says whether the node's daemon is running.
func (n *node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// kill kills the node's daemon with SIGKILL and keeps it down for d.
func (n *node) kill(d time.Duration) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.downUntil = time.Now().Add(d)
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// supervise starts the node again whenever it is down and the schedule
// does not keep it down, until ctx ends.
func (s *soak) supervise(ctx context.Context, n *node) {
	for ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		n.mu.Lock()
		up := n.done != nil
		if up {
			select {
			case <-n.done:
				up = false
			default:
			}
		}
		wait := n.stopping || time.Now().Before(n.downUntil)
		killed := !n.downUntil.IsZero()
		n.mu.Unlock()
		if up || wait {
			continue
		}
		if !killed {
			n.mu.Lock()
			n.exits++
			n.mu.Unlock()
			s.logf("node %s stopped by itself (%s); starting it again", n.id, lastLine(filepath.Join(n.home, "soak-daemon.log"), "stopping"))
			time.Sleep(time.Second)
		}
		n.mu.Lock()
		n.downUntil = time.Time{}
		n.mu.Unlock()
		if err := s.startNode(ctx, n); err != nil {
			n.mu.Lock()
			n.lastErr = err
			n.mu.Unlock()
			s.logf("node %s did not start again: %v", n.id, err)
		}
	}
}

// stop stops the node's daemon: SIGTERM, SIGKILL a minute later (an error).
func (n *node) stop() error {
	n.mu.Lock()
	n.stopping = true
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("node %s did not stop a minute after SIGTERM:\n%s", n.id, logTail(filepath.Join(n.home, "soak-daemon.log"), 20))
	}
}

func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// lastLine is the last line of the log at path holding word, shortened.
func lastLine(path, word string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], word) {
			l := lines[i]
			if len(l) > 200 {
				l = l[:200] + "…"
			}
			return l
		}
	}
	return "no line says " + word
}
