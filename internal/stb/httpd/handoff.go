package httpd

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// handoffListener feeds the connections the fast path hands over to
// net/http's Serve.
type handoffListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{ch: make(chan net.Conn), done: make(chan struct{}), addr: addr}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }

// hand passes c to net/http, or closes it when the server has stopped.
func (l *handoffListener) hand(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		_ = c.Close()
	}
}

// handoffConn is a fast-path connection as net/http sees it: the bytes the
// fast path read but did not answer come first, then the socket.
type handoffConn struct {
	f      *os.File
	rc     syscall.RawConn
	pre    []byte
	fs     *fastServe
	remote net.Addr
	closed atomic.Bool
}

func (c *handoffConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	n, err := c.f.Read(p)
	return n, c.netErr("read", err)
}

func (c *handoffConn) Write(p []byte) (int, error) {
	n, err := c.f.Write(p)
	return n, c.netErr("write", err)
}

// netErr gives an error the form a *net.TCPConn's has (net/http tells a
// timeout or a read failure, which it does not answer, by it).
func (c *handoffConn) netErr(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.remote, Err: err}
}

// Close closes the socket and frees its place under the cap, once.
func (c *handoffConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.fs.s.fastOpen.Add(-1)
	}
	return c.f.Close()
}

// CloseWrite lets net/http half-close after an error answer, as it does
// on a *net.TCPConn.
func (c *handoffConn) CloseWrite() error {
	var err error
	if cerr := c.rc.Control(func(fd uintptr) { err = unix.Shutdown(int(fd), unix.SHUT_WR) }); cerr != nil {
		return cerr
	}
	return err
}

func (c *handoffConn) LocalAddr() net.Addr {
	var sa unix.Sockaddr
	_ = c.rc.Control(func(fd uintptr) { sa, _ = unix.Getsockname(int(fd)) })
	ap, zone := sockaddrPort(sa)
	if !ap.IsValid() {
		return c.fs.hl.addr
	}
	return &net.TCPAddr{IP: ap.Addr().AsSlice(), Port: int(ap.Port()), Zone: zone}
}

func (c *handoffConn) RemoteAddr() net.Addr               { return c.remote }
func (c *handoffConn) SetDeadline(t time.Time) error      { return c.f.SetDeadline(t) }
func (c *handoffConn) SetReadDeadline(t time.Time) error  { return c.f.SetReadDeadline(t) }
func (c *handoffConn) SetWriteDeadline(t time.Time) error { return c.f.SetWriteDeadline(t) }
