package httpd

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// loop is one event loop of the fast path: an epoll instance of its own,
// holding the connections its acceptor kept open, read and answered by one
// goroutine. The epoll descriptor itself waits in the Go runtime's poller,
// so an idle loop costs no thread and a busy one never blocks one.
//
// Why not a goroutine per connection on the runtime poller: that poller
// hides what epoll says about a connection, so after a short read a
// goroutine cannot tell "nothing more" from "the peer half-closed" and
// must read again, only to get EAGAIN, then park and be woken: two reads
// and two goroutine switches per keep-alive request where nginx does one
// read. Here the loop sees EPOLLRDHUP, reads once per request while the
// socket has no more, and answers every ready connection of a batch in
// turn (as nginx's worker does).
//
// Deadlines are times kept per connection and checked by a sweep every
// sweepEvery (a fraction of the smallest timeout): setting one is a store,
// not a runtime timer per answer.
type loop struct {
	fs *fastServe
	ep int // the epoll instance; owned by ef
	ef *os.File
	rc syscall.RawConn

	events []unix.EpollEvent
	byFD   []*lconn // live connections by descriptor
	live   []*lconn // the same, dense, for the sweep
	b      *fbufs   // the loop's buffers: a request read whole is answered from them
	fn     func(uintptr) bool

	now        int64 // Unix ns, read once per batch
	sweepEvery int64
	nextSweep  int64
	stopAt     int64 // when shutdown force-closes what is left; 0: not stopping

	// Connections the acceptor hands over; adopted on their first event.
	mu       sync.Mutex
	incoming []*lconn
	pending  atomic.Bool
	stop     atomic.Bool // shutdown: no more hand-overs come; end once empty
}

// fbufs are the buffers of a loop, or of a connection with work in hand.
type fbufs struct {
	rd      []byte // MaxHeaderBytes: a header block must fit
	out     []byte
	scratch []byte
	ar      arena
}

// lconn is one connection of a loop.
type lconn struct {
	fd   int
	idx  int // in loop.live
	ss   session
	port uint16
	zone string
	// b holds what outlives a read: a partial request (rd[:n]) or an
	// answer the socket would not take yet (out). nil otherwise.
	b        *fbufs
	n        int
	pending  bool    // a request has begun (the header deadline runs)
	after    verdict // what to do once out is written
	deadline int64   // Unix ns: header, idle or write deadline
}

const loopEvents = 128

func newLoop(fs *fastServe) (*loop, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := unix.SetNonblock(ep, true); err != nil {
		_ = unix.Close(ep)
		return nil, os.NewSyscallError("fcntl", err)
	}
	ef := os.NewFile(uintptr(ep), "epoll") // non-blocking: joins the runtime poller
	rc, err := ef.SyscallConn()
	if err != nil {
		_ = ef.Close()
		return nil, err
	}
	s := fs.s
	every := min(s.headerTimeout, s.cfg.IdleTimeout, s.cfg.WriteTimeout) / 4
	every = max(5*time.Millisecond, min(every, 500*time.Millisecond))
	l := &loop{
		fs: fs, ep: ep, ef: ef, rc: rc, events: make([]unix.EpollEvent, loopEvents),
		b: s.bufPool.Get().(*fbufs), sweepEvery: int64(every),
	}
	l.fn = l.poll
	return l, nil
}

// run serves until shutdown has ended every connection (nil) or the
// epoll instance fails.
func (l *loop) run() error {
	defer l.ef.Close()
	for {
		l.now = time.Now().UnixNano()
		l.adopt()
		l.sweep()
		if l.stop.Load() && len(l.live) == 0 && !l.pending.Load() {
			return nil
		}
		l.nextSweep = l.now + l.sweepEvery
		if err := l.ef.SetReadDeadline(time.Unix(0, l.nextSweep)); err != nil {
			return err
		}
		if err := l.rc.Read(l.fn); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
	}
}

// wake makes the loop run its sweep now (shutdown).
func (l *loop) wake() { _ = l.ef.SetReadDeadline(time.Unix(1, 0)) }

// poll is the loop's RawConn.Read callback: it takes the ready events and
// serves them until none are left (false: the runtime poller waits for
// the next), or until a sweep is due (true).
func (l *loop) poll(uintptr) bool {
	for {
		n, errno := epollWait(l.ep, l.events)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 || n == 0 {
			return false
		}
		l.now = time.Now().UnixNano()
		for i := range l.events[:n] {
			l.event(&l.events[i])
		}
		if l.now >= l.nextSweep {
			return true
		}
		if n < len(l.events) {
			// Every ready connection was served: anything since will
			// have marked the descriptor ready in the runtime poller.
			return false
		}
	}
}

func (l *loop) lookup(fd int) *lconn {
	if fd >= 0 && fd < len(l.byFD) {
		return l.byFD[fd]
	}
	return nil
}

func (l *loop) event(ev *unix.EpollEvent) {
	fd := int(ev.Fd)
	c := l.lookup(fd)
	if c == nil {
		if !l.pending.Load() {
			return
		}
		l.adopt()
		if c = l.lookup(fd); c == nil {
			return
		}
	}
	if c.writing() {
		if ev.Events&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return // read later: the answer before must go out first
		}
		if !l.flush(c) {
			return
		}
		// Data that came while the answer waited raised no new edge.
		l.read(c, ev.Events)
		return
	}
	if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		l.read(c, ev.Events)
	}
}

// read reads and answers until the socket is drained or the connection
// leaves the loop. One read per request: a read that leaves room in the
// buffer emptied the socket, and a FIN that came with it was in the event
// (EPOLLRDHUP), or raises a new one.
func (l *loop) read(c *lconn, events uint32) {
	s := l.fs.s
	hup := events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0
	for {
		buf := l.b.rd
		if c.b != nil {
			buf = c.b.rd
		}
		room := len(buf) - c.n
		n, errno := sysRead(uintptr(c.fd), buf[c.n:])
		switch {
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN:
			return
		case errno != 0:
			l.close(c)
			return
		case n == 0:
			// A request cut short: net/http decides what that is (its
			// 400, or nothing), so the answer is the same.
			if c.n > 0 {
				if rest := c.ss.atEOF(c.b.rd[:c.n]); len(rest) > 0 {
					l.handoff(c, rest)
					return
				}
			}
			l.close(c)
			return
		}
		total := c.n + n
		in := buf[:total]
		out := &l.b.out
		used, v := c.ss.process(in, out, &l.b.scratch, &l.b.ar, total == len(buf), l.fs.closing.Load())
		if used > 0 {
			c.pending = false
		}
		if len(*out) > 0 {
			w := writeSome(c.fd, *out)
			if w < len(*out) {
				c.keep(s, in[used:])
				c.b.out = append(c.b.out[:0], (*out)[w:]...)
				*out = (*out)[:0]
				c.after = v
				c.deadline = l.now + int64(s.cfg.WriteTimeout)
				return
			}
			*out = (*out)[:0]
		}
		switch v {
		case vClose:
			l.close(c)
			return
		case vHandoff:
			l.handoff(c, in[used:])
			return
		}
		if !l.next(c, in[used:]) {
			return
		}
		if n < room && !hup {
			return
		}
	}
}

// next keeps the unconsumed bytes and sets the deadline the connection now
// waits under; false: it was closed (the server is stopping).
func (l *loop) next(c *lconn, rest []byte) bool {
	s := l.fs.s
	if len(rest) > 0 {
		c.keep(s, rest)
		if !c.pending {
			// A request has begun: its header block is due within the
			// header timeout (slow clients must not hold the idle one).
			c.pending = true
			c.deadline = l.now + int64(s.headerTimeout)
		}
		return true
	}
	c.n = 0
	c.release(s)
	if l.fs.closing.Load() {
		l.close(c)
		return false
	}
	c.pending = false
	c.deadline = l.now + int64(s.cfg.IdleTimeout)
	return true
}

// keep makes rest (which may already lie in c.b.rd) the connection's
// buffered bytes.
func (c *lconn) keep(s *Server, rest []byte) {
	if c.b == nil {
		c.b = s.bufPool.Get().(*fbufs)
	}
	c.n = copy(c.b.rd, rest)
}

// writing: an answer waits in c.b.out for EPOLLOUT; the connection reads
// nothing more until it is out.
func (c *lconn) writing() bool { return c.b != nil && len(c.b.out) > 0 }

func (c *lconn) release(s *Server) {
	if c.b != nil && c.n == 0 && len(c.b.out) == 0 {
		s.bufPool.Put(c.b)
		c.b = nil
	}
}

// flush writes what waits in c.b.out; true once all of it is out and the
// connection goes on reading.
func (l *loop) flush(c *lconn) bool {
	w := writeSome(c.fd, c.b.out)
	if w < 0 {
		l.close(c)
		return false
	}
	c.b.out = c.b.out[:copy(c.b.out, c.b.out[w:])]
	if len(c.b.out) > 0 {
		c.deadline = l.now + int64(l.fs.s.cfg.WriteTimeout)
		return false
	}
	switch c.after {
	case vClose:
		l.close(c)
		return false
	case vHandoff:
		l.handoff(c, c.b.rd[:c.n])
		return false
	}
	rest := c.b.rd[:c.n]
	c.n = 0
	return l.next(c, rest)
}

// writeSome writes p until done or the socket is full; it returns what
// was written, or -1 when the connection failed.
func writeSome(fd int, p []byte) int {
	w := 0
	for w < len(p) {
		m, errno := sysWrite(uintptr(fd), p[w:])
		if m > 0 {
			w += m
		}
		switch errno {
		case 0, unix.EINTR:
		case unix.EAGAIN:
			return w
		default:
			return -1
		}
	}
	return w
}

// add puts c in the loop's tables.
func (l *loop) add(c *lconn) {
	for c.fd >= len(l.byFD) {
		l.byFD = append(l.byFD, make([]*lconn, max(64, len(l.byFD)))...)
	}
	l.byFD[c.fd] = c
	c.idx = len(l.live)
	l.live = append(l.live, c)
}

// remove takes c out of the loop's tables (and its epoll set).
func (l *loop) remove(c *lconn) {
	l.byFD[c.fd] = nil
	last := l.live[len(l.live)-1]
	l.live[c.idx], last.idx = last, c.idx
	l.live[len(l.live)-1] = nil
	l.live = l.live[:len(l.live)-1]
}

// close ends a connection and frees its place under the cap.
func (l *loop) close(c *lconn) {
	s := l.fs.s
	l.remove(c)
	_ = unix.Close(c.fd) // also leaves the epoll set
	s.fastOpen.Add(-1)
	l.recycle(c)
}

func (l *loop) recycle(c *lconn) {
	s := l.fs.s
	if c.b != nil {
		c.b.out = c.b.out[:0]
		s.bufPool.Put(c.b)
	}
	c.b, c.n, c.ss.s, c.zone = nil, 0, nil, ""
	s.connPool.Put(c)
}

// handoff gives the connection and its unanswered bytes to net/http.
func (l *loop) handoff(c *lconn, rest []byte) {
	fs := l.fs
	l.remove(c)
	_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, c.fd, nil)
	pre := append([]byte(nil), rest...)
	remote := &net.TCPAddr{IP: c.ss.peer.AsSlice(), Port: int(c.port), Zone: c.zone}
	f := os.NewFile(uintptr(c.fd), "") // non-blocking: joins the runtime poller
	l.recycle(c)
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		fs.s.fastOpen.Add(-1)
		return
	}
	hc := &handoffConn{f: f, rc: rc, pre: pre, fs: fs, remote: remote}
	go fs.hl.hand(hc) // the place under the cap goes with it
}

// sweep ends the connections whose deadline has passed, and, when the
// server stops, the idle ones (a busy one ends once its answer is out,
// everything after shutdownTimeout).
func (l *loop) sweep() {
	closing := l.fs.closing.Load()
	if closing && l.stopAt == 0 {
		l.stopAt = l.now + int64(shutdownTimeout)
	}
	force := l.stopAt != 0 && l.now >= l.stopAt
	for i := 0; i < len(l.live); {
		c := l.live[i]
		if l.now >= c.deadline || force || (closing && !c.writing()) {
			l.close(c) // swaps the last one into i
			continue
		}
		i++
	}
}

// hand queues a connection the acceptor kept open and adds it to the
// epoll set. Its first event (a fresh socket is writable, so one comes at
// once) makes the loop adopt it.
func (l *loop) hand(c *lconn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.incoming = append(l.incoming, c)
	l.pending.Store(true)
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(c.fd)}
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
		l.incoming = l.incoming[:len(l.incoming)-1]
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// adopt takes the queued connections into the loop and does what their
// first read left: write the rest of its answers, hand over, or wait.
func (l *loop) adopt() {
	if !l.pending.Load() {
		return
	}
	l.mu.Lock()
	in := l.incoming
	l.incoming = nil
	l.pending.Store(false)
	l.mu.Unlock()
	s := l.fs.s
	for _, c := range in {
		l.add(c)
		switch {
		case c.writing():
			c.deadline = l.now + int64(s.cfg.WriteTimeout)
			if l.flush(c) {
				l.read(c, 0)
			}
		case c.after == vClose:
			l.close(c)
		case c.after == vHandoff:
			l.handoff(c, c.b.rd[:c.n])
		case c.n > 0 || !c.ss.served: // a request is due
			c.pending = true
			c.deadline = l.now + int64(s.headerTimeout)
		default:
			c.deadline = l.now + int64(s.cfg.IdleTimeout)
		}
	}
}

// newLconn is a connection as its first read left it: answers still to
// write (out), bytes not yet answered (rest) and what to do after writing
// (v).
func (s *Server) newLconn(fd int, ap netip.AddrPort, zone string, ss *session, out, rest []byte, v verdict) *lconn {
	c := s.connPool.Get().(*lconn)
	*c = lconn{fd: fd, port: ap.Port(), zone: zone, after: v}
	c.ss.s, c.ss.peer, c.ss.served, c.ss.afterPOST = s, ap.Addr().Unmap(), ss.served, ss.afterPOST
	if len(out) > 0 || len(rest) > 0 {
		c.b = s.bufPool.Get().(*fbufs)
		c.b.out = append(c.b.out[:0], out...)
		c.n = copy(c.b.rd, rest)
	}
	return c
}

// epollWait takes the ready events without waiting (epoll_pwait with a
// zero timeout, which every Linux architecture has).
func epollWait(ep int, evs []unix.EpollEvent) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(ep), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}

// sysRead and sysWrite are recv(2) and send(2) on a connected socket,
// without the runtime's system-call bookkeeping. On a non-blocking socket
// they never wait, and the bookkeeping costs more than it saves here: a
// write that delivers over loopback can take tens of microseconds, long
// enough for the runtime's monitor to hand the processor to another
// thread meanwhile, two context switches on the same core for nothing.
// recvfrom and sendto rather than read and write skip the VFS layer
// (file position lock, access checks), as nginx's recv does: about 1% of
// a keep-alive answer's CPU time in perf's samples. MSG_NOSIGNAL spares a
// SIGPIPE when the STB has gone.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) { return sysIO(unix.SYS_RECVFROM, fd, p, 0) }

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	return sysIO(unix.SYS_SENDTO, fd, p, unix.MSG_NOSIGNAL)
}

func sysIO(trap, fd uintptr, p []byte, flags uintptr) (int, syscall.Errno) {
	if len(p) == 0 {
		return 0, 0
	}
	r, _, e := syscall.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), flags, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}
