package netutil

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ConnLimit caps the connections open at once on the listeners it wraps.
// Unlike golang.org/x/net/netutil.LimitListener it never blocks Accept: a
// connection beyond the cap is accepted and reset at once, so a flood of
// idle connections costs the attacker a handshake each and cannot queue up
// in the kernel's backlog ahead of real clients, which are served again as
// soon as connections close. Its counts outlive any one listener, so a
// server's metrics can read them from its construction on.
type ConnLimit struct {
	max          int64
	writeTimeout time.Duration
	open         atomic.Int64
	refused      atomic.Uint64
}

// LimitOptions tune a ConnLimit.
type LimitOptions struct {
	// WriteTimeout, when > 0, is set as the write deadline before every
	// write, for servers (miekg/dns over TCP) that set none themselves: a
	// client that stops reading cannot pin its connection on a full send
	// buffer.
	WriteTimeout time.Duration
}

// NewConnLimit allows at most max connections open at once; max <= 0 means
// no cap (the counts are still kept).
func NewConnLimit(max int, o LimitOptions) *ConnLimit {
	l := &ConnLimit{max: int64(max), writeTimeout: o.WriteTimeout}
	if max <= 0 {
		l.max = 1<<63 - 1
	}
	return l
}

// Open is the number of accepted connections not yet closed.
func (l *ConnLimit) Open() int64 { return l.open.Load() }

// Refused is the number of connections reset because the cap was reached.
func (l *ConnLimit) Refused() uint64 { return l.refused.Load() }

// Register adds the limit's metrics to reg: <prefix>_open (a gauge) and
// <prefix>_refused_total, e.g. prefix anysched_http_connections; what
// names the connections and key the configuration setting of the cap.
func (l *ConnLimit) Register(reg prometheus.Registerer, prefix, what, key string) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: prefix + "_open", Help: what + " open."},
			func() float64 { return float64(l.Open()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: prefix + "_refused_total", Help: what + " reset because " + key + " were open."},
			func() float64 { return float64(l.Refused()) }),
	)
}

// Listener wraps ln under the limit.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l}
}

type limitedListener struct {
	net.Listener
	l *ConnLimit
}

// Accept returns the next connection under the cap, resetting any beyond
// it on the way.
func (ll *limitedListener) Accept() (net.Conn, error) {
	l := ll.l
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			l.refused.Add(1)
			reset(c)
			continue
		}
		return &limitedConn{Conn: c, l: l}, nil
	}
}

// reset closes c with an RST rather than a FIN: nothing is owed to the
// peer, and the socket leaves no TIME_WAIT behind on our side.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

type limitedConn struct {
	net.Conn
	l      *ConnLimit
	closed atomic.Bool
}

func (c *limitedConn) Write(b []byte) (int, error) {
	if t := c.l.writeTimeout; t > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(t)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(b)
}

// Close releases the connection's place under the cap, once however often
// it is called (net/http and miekg/dns may both close on shutdown).
func (c *limitedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
	}
	return c.Conn.Close()
}
