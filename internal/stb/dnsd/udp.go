package dnsd

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"syscall"

	"github.com/miekg/dns"
)

// udpBatch is the most datagrams one read (recvmmsg) takes and one write
// (sendmmsg) sends: a reader's buffers are udpBatch × (udpReadSize +
// MaxUDPSize), about 170 KiB with the defaults.
const udpBatch = 32

// packet is one slot of a reader's batch.
type packet struct {
	in   []byte         // the datagram; cap udpReadSize
	from netip.AddrPort // its sender as received (IPv4-mapped on a dual-stack socket)
	// scope is the sender's IPv6 scope (interface index) from recvmmsg; a
	// zoned (link-local) sender is left to the full path, which names the
	// zone as the net package does.
	scope uint32
	// peer is the sender as a generic PacketConn gives it, nil from
	// recvmmsg.
	peer net.Addr
	out  []byte // the reply; empty: none
}

// batchConn reads and writes a UDP socket a batch at a time.
type batchConn interface {
	// read fills ps[:n] (in, from, scope, peer) with received datagrams.
	read(ps []packet) (n int, err error)
	// write sends each non-empty out of ps to its sender; it returns the
	// first error but tries every reply.
	write(ps []packet) error
}

// udpReader is one goroutine's share of a socket: it reads a batch, answers
// each query inline (fast path, else the full handler), and writes the
// replies in one batch. No goroutine and, on the fast path, no allocation
// per query.
type udpReader struct {
	s     *Server
	conn  batchConn
	local net.Addr
	ps    []packet
	w     udpWriter
}

func (s *Server) newUDPReader(conn batchConn, local net.Addr) *udpReader {
	r := &udpReader{s: s, conn: conn, local: local, ps: make([]packet, udpBatch)}
	for i := range r.ps {
		r.ps[i].in = make([]byte, udpReadSize)
		// +1: miekg packs into a buffer only when it exceeds the reply.
		r.ps[i].out = make([]byte, 0, int(s.cfg.MaxUDPSize)+1)
	}
	r.w.local = local
	return r
}

// run serves until the socket is closed (nil) or fails.
func (r *udpReader) run() error {
	for {
		n, err := r.conn.read(r.ps)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			if transient(err) {
				continue
			}
			return err
		}
		fast := 0
		for i := range r.ps[:n] {
			if r.serve(&r.ps[i]) {
				fast++
			}
		}
		if fast > 0 {
			r.s.fastQueries.Add(float64(fast))
		}
		if err := r.conn.write(r.ps[:n]); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			r.s.log.Debug("write reply", "err", err)
		}
	}
}

// serve answers one datagram into p.out, and reports whether the fast path
// did.
func (r *udpReader) serve(p *packet) bool {
	p.out = p.out[:0]
	// The fast path decides for plain UDP senders; a zoned one goes the
	// full way, where the zone is named (and keeps it out of every prefix).
	if p.from.IsValid() && p.scope == 0 && p.from.Addr().Zone() == "" {
		if out, ok := r.s.serveFast(p.in, p.from.Addr().Unmap(), p.out); ok {
			p.out = out
			return true
		}
	}
	r.w.p = p
	r.s.serveFull(p.in, &r.w)
	r.w.p = nil
	return false
}

// serveFull answers m as miekg's UDP server did before it reached the
// handler: a message shorter than a header and responses (QR) are dropped,
// one that does not unpack gets a header-only FORMERR, the rest goes to
// ServeDNS.
func (s *Server) serveFull(m []byte, w dns.ResponseWriter) {
	if len(m) < headerLen {
		s.invalid(m, dns.ErrShortRead)
		return
	}
	if acceptQuery(dns.Header{Bits: binary.BigEndian.Uint16(m[2:])}) != dns.MsgAccept {
		return
	}
	req := new(dns.Msg)
	if err := req.Unpack(m); err != nil {
		s.invalid(m, err)
		req.SetRcodeFormatError(req)
		req.Zero = false
		req.Ns, req.Answer, req.Extra = nil, nil, nil
		if err := w.WriteMsg(req); err != nil {
			s.log.Debug("write reply", "client", w.RemoteAddr(), "err", err)
		}
		return
	}
	s.ServeDNS(w, req)
}

// invalid notes a message that is dropped or FORMERRed unparsed.
func (s *Server) invalid(m []byte, err error) {
	s.log.Debug("unparsable message", "len", len(m), "err", err)
}

// transient reports whether a read error is worth retrying (the socket is
// fine, this datagram or this moment was not).
func transient(err error) bool {
	for _, e := range []syscall.Errno{syscall.EINTR, syscall.ENOMEM, syscall.ENOBUFS, syscall.ECONNREFUSED, syscall.EHOSTUNREACH, syscall.ENETUNREACH} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// udpWriter is the full path's dns.ResponseWriter: the reply is packed into
// the packet's slot and sent with the batch.
type udpWriter struct {
	local net.Addr
	p     *packet
}

func (w *udpWriter) LocalAddr() net.Addr { return w.local }

// RemoteAddr is the sender as miekg's server gave it: the generic
// PacketConn's address, or the *net.UDPAddr net.UDPConn.ReadMsgUDP returns.
func (w *udpWriter) RemoteAddr() net.Addr {
	if w.p.peer != nil {
		return w.p.peer
	}
	ap := w.p.from
	if w.p.scope != 0 {
		ap = netip.AddrPortFrom(ap.Addr().WithZone(zoneName(w.p.scope)), ap.Port())
	}
	return net.UDPAddrFromAddrPort(ap)
}

// zoneName names an IPv6 scope as the net package does: its interface's
// name, else the index.
func zoneName(index uint32) string {
	if ifi, err := net.InterfaceByIndex(int(index)); err == nil {
		return ifi.Name
	}
	return strconv.FormatUint(uint64(index), 10)
}

func (w *udpWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.PackBuffer(w.p.out[:cap(w.p.out)])
	if err != nil {
		return err
	}
	w.p.out = b
	return nil
}

func (w *udpWriter) Write(b []byte) (int, error) {
	w.p.out = append(w.p.out[:0], b...)
	return len(b), nil
}

func (w *udpWriter) Close() error        { return nil }
func (w *udpWriter) TsigStatus() error   { return nil }
func (w *udpWriter) TsigTimersOnly(bool) {}
func (w *udpWriter) Hijack()             {}

// packetConn is the batchConn of a PacketConn that has no recvmmsg (not a
// *net.UDPConn, or not on Linux): one datagram per call.
type packetConn struct{ pc net.PacketConn }

func (c packetConn) read(ps []packet) (int, error) {
	p := &ps[0]
	n, addr, err := c.pc.ReadFrom(p.in[:cap(p.in)])
	if err != nil {
		return 0, err
	}
	p.in, p.peer, p.scope, p.from = p.in[:n], addr, 0, netip.AddrPort{}
	if u, ok := addr.(*net.UDPAddr); ok {
		p.from = u.AddrPort()
	}
	return 1, nil
}

func (c packetConn) write(ps []packet) error {
	var first error
	for i := range ps {
		if len(ps[i].out) == 0 {
			continue
		}
		if _, err := c.pc.WriteTo(ps[i].out, ps[i].peer); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// batchConns returns n batchConns reading pc, one per reader goroutine.
func batchConns(pc net.PacketConn, n int) ([]batchConn, error) {
	conns := make([]batchConn, n)
	for i := range conns {
		u, ok := pc.(*net.UDPConn)
		if !ok {
			conns[i] = packetConn{pc}
			continue
		}
		c, err := newMmsgConn(u, udpBatch)
		if errors.Is(err, errors.ErrUnsupported) {
			conns[i] = packetConn{pc}
			continue
		}
		if err != nil {
			return nil, err
		}
		conns[i] = c
	}
	return conns, nil
}
