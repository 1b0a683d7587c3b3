package netlab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The kernel's NFQUEUE protocol (include/uapi/linux/netfilter/nfnetlink_queue.h):
// the few messages and attributes a delay needs.
const (
	nfnlSubsysQueue   = 3
	nfqnlMsgPacket    = 0
	nfqnlMsgVerdict   = 1
	nfqnlMsgConfig    = 2
	nfqaPacketHdr     = 1
	nfqaVerdictHdr    = 2
	nfqaCfgCmd        = 1
	nfqaCfgParams     = 2
	nfqnlCfgCmdBind   = 1
	nfqnlCopyMeta     = 1
	nfAccept          = 1
	nfnetlinkV0       = 0
	delayQueueBase    = 40 // queue numbers of the lab's delays: 40, 41, ...
	delayReadBuffer   = 4 << 20
	delayIptablesWait = "5"
)

// delayer holds the packets of one machine's link to one network, each
// for the link's delay, then lets them go in the order they came.
type delayer struct {
	ns, dev string
	queue   uint16
	conn    *netlink.Conn

	mu      sync.Mutex
	delay   time.Duration
	pending []held // in arrival order
	wake    chan struct{}
	done    chan struct{}
	err     error // the first failure of the reader or the releaser
}

type held struct {
	id  uint32
	due time.Time
}

// Delay holds every packet machine name sends or receives on its link to
// net for d before it goes on, both ways (a round trip takes 2d more): a
// long link. netem would do this in the kernel; the kernel here may lack
// it (CONFIG_NET_SCH_NETEM), so the machine's own iptables hand the
// link's packets to NFQUEUE, and this process gives each its verdict d
// after it came. d == 0 takes the delay away (the packets held by then go
// on when due). It needs iptables with the NFQUEUE target; Close ends it.
func (l *Lab) Delay(name, net string, d time.Duration) error {
	ns := l.Prefix + "-" + name
	dev := net + "0"
	key := ns + "/" + dev
	l.mu.Lock()
	if l.delays == nil {
		l.delays = map[string]*delayer{}
	}
	dl := l.delays[key]
	if dl == nil {
		if d == 0 {
			l.mu.Unlock()
			return nil
		}
		if _, err := exec.LookPath("iptables"); err != nil {
			l.mu.Unlock()
			return fmt.Errorf("%w: a delay needs iptables (its NFQUEUE target)", ErrUnavailable)
		}
		var err error
		if dl, err = startDelayer(ns, dev, uint16(delayQueueBase+len(l.delays))); err != nil {
			l.mu.Unlock()
			return fmt.Errorf("delay on %s's link to %s: %w", name, net, err)
		}
		l.delays[key] = dl
		l.closers = append(l.closers, dl.close) // as onClose, under the lock held here
	}
	l.mu.Unlock()
	return dl.set(d)
}

// startDelayer binds NFQUEUE queue in namespace ns and starts reading it;
// no packet is queued until set adds the rules.
func startDelayer(ns, dev string, queue uint16) (*delayer, error) {
	f, err := os.Open("/run/netns/" + ns)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(f.Fd())})
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	if err := conn.SetReadBuffer(delayReadBuffer); err != nil {
		conn.Close()
		return nil, fmt.Errorf("netlink read buffer: %w", err)
	}
	dl := &delayer{ns: ns, dev: dev, queue: queue, conn: conn, wake: make(chan struct{}, 1), done: make(chan struct{})}
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, 0} // command, pad, protocol family (unused since Linux 3.8)
	params := binary.BigEndian.AppendUint32(nil, 0xffff)
	params = append(params, nfqnlCopyMeta, 0, 0, 0)
	for _, attr := range []netlink.Attribute{{Type: nfqaCfgCmd, Data: cmd}, {Type: nfqaCfgParams, Data: params}} {
		if err := dl.request(nfqnlMsgConfig, attr, true); err != nil {
			conn.Close()
			return nil, fmt.Errorf("bind NFQUEUE %d: %w", queue, err)
		}
	}
	go dl.read()
	go dl.release()
	return dl, nil
}

// request sends one NFQUEUE message with one attribute; ack waits for the
// kernel's answer.
func (dl *delayer) request(typ uint16, attr netlink.Attribute, ack bool) error {
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(attr.Type, attr.Data)
	attrs, err := ae.Encode()
	if err != nil {
		return err
	}
	msg := netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(nfnlSubsysQueue<<8 | typ), Flags: netlink.Request},
		Data:   append([]byte{unix.AF_UNSPEC, nfnetlinkV0, byte(dl.queue >> 8), byte(dl.queue)}, attrs...),
	}
	if !ack {
		_, err := dl.conn.Send(msg)
		return err
	}
	msg.Header.Flags |= netlink.Acknowledge
	_, err = dl.conn.Execute(msg)
	return err
}

// rules are the iptables rules that queue the link's packets, both ways.
func (dl *delayer) rules() [][]string {
	q := []string{"-j", "NFQUEUE", "--queue-num", strconv.Itoa(int(dl.queue)), "--queue-bypass"}
	return [][]string{
		append([]string{"OUTPUT", "-o", dl.dev}, q...),
		append([]string{"PREROUTING", "-i", dl.dev}, q...),
	}
}

func (dl *delayer) iptables(op string, rule []string) error {
	args := append([]string{"netns", "exec", dl.ns, "iptables", "-w", delayIptablesWait, "-t", "mangle", op}, rule...)
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables %s: %w: %s", op, err, out)
	}
	return nil
}

// set makes the link's delay d, adding or removing its rules.
func (dl *delayer) set(d time.Duration) error {
	dl.mu.Lock()
	was := dl.delay
	dl.delay = d
	err := dl.err
	dl.mu.Unlock()
	if err != nil && d > 0 {
		return err // its packets would be held for good: no more rules
	}
	switch {
	case was == 0 && d > 0:
		for _, r := range dl.rules() {
			if err := dl.iptables("-A", r); err != nil {
				return err
			}
		}
	case was > 0 && d == 0:
		errs := []error{err}
		for _, r := range dl.rules() {
			errs = append(errs, dl.iptables("-D", r))
		}
		return errors.Join(errs...)
	}
	return err
}

// read takes in the queued packets, each due its delay from now.
func (dl *delayer) read() {
	for {
		msgs, err := dl.conn.Receive()
		if err != nil {
			select {
			case <-dl.done:
				return
			default:
			}
			if errors.Is(err, unix.ENOBUFS) {
				continue // reports of packets lost (the socket overran): the kernel dropped them, retransmitted later
			}
			dl.fail(fmt.Errorf("NFQUEUE %d: %w", dl.queue, err))
			return
		}
		now := time.Now()
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(nfnlSubsysQueue<<8|nfqnlMsgPacket) || len(m.Data) < 4 {
				continue
			}
			ad, err := netlink.NewAttributeDecoder(m.Data[4:])
			if err != nil {
				continue
			}
			for ad.Next() {
				if ad.Type() == nfqaPacketHdr && len(ad.Bytes()) >= 4 {
					dl.mu.Lock()
					dl.pending = append(dl.pending, held{binary.BigEndian.Uint32(ad.Bytes()), now.Add(dl.delay)})
					dl.mu.Unlock()
				}
			}
		}
		select {
		case dl.wake <- struct{}{}:
		default:
		}
	}
}

// release lets each held packet go when it is due.
func (dl *delayer) release() {
	for {
		dl.mu.Lock()
		next, ok := held{}, len(dl.pending) > 0
		if ok {
			next = dl.pending[0]
		}
		dl.mu.Unlock()
		wait := time.Hour
		if ok {
			wait = time.Until(next.due)
		}
		if wait > 0 {
			select {
			case <-dl.done:
				return
			case <-dl.wake:
				continue
			case <-time.After(wait):
				continue
			}
		}
		v := binary.BigEndian.AppendUint32(nil, nfAccept)
		v = binary.BigEndian.AppendUint32(v, next.id)
		if err := dl.request(nfqnlMsgVerdict, netlink.Attribute{Type: nfqaVerdictHdr, Data: v}, false); err != nil {
			dl.fail(fmt.Errorf("NFQUEUE %d verdict: %w", dl.queue, err))
			return
		}
		dl.mu.Lock()
		dl.pending = dl.pending[1:]
		dl.mu.Unlock()
	}
}

func (dl *delayer) failed() error {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	return dl.err
}

func (dl *delayer) fail(err error) {
	dl.mu.Lock()
	if dl.err == nil {
		dl.err = err
	}
	dl.mu.Unlock()
}

// close takes the rules away, lets the packets held go when due, and
// ends the reader.
func (dl *delayer) close() error {
	err := dl.set(0)
	for i := 0; i < 100 && dl.failed() == nil; i++ {
		dl.mu.Lock()
		n := len(dl.pending)
		dl.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(dl.done)
	return errors.Join(err, dl.conn.Close())
}
