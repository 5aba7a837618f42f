// Package port holds a loopback TCP port for a whole test, so that a server
// can stop and start again on the same address (an etcd outage, a killed
// edge) without another process taking the port in between.
//
// Binding 127.0.0.1:0 and reading the address back is the rule for a server
// that starts once: the kernel hands out a port nobody holds. A server that
// must come back on the same port cannot do that twice; and picking a free
// port, closing it and binding it again later races with every other test
// on the machine (two "free" ports handed out a moment apart can even be
// the same one). Hold closes that race: it binds a socket to 127.0.0.1:0
// with SO_REUSEPORT and never listens on it. While that socket is open:
//
//   - the kernel never hands the port out to another bind(:0) or to an
//     outgoing connection, and an explicit bind of it fails (EADDRINUSE)
//     unless the socket sets SO_REUSEPORT too (and runs as the same user);
//   - a listener opened with SO_REUSEPORT (Listen, ListenConfig; etcd's
//     SocketOpts.ReusePort) shares the port and receives every connection:
//     a socket that does not listen takes none;
//   - while no listener is open, a connection is refused, exactly as with a
//     dead server.
//
// Only one listener at a time: two SO_REUSEPORT listeners on a held port
// would share its connections. Linux only (SO_REUSEPORT semantics).
package port

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Held is a loopback TCP port held until the test ends.
type Held struct {
	fd   int
	addr netip.AddrPort
}

// Hold binds a new port on 127.0.0.1 and holds it until the test ends.
func Hold(t testing.TB) *Held {
	t.Helper()
	h, err := hold()
	if err != nil {
		t.Fatalf("port: %v", err)
	}
	t.Cleanup(func() { unix.Close(h.fd) })
	return h
}

func hold() (*Held, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	// SO_REUSEPORT and not SO_REUSEADDR: with SO_REUSEADDR on both sides,
	// Linux lets a plain listener (Go sets SO_REUSEADDR on every listener)
	// bind a port that only a non-listening socket holds.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("SO_REUSEPORT: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind 127.0.0.1:0: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("getsockname: %w", err)
	}
	in4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		unix.Close(fd)
		return nil, fmt.Errorf("getsockname: %T", sa)
	}
	return &Held{fd: fd, addr: netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port))}, nil
}

// Addr is "127.0.0.1:port".
func (h *Held) Addr() string { return h.addr.String() }

// AddrPort is the held address.
func (h *Held) AddrPort() netip.AddrPort { return h.addr }

// Port is the port number.
func (h *Held) Port() int { return int(h.addr.Port()) }

// Listen opens a TCP listener on the held port (SO_REUSEPORT). Close it
// before opening the next one.
func (h *Held) Listen() (net.Listener, error) {
	lc := ListenConfig()
	return lc.Listen(context.Background(), "tcp4", h.Addr())
}

// ListenConfig sets SO_REUSEPORT on the sockets it opens, so that they may
// bind a held port.
func ListenConfig() net.ListenConfig {
	return net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
}

// Pick returns n distinct loopback host:ports that were free a moment ago:
// all n are bound at the same time, then released, so unlike n separate
// picks they differ from each other. Another process may still take one
// before it is used: Pick is only for servers that can neither bind :0 and
// report the port nor listen on a held one (GoBGP takes a port number; a
// multi-member etcd cluster must know its peers' URLs before it starts),
// and their start must be retried when it fails with InUse.
func Pick(t testing.TB, n int) []string {
	t.Helper()
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("port: %v", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out
}

// InUse reports whether err is a bind failing because the address is taken.
func InUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || (err != nil && strings.Contains(err.Error(), "address already in use"))
}
