package netlab

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inNS runs fn on a thread in namespace ns: the sockets it makes are
// that namespace's.
func inNS(t *testing.T, ns string, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	to, err := os.Open("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close()
	if err := unix.Setns(int(to.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	fn()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatal(err) // the thread stays locked, and goes with the goroutine
	}
	runtime.UnlockOSThread()
}

// TestDelay: a round trip between two machines takes twice the delay
// more while it is on, and not once it is off.
func TestDelay(t *testing.T) {
	l, err := New()
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("closing the lab: %v", err)
		}
	})
	a, err := l.Machine("a", 1, StoreNet)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Machine("b", 2, StoreNet)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	inNS(t, b, func() { ln, err = net.Listen("tcp", l.Addr(StoreNet, 2)+":7") })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	var c net.Conn
	inNS(t, a, func() { c, err = net.DialTimeout("tcp", l.Addr(StoreNet, 2)+":7", 5*time.Second) })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rtt := func() time.Duration {
		t.Helper()
		best := time.Hour
		for range 3 {
			start := time.Now()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
				t.Fatal(err)
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	before := rtt()
	const d = 150 * time.Millisecond
	if err := l.Delay("a", StoreNet, d); err != nil {
		if errors.Is(err, ErrUnavailable) {
			t.Skipf("%v", err)
		}
		t.Fatal(err)
	}
	during := rtt()
	if err := l.Delay("a", StoreNet, 0); err != nil {
		t.Fatal(err)
	}
	after := rtt()
	t.Logf("round trip: %s before, %s with %s each way, %s after", before, during, d, after)
	if during < 2*d || during > 2*d+time.Second {
		t.Errorf("a round trip took %s with %s each way: want about %s", during, d, 2*d)
	}
	if after >= d {
		t.Errorf("a round trip took %s once the delay was off", after)
	}
}
