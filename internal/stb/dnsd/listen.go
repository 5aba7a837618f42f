package dnsd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"syscall"

	"github.com/anysched/anysched/internal/stb/netutil"
)

// Listen binds UDP and TCP on addr. With port 0, TCP takes the port the
// kernel gave UDP, so both answer on one port.
func Listen(addr string) (net.PacketConn, net.Listener, error) {
	pc, err := netutil.ListenPacket("udp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dns: %w", err)
	}
	ln, err := netutil.Listen("tcp", samePort(addr, pc))
	if err != nil {
		pc.Close()
		return nil, nil, fmt.Errorf("dns: %w", err)
	}
	return pc, ln, nil
}

// portZeroAttempts bounds ListenSockets' retries when, with port 0, the
// port the kernel gave the first UDP socket is taken for TCP.
const portZeroAttempts = 10

// ListenSockets binds n UDP sockets to addr with SO_REUSEPORT, over which
// the kernel spreads queries by a hash of the sender's address and port
// (one per core lets every core read its own), and TCP on the same port
// (without SO_REUSEPORT: a second daemon on the port still fails to start).
// All are IP_FREEBIND, as netutil's. n <= 0 means runtime.GOMAXPROCS(0);
// n == 1 is Listen. With port 0 the first socket's port is taken by the
// others and by TCP, retried with a new port if TCP finds it taken.
func ListenSockets(addr string, n int) ([]net.PacketConn, net.Listener, error) {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	if n == 1 {
		pc, ln, err := Listen(addr)
		if err != nil {
			return nil, nil, err
		}
		return []net.PacketConn{pc}, ln, nil
	}
	_, port, _ := net.SplitHostPort(addr)
	for attempt := 1; ; attempt++ {
		pcs, ln, err := listenReusePort(addr, n)
		if err == nil || port != "0" || attempt == portZeroAttempts || !errors.Is(err, syscall.EADDRINUSE) {
			return pcs, ln, err
		}
	}
}

func listenReusePort(addr string, n int) ([]net.PacketConn, net.Listener, error) {
	lc := net.ListenConfig{Control: netutil.ReusePortFreebind}
	pcs := make([]net.PacketConn, 0, n)
	fail := func(err error) ([]net.PacketConn, net.Listener, error) {
		for _, pc := range pcs {
			pc.Close()
		}
		return nil, nil, fmt.Errorf("dns: %w", err)
	}
	for range n {
		pc, err := lc.ListenPacket(context.Background(), "udp", addr)
		if err != nil {
			return fail(err)
		}
		pcs = append(pcs, pc)
		addr = samePort(addr, pc)
	}
	ln, err := netutil.Listen("tcp", addr)
	if err != nil {
		return fail(err)
	}
	return pcs, ln, nil
}

// samePort is addr with port 0 replaced by the port pc was given.
func samePort(addr string, pc net.PacketConn) string {
	if host, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
		if u, ok := pc.LocalAddr().(*net.UDPAddr); ok {
			return net.JoinHostPort(host, strconv.Itoa(u.Port))
		}
	}
	return addr
}
