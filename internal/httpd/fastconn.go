package httpd

import (
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fconn is one fast-path connection. Its goroutine reads, answers every
// complete request a read brought (pipelined ones in order, in one write)
// and waits for more; while it waits with nothing pending it holds no
// buffers, so an idle keep-alive connection costs little more than its
// goroutine.
type fconn struct {
	fs   *fastServe
	f    *os.File
	rc   syscall.RawConn
	ss   session
	port uint16
	zone string

	b *fbufs // nil while idle
	n int    // bytes in b.rd

	readFn, writeFn func(uintptr) bool
	rerr            error
	wbuf            []byte
	werr            error
	wblocked, wdl   bool // a write would block; a write deadline is set

	after verdict // what the first read, answered by the acceptor, left to do

	dl       int64 // the read deadline (Unix ns)
	dlHeader bool  // dl is the header deadline of a pending request
	pending  bool  // a request has begun but not completed
}

// fbufs are the buffers of a connection with work in hand.
type fbufs struct {
	rd      []byte // MaxHeaderBytes: a header block must fit
	out     []byte
	scratch []byte
	ar      arena
}

func newFconn() *fconn {
	c := &fconn{}
	c.readFn, c.writeFn = c.doRead, c.doWrite
	return c
}

func (c *fconn) init(fs *fastServe, f *os.File, rc syscall.RawConn, ap netip.AddrPort, zone string) {
	c.fs, c.f, c.rc, c.port, c.zone = fs, f, rc, ap.Port(), zone
	c.ss.s, c.ss.peer, c.ss.afterPOST, c.ss.served = fs.s, ap.Addr().Unmap(), false, false
	c.n, c.rerr, c.werr, c.wblocked, c.wdl, c.dl, c.dlHeader = 0, nil, nil, false, false, 0, false
	c.pending = true // the first request is due from the accept on
}

func (c *fconn) serve() {
	defer c.close()
	s := c.fs.s
	if c.b != nil && len(c.b.out) > 0 { // answers the acceptor could not write
		ok := c.flush(c.b.out)
		c.b.out = c.b.out[:0]
		if !ok {
			return
		}
	}
	switch c.after {
	case vClose:
		return
	case vHandoff:
		c.handoff(c.b.rd[:c.n])
		return
	}
	now := time.Now()
	switch {
	case c.n > 0 || !c.ss.served: // a request is due
		c.setDeadline(now.Add(s.headerTimeout), true)
	default:
		c.pending = false
		c.setDeadline(now.Add(s.cfg.IdleTimeout), false)
	}
	for {
		if err := c.rc.Read(c.readFn); err != nil {
			return // a deadline passed, or the connection was closed
		}
		if c.rerr != nil {
			// A request cut short: net/http decides what that is (its
			// 400, or nothing), so the answer is the same. (Between
			// requests it waits for 4 bytes before it reads one.)
			if c.rerr == io.EOF && c.n > 0 && (c.n >= 4 || !c.ss.served) {
				c.handoff(c.b.rd[:c.n])
			}
			return
		}
		b := c.b
		used, v := c.ss.process(b.rd[:c.n], &b.out, &b.scratch, &b.ar, c.n == len(b.rd), c.fs.closing.Load())
		if len(b.out) > 0 {
			ok := c.flush(b.out)
			b.out = b.out[:0]
			if !ok {
				return
			}
		}
		switch v {
		case vClose:
			return
		case vHandoff:
			c.handoff(b.rd[used:c.n])
			return
		}
		if used > 0 {
			c.n = copy(b.rd, b.rd[used:c.n])
			c.pending = false
		}
		now := time.Now()
		switch {
		case c.n > 0 && !c.pending:
			// A request has begun: its header block is due within the
			// header timeout (slow clients must not hold the idle one).
			c.pending = true
			c.setDeadline(now.Add(s.headerTimeout), true)
		case c.n == 0:
			if c.fs.closing.Load() {
				return
			}
			c.pending = false
			// Refreshed at most once a second: a timer update per answer
			// would cost more than the answer.
			if want := now.Add(s.cfg.IdleTimeout).UnixNano(); c.dlHeader || c.dl < want-int64(time.Second) {
				c.setDeadline(now.Add(s.cfg.IdleTimeout), false)
			}
		}
	}
}

// setDeadline sets the read deadline; on a stopping server it ends the
// wait at once instead, whatever the shutdown set before.
func (c *fconn) setDeadline(t time.Time, header bool) {
	_ = c.f.SetReadDeadline(t)
	c.dl, c.dlHeader = t.UnixNano(), header
	if c.fs.closing.Load() {
		_ = c.f.SetReadDeadline(time.Unix(1, 0))
	}
}

// doRead reads what is there into the buffers (taking them on the first
// byte), or, with nothing there and nothing pending, gives the buffers
// back and asks the poller to wait.
func (c *fconn) doRead(fd uintptr) bool {
	if c.b == nil {
		c.b = c.fs.s.bufPool.Get().(*fbufs)
	}
	for {
		n, err := unix.Read(int(fd), c.b.rd[c.n:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if c.n == 0 {
				c.fs.s.bufPool.Put(c.b)
				c.b = nil
			}
			return false
		case err != nil:
			c.rerr = err
		case n == 0:
			c.rerr = io.EOF
		default:
			c.n += n
			c.rerr = nil
		}
		return true
	}
}

// flush writes p whole. A client that does not read gets WriteTimeout,
// set only once a write would block.
func (c *fconn) flush(p []byte) bool {
	c.wbuf, c.werr = p, nil
	for {
		if err := c.rc.Write(c.writeFn); err != nil {
			return false
		}
		if c.werr != nil {
			return false
		}
		if !c.wblocked {
			break
		}
		c.wblocked, c.wdl = false, true
		_ = c.f.SetWriteDeadline(time.Now().Add(c.fs.s.cfg.WriteTimeout))
	}
	if c.wdl {
		c.wdl = false
		_ = c.f.SetWriteDeadline(time.Time{})
	}
	c.wbuf = nil
	return true
}

func (c *fconn) doWrite(fd uintptr) bool {
	for len(c.wbuf) > 0 {
		n, err := unix.Write(int(fd), c.wbuf)
		if n > 0 {
			c.wbuf = c.wbuf[n:]
		}
		switch err {
		case nil:
		case unix.EINTR:
		case unix.EAGAIN:
			if !c.wdl {
				c.wblocked = true
				return true // back to flush, which sets the deadline
			}
			return false // wait until writable (or the deadline)
		default:
			c.werr = err
			return true
		}
	}
	return true
}

// handoff gives the connection and its unanswered bytes to net/http.
func (c *fconn) handoff(rest []byte) {
	fs := c.fs
	hc := &handoffConn{
		f: c.f, rc: c.rc, pre: append([]byte(nil), rest...), fs: fs,
		remote: &net.TCPAddr{IP: c.ss.peer.AsSlice(), Port: int(c.port), Zone: c.zone},
	}
	fs.forget(c)
	c.f = nil // hc owns it now, and the place under the cap
	if c.wdl {
		_ = hc.f.SetWriteDeadline(time.Time{})
	}
	fs.hl.hand(hc)
}

// close ends the connection (unless handed over) and recycles c.
func (c *fconn) close() {
	fs := c.fs
	if c.f != nil {
		fs.forget(c)
		_ = c.f.Close()
		fs.s.fastOpen.Add(-1)
	}
	if c.b != nil {
		c.b.out = c.b.out[:0]
		fs.s.bufPool.Put(c.b)
		c.b = nil
	}
	c.f, c.rc, c.fs, c.rerr, c.werr, c.wbuf = nil, nil, nil, nil, nil, nil
	c.ss.s = nil
	fs.s.connPool.Put(c)
	fs.wg.Done()
}
