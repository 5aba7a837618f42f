// Package netutil opens the STB-facing listeners with IP_FREEBIND, so a
// scheduler can bind the Anycast service address before (or while) it is on
// the interface: in OSPF mode the address comes and goes with the
// announcement, and at start the address is added after the listeners open.
package netutil

import (
	"context"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

func freebind(network, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = setFreebind(network, fd) })
	if err != nil {
		return err
	}
	return serr
}

// ReusePortFreebind is a net.ListenConfig Control setting SO_REUSEPORT
// (several sockets share one port, the kernel spreads the traffic over
// them) and IP_FREEBIND.
func ReusePortFreebind(network, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); serr == nil {
			serr = setFreebind(network, fd)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

func setFreebind(network string, fd uintptr) error {
	level, opt := unix.IPPROTO_IP, unix.IP_FREEBIND
	if network == "tcp6" || network == "udp6" {
		level, opt = unix.IPPROTO_IPV6, unix.IPV6_FREEBIND
	}
	err := unix.SetsockoptInt(int(fd), level, opt, 1)
	if err != nil && level == unix.IPPROTO_IPV6 {
		// Older kernels: IP_FREEBIND on the socket covers IPv6 too.
		err = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_FREEBIND, 1)
	}
	return err
}

var lc = net.ListenConfig{Control: freebind}

// Listen is net.Listen with IP_FREEBIND.
func Listen(network, addr string) (net.Listener, error) {
	return lc.Listen(context.Background(), network, addr)
}

// ListenPacket is net.ListenPacket with IP_FREEBIND.
func ListenPacket(network, addr string) (net.PacketConn, error) {
	return lc.ListenPacket(context.Background(), network, addr)
}
