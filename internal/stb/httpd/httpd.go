package httpd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/netutil"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures the listener. Zero fields take the defaults below.
type Config struct {
	// Listen is the address to serve on; default ":80" (STBs are given plain
	// http:// URLs on the Anycast address).
	Listen string
	// TrustedProxies are the peers whose X-Forwarded-For is believed (a load
	// balancer or a TLS terminator in front of the scheduler). Empty: the TCP
	// peer is always the client, whatever the request claims.
	TrustedProxies []netip.Prefix
	// InstanceID names this scheduler in the X-Anysched-Instance header, so a
	// redirect seen on an STB can be traced to the instance Anycast routed it
	// to. Default: the host name.
	InstanceID string
	// Timeouts. STB requests are tiny, so they are short by default (read
	// 5s, write 5s, idle 60s, read-header 2s): a slow or idle client must
	// not pin a connection on a box that answers a whole city. The fast
	// path reads no request bodies, so for it ReadTimeout only shortens
	// the header timeout when it is the smaller; WriteTimeout bounds an
	// answer to a client that does not read.
	ReadTimeout, WriteTimeout, IdleTimeout, ReadHeaderTimeout time.Duration
	// MaxHeaderBytes limits request line plus headers; default 8 KiB. Beyond
	// it the fast path answers 431 and closes; net/http does so only past
	// another 4 KiB of slack (its read buffer).
	MaxHeaderBytes int
	// MaxConnections caps the connections open at once, idle keep-alive ones
	// included; a connection beyond it is accepted and reset at once.
	// Default 50000: above a city's STBs changing channel at once (each
	// holds one connection, for at most IdleTimeout), below what file
	// descriptors (LimitNOFILE) allow, and bounding memory: an idle
	// connection costs about 15 KiB on net/http (buffers and goroutine
	// stack, measured) and about 1 KiB on the fast path (its place in an
	// event loop: no goroutine, no buffers while idle); lower it on small
	// hosts.
	MaxConnections int
	// Allocator refines the decisions of services that select by QoE; nil:
	// they are answered like nearest.
	Allocator Allocator
	// Steering answers content steering manifests (pathway.Prefix); nil:
	// they are refused 404.
	Steering Steerer
	// Observer is told of every redirect (passive outlier detection); nil:
	// nobody is.
	Observer Observer
	// Server is what serves the listener: ServerFast (the default), the
	// fast path, or ServerNetHTTP, net/http alone. Both answer through the
	// same handler core; net/http is there for operators who need its
	// exact behaviour for every request (the fast path hands it the
	// connections whose requests are not in the plain form STBs send).
	Server string
	// AcceptLoops is how many goroutines of the fast path accept on the
	// listener and answer new connections' first requests, and how many
	// event loops serve the connections they keep open (dealt to the
	// loops in turn); default GOMAXPROCS.
	AcceptLoops int
}

// Servers of Config.Server.
const (
	ServerFast    = "fast"
	ServerNetHTTP = "net/http"
)

// Observer watches the redirects an HTTP front end gives. It runs on the
// STB's path: it must not block or allocate.
type Observer interface {
	Observe(eng *steer.Engine, d steer.Decision, req steer.Request, at time.Time)
}

// Allocator is the live QoE allocation (internal/allocation/allocator). It gets the
// viewer token the request carries ("" for none); an error refuses the
// request with 403 and says why.
type Allocator interface {
	Allocate(eng *steer.Engine, d *steer.Decision, req steer.Request, token string) error
}

// Defaults applied by New.
const (
	DefaultListen            = ":80"
	DefaultReadTimeout       = 5 * time.Second
	DefaultWriteTimeout      = 5 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultReadHeaderTimeout = 2 * time.Second
	DefaultMaxHeaderBytes    = 8 << 10
	DefaultMaxConnections    = 50000
)

// MaxURILength is the longest request target answered; longer ones get 414.
// STB playback URLs are short; a long one is an attack or a broken client,
// and it would be copied into the Location header.
const MaxURILength = 4 << 10

// shutdownTimeout bounds the graceful stop. The daemon drains traffic by
// withdrawing the route before cancelling Run, so only a few in-flight
// requests remain by then.
const shutdownTimeout = 5 * time.Second

// retryAfter is sent with 503s: STBs that honour it retry soon, by when the
// snapshot may have loaded or a server recovered (or Anycast moved them).
const retryAfter = "5"

// EngineFunc returns the current routing engine, or nil while the scheduler
// has no snapshot yet. It is called once per request, so it must be cheap
// (typically an atomic.Pointer Load).
type EngineFunc func() *steer.Engine

// Server answers STB requests. Its handler is safe for concurrent use.
type Server struct {
	cfg      Config
	engine   EngineFunc
	rec      *accesslog.Recorder
	log      *slog.Logger
	trusted  []netip.Prefix
	instance []string // header value, shared by every response (read-only)
	conns    *netutil.ConnLimit

	// The fast path's connection count (the cap and the same metrics as
	// conns), pools and constant header bytes.
	fastOpen      atomic.Int64
	fastRefused   atomic.Uint64
	connPool      sync.Pool // *lconn
	bufPool       sync.Pool // *fbufs
	dates         dateCache
	instanceLine  []byte
	headerTimeout time.Duration // of the fast path

	mu   sync.Mutex
	addr net.Addr
}

// New builds a server. rec may be nil (nothing is recorded) and log may be
// nil (nothing is logged).
func New(c Config, engine EngineFunc, rec *accesslog.Recorder, log *slog.Logger) *Server {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.InstanceID == "" {
		c.InstanceID, _ = os.Hostname()
		if c.InstanceID == "" {
			c.InstanceID = "anysched"
		}
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.Server == "" {
		c.Server = ServerFast
	}
	if c.AcceptLoops <= 0 {
		c.AcceptLoops = runtime.GOMAXPROCS(0)
	}
	if engine == nil {
		engine = func() *steer.Engine { return nil }
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg: c, engine: engine, rec: rec, log: log.With("component", "http"), instance: []string{c.InstanceID},
		conns:         netutil.NewConnLimit(c.MaxConnections, netutil.LimitOptions{}),
		instanceLine:  instanceHeaderLine(c.InstanceID),
		headerTimeout: min(c.ReadHeaderTimeout, c.ReadTimeout),
	}
	s.connPool.New = func() any { return new(lconn) }
	maxHeader := c.MaxHeaderBytes
	s.bufPool.New = func() any {
		return &fbufs{rd: make([]byte, maxHeader), out: make([]byte, 0, 1024), scratch: make([]byte, 0, 256)}
	}
	for _, p := range c.TrustedProxies {
		if p.IsValid() {
			s.trusted = append(s.trusted, p.Masked())
		}
	}
	return s
}

// Register adds the server's connection metrics to reg (the names and
// help of netutil.ConnLimit's, counting both paths' connections).
func (s *Server) Register(reg prometheus.Registerer) {
	const what = "STB-facing HTTP connections (idle keep-alive ones included)"
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "anysched_http_connections_open", Help: what + " open."},
			func() float64 { return float64(s.conns.Open() + s.fastOpen.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "anysched_http_connections_refused_total", Help: what + " reset because http.max_connections were open."},
			func() float64 { return float64(s.conns.Refused() + s.fastRefused.Load()) }),
	)
}

// Config returns the configuration with defaults applied.
func (s *Server) Config() Config { return s.cfg }

// Handler returns the STB request handler (the Server itself).
func (s *Server) Handler() http.Handler { return s }

// Addr returns the address the server listens on, or nil when it is not
// listening (before Run or Serve has bound, and after they return). The
// daemon announces the Anycast route only once this is non-nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

func (s *Server) setAddr(a net.Addr) {
	s.mu.Lock()
	s.addr = a
	s.mu.Unlock()
}

// Run listens on Config.Listen and serves until ctx is done; then it stops
// gracefully (bounded) and returns nil.
func (s *Server) Run(ctx context.Context) error {
	ln, err := netutil.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx is done, then shuts down: it stops accepting,
// lets in-flight requests finish for up to a few seconds, closes what is
// left, and returns nil. ln is closed on return. A failure of the listener
// itself is returned. The caller binds ln (the daemon does so before it
// drops privileges, with IP_FREEBIND); the fast path accepts on a
// duplicate of its descriptor, so it needs a *net.TCPListener and serves
// any other listener with net/http.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	switch s.cfg.Server {
	case ServerFast:
		return s.serveFast(ctx, ln)
	case ServerNetHTTP:
		return s.serveNetHTTP(ctx, ln, "http")
	}
	_ = ln.Close()
	return fmt.Errorf("http listener: unknown server %q (want %q or %q)", s.cfg.Server, ServerFast, ServerNetHTTP)
}
