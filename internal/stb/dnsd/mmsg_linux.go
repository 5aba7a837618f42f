//go:build linux

package dnsd

import (
	"net"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The batches are read and written with recvmmsg and sendmmsg directly
// rather than through golang.org/x/net's ReadBatch, which allocates a
// *net.UDPAddr and its IP for every datagram: here the sender's sockaddr
// stays in a per-slot buffer and is handed back to sendmmsg as it came.

// mmsghdr is struct mmsghdr; Go pads it as C does on every Linux ABI.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// oobSize holds the IP_PKTINFO and IPV6_PKTINFO messages of one datagram (a
// dual-stack socket may deliver both for IPv4).
const oobSize = 128

// mmsgConn is a UDP socket read and written a batch per system call.
type mmsgConn struct {
	rc syscall.RawConn
	// pktinfo: the socket is bound to a wildcard address and reports each
	// datagram's destination, which becomes its reply's source.
	pktinfo bool
	hs      []mmsghdr // receiving
	iovs    []unix.Iovec
	names   []unix.RawSockaddrInet6 // senders: where the replies go
	oob     []byte
	dst     []netip.Addr // destinations (pktinfo)
	ohs     []mmsghdr    // sending
	oiovs   []unix.Iovec
	ooob    []byte
	// The system calls' arguments and results, and the functions RawConn
	// runs, bound once: nothing is allocated per call.
	from, to     int
	n            int
	errno        syscall.Errno
	recvF, sendF func(uintptr) bool
}

func newMmsgConn(u *net.UDPConn, batch int) (batchConn, error) {
	rc, err := u.SyscallConn()
	if err != nil {
		return nil, err
	}
	c := &mmsgConn{
		rc: rc, hs: make([]mmsghdr, batch), iovs: make([]unix.Iovec, batch),
		names: make([]unix.RawSockaddrInet6, batch), dst: make([]netip.Addr, batch),
		ohs: make([]mmsghdr, batch), oiovs: make([]unix.Iovec, batch),
	}
	c.recvF, c.sendF = c.recv, c.send
	if la, ok := u.LocalAddr().(*net.UDPAddr); ok && la.IP.IsUnspecified() {
		// A wildcard socket must answer from the address it was asked
		// at (the anycast service address), as miekg's server did; a
		// socket bound to one address answers from it anyway.
		if err := enablePktinfo(rc); err != nil {
			return nil, err
		}
		c.pktinfo = true
		c.oob, c.ooob = make([]byte, batch*oobSize), make([]byte, batch*oobSize)
	}
	for i := range batch {
		c.hs[i].hdr.Iov = &c.iovs[i]
		c.hs[i].hdr.SetIovlen(1)
		c.ohs[i].hdr.Iov = &c.oiovs[i]
		c.ohs[i].hdr.SetIovlen(1)
	}
	return c, nil
}

// enablePktinfo asks for each datagram's destination address, as miekg's
// setUDPSocketOptions did: both families, failing only if both fail.
func enablePktinfo(rc syscall.RawConn) error {
	var e4, e6 error
	if err := rc.Control(func(fd uintptr) {
		e6 = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		e4 = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
	}); err != nil {
		return err
	}
	if e4 != nil && e6 != nil {
		return os.NewSyscallError("setsockopt IP_PKTINFO", e4)
	}
	return nil
}

func (c *mmsgConn) read(ps []packet) (int, error) {
	n := min(len(ps), len(c.hs))
	for i := range n {
		in := ps[i].in[:cap(ps[i].in)]
		c.iovs[i].Base = &in[0]
		c.iovs[i].SetLen(len(in))
		h := &c.hs[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&c.names[i]))
		h.Namelen = unix.SizeofSockaddrInet6
		if c.pktinfo {
			h.Control = &c.oob[i*oobSize]
			h.SetControllen(oobSize)
		}
		h.Flags = 0
	}
	c.from, c.to = 0, n
	if err := c.rc.Read(c.recvF); err != nil {
		return 0, err
	}
	if c.errno != 0 {
		return 0, os.NewSyscallError("recvmmsg", c.errno)
	}
	for i := range c.n {
		p, h := &ps[i], &c.hs[i]
		p.in = p.in[:h.n]
		p.peer = nil
		p.from, p.scope = sockaddrPort(&c.names[i])
		c.dst[i] = netip.Addr{}
		if c.pktinfo {
			c.dst[i] = pktinfoDst(c.oob[i*oobSize : i*oobSize+int(h.hdr.Controllen)])
		}
	}
	return c.n, nil
}

func (c *mmsgConn) recv(fd uintptr) bool {
	for {
		// MSG_DONTWAIT even though Go's sockets are non-blocking: on a
		// blocking one (a file handed in) recvmmsg would wait for a full
		// batch, sendmmsg for room.
		r, _, e := syscall.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&c.hs[0])), uintptr(c.to), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // RawConn waits for the socket to become readable
		case 0:
			c.n, c.errno = int(r), 0
		default:
			c.n, c.errno = 0, e
		}
		return true
	}
}

func (c *mmsgConn) write(ps []packet) error {
	m := 0
	for i := range ps {
		p := &ps[i]
		if len(p.out) == 0 {
			continue
		}
		c.oiovs[m].Base = &p.out[0]
		c.oiovs[m].SetLen(len(p.out))
		h := &c.ohs[m].hdr
		h.Name, h.Namelen = (*byte)(unsafe.Pointer(&c.names[i])), c.hs[i].hdr.Namelen
		h.Control = nil
		h.SetControllen(0)
		if c.pktinfo && c.dst[i].IsValid() {
			b := c.ooob[m*oobSize : (m+1)*oobSize]
			h.Control = &b[0]
			h.SetControllen(putPktinfo(b, c.dst[i]))
		}
		m++
	}
	var first error
	for sent := 0; sent < m; {
		c.from, c.to = sent, m
		if err := c.rc.Write(c.sendF); err != nil {
			return err
		}
		if c.errno != 0 {
			// sendmmsg fails only for the first message of the call (a
			// later failure ends the call early): skip it, send the rest.
			if first == nil {
				first = os.NewSyscallError("sendmmsg", c.errno)
			}
			sent++
			continue
		}
		sent += c.n
	}
	return first
}

func (c *mmsgConn) send(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&c.ohs[c.from])), uintptr(c.to-c.from), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // RawConn waits for the socket to become writable
		case 0:
			c.n, c.errno = int(r), 0
		default:
			c.n, c.errno = 0, e
		}
		return true
	}
}

// sockaddrPort is the address and port of a sockaddr_in or sockaddr_in6,
// and the IPv6 scope.
func sockaddrPort(sa *unix.RawSockaddrInet6) (netip.AddrPort, uint32) {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), netPort(&sa4.Port)), 0
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), netPort(&sa.Port)), sa.Scope_id
	}
	return netip.AddrPort{}, 0
}

// netPort reads a sockaddr's port, stored in network byte order.
func netPort(p *uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(p))
	return uint16(b[0])<<8 | uint16(b[1])
}

// pktinfoDst is a datagram's destination from its control messages,
// preferring IPV6_PKTINFO as miekg's parseDstFromOOB does.
func pktinfoDst(b []byte) netip.Addr {
	var v4, v6 netip.Addr
	for len(b) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(b) {
			break
		}
		data := b[unix.CmsgLen(0):l]
		switch {
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			v6 = netip.AddrFrom16((*unix.Inet6Pktinfo)(unsafe.Pointer(&data[0])).Addr)
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			v4 = netip.AddrFrom4((*unix.Inet4Pktinfo)(unsafe.Pointer(&data[0])).Addr)
		}
		next := unix.CmsgSpace(l - unix.CmsgLen(0))
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	if v6.IsValid() {
		return v6
	}
	return v4
}

// putPktinfo writes the control message that makes dst the source of a
// reply, as miekg's correctSource does: IP_PKTINFO for an IPv4 (or
// IPv4-mapped) address, else IPV6_PKTINFO. It returns its length.
func putPktinfo(b []byte, dst netip.Addr) int {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	data := unsafe.Pointer(&b[unix.CmsgLen(0)])
	if dst.Unmap().Is4() {
		h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
		h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
		*(*unix.Inet4Pktinfo)(data) = unix.Inet4Pktinfo{Spec_dst: dst.Unmap().As4()}
		return unix.CmsgSpace(unix.SizeofInet4Pktinfo)
	}
	h.Level, h.Type = unix.IPPROTO_IPV6, unix.IPV6_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet6Pktinfo))
	*(*unix.Inet6Pktinfo)(data) = unix.Inet6Pktinfo{Addr: dst.As16()}
	return unix.CmsgSpace(unix.SizeofInet6Pktinfo)
}
