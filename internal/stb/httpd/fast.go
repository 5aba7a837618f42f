package httpd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fastServe is one Serve call of the fast path. Its accept loops accept
// on the caller's listener themselves (accept4 on a duplicate of its
// descriptor: no keep-alive socket options, address lookups or net.Conn
// per connection) and answer each new connection's first read on the
// spot; a connection that stays open goes to one of the event loops
// (evloop.go), dealt in turn. Both spread over the GOMAXPROCS cores.
type fastServe struct {
	s  *Server
	lf *os.File // the duplicate descriptor accept4 runs on
	rc syscall.RawConn

	loops []*loop
	// closing: Serve is stopping; connections close once their answers
	// are out, idle ones at their loop's next sweep.
	closing atomic.Bool

	// Connections the fast path hands over (see parse.go) are served by
	// net/http with the same handler and limits.
	hsrv *http.Server
	hl   *handoffListener
}

// serveFast is Serve on the fast path.
func (s *Server) serveFast(ctx context.Context, ln net.Listener) error {
	tl, ok := ln.(*net.TCPListener)
	if !ok { // another kind of listener: no descriptor to accept on
		s.log.Info("listener is not TCP; serving with net/http", "type", fmt.Sprintf("%T", ln))
		return s.serveNetHTTP(ctx, ln, "http")
	}
	lf, err := tl.File()
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("http listener: %w", err)
	}
	rc, err := lf.SyscallConn()
	if err != nil {
		_ = lf.Close()
		_ = ln.Close()
		return fmt.Errorf("http listener: %w", err)
	}
	fs := &fastServe{s: s, lf: lf, rc: rc, hsrv: s.newHTTPServer(), hl: newHandoffListener(ln.Addr())}
	for range s.cfg.AcceptLoops {
		l, err := newLoop(fs)
		if err != nil {
			for _, l := range fs.loops {
				_ = l.ef.Close()
			}
			_ = lf.Close()
			_ = ln.Close()
			return fmt.Errorf("http listener: %w", err)
		}
		fs.loops = append(fs.loops, l)
	}
	s.setAddr(ln.Addr())
	defer s.setAddr(nil)
	hdone := make(chan error, 1)
	go func() { hdone <- fs.hsrv.Serve(fs.hl) }()
	s.log.Info("http listener up", "addr", ln.Addr().String(), "instance", s.cfg.InstanceID, "server", ServerFast)

	accepting := len(fs.loops)
	adone := make(chan error, accepting)
	ldone := make(chan error, len(fs.loops))
	for i, l := range fs.loops {
		a := fs.newAcceptor(i)
		go func() { adone <- a.loop() }()
		go func() { ldone <- l.run() }()
	}
	running := len(fs.loops)
	var aerr error
	select {
	case aerr = <-adone:
		accepting--
	case aerr = <-ldone: // a loop failed: its acceptor would hand it connections in vain
		running--
	case <-ctx.Done():
	}
	fs.closing.Store(true)
	_ = lf.Close() // ends the accept loops
	_ = ln.Close()
	for range accepting {
		if err := <-adone; aerr == nil {
			aerr = err
		}
	}
	if err := fs.shutdown(ldone, running); aerr == nil {
		aerr = err
	}
	if err := <-hdone; err != nil && !errors.Is(err, http.ErrServerClosed) && aerr == nil {
		aerr = err
	}
	if aerr != nil {
		return fmt.Errorf("http listener: %w", aerr)
	}
	s.log.Info("http listener stopped")
	return nil
}

// acceptor is one accept loop. It answers a new connection's first read
// itself, straight on the descriptor: an STB that opens a connection per
// request (or whose first request is all there is) is served without the
// poller, a goroutine or an os.File ever being set up for it. Only a
// connection that stays open (or whose first read or write would block)
// goes to an event loop.
type acceptor struct {
	fs       *fastServe
	next     int // the loop the next connection it keeps open goes to
	ss       session
	b        *fbufs
	acceptFn func(uintptr) bool
	nfd      int
	rsa      unix.RawSockaddrAny
	aerr     error
}

func (fs *fastServe) newAcceptor(first int) *acceptor {
	a := &acceptor{fs: fs, next: first, b: fs.s.bufPool.Get().(*fbufs)}
	a.ss.s = fs.s
	a.acceptFn = a.accept
	return a
}

// accept is accept4(2) by hand: unix.Accept4 would ask the socket for its
// protocol (a getsockopt per connection) and allocate the address.
func (a *acceptor) accept(fd uintptr) bool {
	l := uint32(unix.SizeofSockaddrAny)
	r, _, errno := unix.RawSyscall6(unix.SYS_ACCEPT4, fd, uintptr(unsafe.Pointer(&a.rsa)), uintptr(unsafe.Pointer(&l)),
		unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	a.nfd, a.aerr = int(r), nil
	if errno != 0 {
		a.aerr = errno
	}
	return a.aerr != unix.EAGAIN
}

// loop accepts until the listener is closed (nil) or fails.
func (a *acceptor) loop() error {
	fs := a.fs
	var backoff time.Duration
	for {
		if err := fs.rc.Read(a.acceptFn); err != nil {
			if fs.closing.Load() {
				return nil
			}
			return err
		}
		switch a.aerr {
		case nil:
			backoff = 0
		case unix.EINTR, unix.ECONNABORTED, unix.EPROTO, unix.EPERM:
			continue // that connection is gone; the listener is fine
		case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
			// Out of descriptors or memory: wait, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			fs.s.log.Warn("accept failed; retrying", "err", a.aerr, "in", backoff)
			time.Sleep(backoff)
			continue
		default:
			return os.NewSyscallError("accept4", a.aerr)
		}
		a.first(a.nfd, &a.rsa)
	}
}

// first serves an accepted descriptor's first read, or resets it beyond
// the cap.
func (a *acceptor) first(fd int, rsa *unix.RawSockaddrAny) {
	fs := a.fs
	s := fs.s
	if s.fastOpen.Add(1) > int64(s.cfg.MaxConnections) {
		s.fastOpen.Add(-1)
		s.fastRefused.Add(1)
		// An RST rather than a FIN: nothing is owed to the peer, and the
		// socket leaves no TIME_WAIT behind on our side.
		_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1})
		_ = unix.Close(fd)
		return
	}
	ap, zone := rawAddrPort(rsa)
	ss, b := &a.ss, a.b
	ss.peer, ss.served, ss.afterPOST = ap.Addr().Unmap(), false, false
	var n int
	for {
		m, err := sysRead(uintptr(fd), b.rd)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN: // nothing yet: the loop waits for it
			a.keep(fd, ap, zone, nil, nil, vContinue)
			return
		case err != 0 || m <= 0: // gone before a request: nothing to answer
			_ = unix.Close(fd)
			s.fastOpen.Add(-1)
			return
		}
		n = m
		break
	}
	used, v := ss.process(b.rd[:n], &b.out, &b.scratch, &b.ar, n == len(b.rd), fs.closing.Load())
	w := 0
	for w < len(b.out) {
		m, err := sysWrite(uintptr(fd), b.out[w:])
		if m > 0 {
			w += m
		}
		if err == unix.EINTR {
			continue
		}
		if err != 0 {
			break
		}
	}
	out := b.out[w:]
	b.out = b.out[:0]
	switch {
	case len(out) == 0 && v == vClose:
		_ = unix.Close(fd)
		s.fastOpen.Add(-1)
	case len(out) == 0 && v == vContinue && used == n:
		a.keep(fd, ap, zone, nil, nil, vContinue) // keep-alive: wait for the next
	default: // a write would block, a request is incomplete, or net/http's
		a.keep(fd, ap, zone, out, b.rd[used:n], v)
	}
}

// keep hands a connection that stays open to an event loop, with what its
// first read left: answers still to write (out), bytes not yet answered
// (rest) and what to do after writing (v). Each acceptor deals its
// connections to the loops in turn: which acceptor wins an accept is up to
// the scheduler, so its own loop alone could end up with most of them.
func (a *acceptor) keep(fd int, ap netip.AddrPort, zone string, out, rest []byte, v verdict) {
	s := a.fs.s
	l := a.fs.loops[a.next]
	if a.next++; a.next == len(a.fs.loops) {
		a.next = 0
	}
	// Answers are written whole; Nagle would only hold back the next one.
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	c := s.newLconn(fd, ap, zone, &a.ss, out, rest, v)
	if err := l.hand(c); err != nil {
		s.log.Warn("connection dropped", "err", err)
		_ = unix.Close(fd)
		s.fastOpen.Add(-1)
		l.recycle(c)
	}
}

// shutdown stops the loops once the acceptors have: idle connections end
// at once, busy ones once their answers are out, and whatever is left
// after shutdownTimeout by force; net/http's handed-over connections
// drain meanwhile. It returns the first loop's error.
func (fs *fastServe) shutdown(ldone <-chan error, running int) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	for _, l := range fs.loops {
		l.stop.Store(true)
		l.wake()
	}
	hs := make(chan error, 1)
	go func() { hs <- fs.hsrv.Shutdown(ctx) }()
	var lerr error
	for range running {
		if err := <-ldone; lerr == nil {
			lerr = err
		}
	}
	if err := <-hs; err != nil {
		_ = fs.hsrv.Close()
	}
	return lerr
}

// sockaddrPort turns an accepted peer address into the client address the
// handler sees (IPv4-mapped IPv6 unmapped, as parseHostPort does) and the
// port and zone net/http's RemoteAddr would carry.
func sockaddrPort(sa unix.Sockaddr) (netip.AddrPort, string) {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)), ""
	case *unix.SockaddrInet6:
		ip := netip.AddrFrom16(a.Addr)
		zone := ""
		if a.ZoneId != 0 {
			if ifi, err := net.InterfaceByIndex(int(a.ZoneId)); err == nil {
				zone = ifi.Name
			} else {
				zone = fmt.Sprint(a.ZoneId)
			}
			ip = ip.WithZone(zone)
		}
		return netip.AddrPortFrom(ip, uint16(a.Port)), zone
	}
	return netip.AddrPort{}, ""
}

// rawAddrPort is sockaddrPort of an address as accept4 wrote it.
func rawAddrPort(rsa *unix.RawSockaddrAny) (netip.AddrPort, string) {
	switch rsa.Addr.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(rsa))
		return sockaddrPort(&unix.SockaddrInet4{Port: int(ntohs(p.Port)), Addr: p.Addr})
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(rsa))
		return sockaddrPort(&unix.SockaddrInet6{Port: int(ntohs(p.Port)), ZoneId: p.Scope_id, Addr: p.Addr})
	}
	return netip.AddrPort{}, ""
}

// ntohs is a port as the kernel stores it (network byte order) in host
// order.
func ntohs(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}
