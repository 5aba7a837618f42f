// Package tunlink joins two network namespaces with a point-to-point IPv4
// link that delays every packet by a fixed time in each direction: a TUN
// device in each namespace and a forwarding loop in this process between
// them. The lab uses it for the city-core links when the kernel has no
// netem qdisc (tc netem is the usual way; some kernels are built without
// it), so that link delays derived from the cities' distances are real on
// every machine the lab runs on.
//
// The devices are not persistent: they disappear when the process that
// holds them exits, so a crashed lab leaves no link behind.
package tunlink

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/netconfig"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// End is one side of a link.
type End struct {
	Netns     string       // named namespace (ip netns add NAME)
	Interface string       // device name inside it (at most 15 bytes)
	Addr      netip.Prefix // this side's address with the link's prefix, e.g. 10.100.1.2/30
}

// Config describes a link.
type Config struct {
	A, B  End
	Delay time.Duration // one way, each direction
	MTU   int           // default 1500
	// Queue bounds the packets in flight per direction (default 8192);
	// beyond it packets are dropped, as a full router queue would.
	Queue int
}

// Link is a running link. Its counters are safe to read while it runs.
type Link struct {
	cfg     Config
	a, b    *os.File
	wg      sync.WaitGroup
	once    sync.Once
	stop    chan struct{}
	Packets atomic.Uint64 // forwarded, both directions
	Dropped atomic.Uint64 // queue full
}

// Up creates both devices, configures them and starts forwarding.
func Up(cfg Config) (*Link, error) {
	if cfg.MTU <= 0 {
		cfg.MTU = 1500
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 8192
	}
	if cfg.Delay < 0 {
		return nil, errors.New("tunlink: negative delay")
	}
	for _, e := range []End{cfg.A, cfg.B} {
		if !e.Addr.Addr().Is4() || e.Addr.Bits() >= 32 {
			return nil, fmt.Errorf("tunlink: %s: %v is not an IPv4 address with a link prefix", e.Interface, e.Addr)
		}
	}
	l := &Link{cfg: cfg, stop: make(chan struct{})}
	var err error
	if l.a, err = open(cfg.A, cfg.B.Addr.Addr(), cfg.MTU); err != nil {
		return nil, err
	}
	if l.b, err = open(cfg.B, cfg.A.Addr.Addr(), cfg.MTU); err != nil {
		l.a.Close()
		return nil, err
	}
	l.forward(l.a, l.b)
	l.forward(l.b, l.a)
	return l, nil
}

// Close stops forwarding and removes both devices.
func (l *Link) Close() error {
	l.once.Do(func() {
		close(l.stop)
		l.a.Close()
		l.b.Close()
	})
	l.wg.Wait()
	return nil
}

// open creates the TUN device of end e inside its namespace and configures
// it: address, peer, MTU, up.
func open(e End, peer netip.Addr, mtu int) (*os.File, error) {
	ns, err := netns.GetFromName(e.Netns)
	if err != nil {
		return nil, fmt.Errorf("tunlink: namespace %s: %w", e.Netns, err)
	}
	defer ns.Close()
	fd, err := tunIn(e.Netns, e.Interface)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "/dev/net/tun:"+e.Interface)
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tunlink: netlink in %s: %w", e.Netns, err)
	}
	defer h.Close()
	err = func() error {
		link, err := h.LinkByName(e.Interface)
		if err != nil {
			return err
		}
		local := net.IPNet{IP: e.Addr.Addr().AsSlice(), Mask: net.CIDRMask(32, 32)}
		remote := net.IPNet{IP: peer.AsSlice(), Mask: net.CIDRMask(e.Addr.Bits(), 32)}
		if err := h.AddrAdd(link, &netlink.Addr{IPNet: &local, Peer: &remote}); err != nil {
			return fmt.Errorf("address %v peer %v: %w", e.Addr.Addr(), peer, err)
		}
		if err := h.LinkSetMTU(link, mtu); err != nil {
			return err
		}
		return h.LinkSetUp(link)
	}()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tunlink: %s in %s: %w", e.Interface, e.Netns, err)
	}
	return f, nil
}

// tunIn opens a TUN device named name inside the named namespace: the
// device belongs to the namespace the opening thread is in.
func tunIn(ns, name string) (fd int, err error) {
	err = netconfig.InNamespace(ns, func() error {
		fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("open /dev/net/tun: %w", err)
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			unix.Close(fd)
			return fmt.Errorf("interface name %q: %w", name, err)
		}
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("create %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return -1, fmt.Errorf("tunlink: %w", err)
	}
	return fd, nil
}

type packet struct {
	b   []byte
	due time.Time
}

// forward moves packets from one device to the other, each released Delay
// after it was read. A constant delay keeps the order, so one queue and one
// writer per direction suffice.
func (l *Link) forward(from, to *os.File) {
	q := make(chan packet, l.cfg.Queue)
	pool := sync.Pool{New: func() any { b := make([]byte, l.cfg.MTU+64); return &b }} // pointers: a slice in an interface allocates
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		defer close(q)
		for {
			b := *pool.Get().(*[]byte)
			n, err := from.Read(b[:cap(b)])
			if err != nil {
				return // closed
			}
			select {
			case q <- packet{b: b[:n], due: time.Now().Add(l.cfg.Delay)}:
			default:
				l.Dropped.Add(1)
				b = b[:cap(b)]
				pool.Put(&b)
			}
		}
	}()
	go func() {
		defer l.wg.Done()
		t := time.NewTimer(0)
		<-t.C
		for p := range q {
			if d := time.Until(p.due); d > 0 {
				t.Reset(d)
				select {
				case <-t.C:
				case <-l.stop:
					return
				}
			}
			if _, err := to.Write(p.b); err == nil {
				l.Packets.Add(1)
			}
			b := p.b[:cap(p.b)]
			pool.Put(&b)
		}
	}()
}
