// Package dnsd is the STB-facing authoritative DNS front end: a query for a
// service hostname is answered with the address of the edge server the steer
// engine chooses for the asking client, over UDP and TCP.
//
// # Zones
//
// Every service hostname of the current snapshot is the apex of a zone this
// server is authoritative for (live.iptv.example is delegated to the
// schedulers; iptv.example is not ours). At the apex:
//
//   - A and AAAA: the chosen server's address when it is of the asked family,
//     otherwise NOERROR with no answer (NODATA) and the SOA in the authority
//     section: an STB is never sent to a server the engine did not choose.
//   - ANY: answered like A/AAAA with the chosen server's single record (the
//     minimal answer RFC 8482 allows).
//   - SOA and NS: the zone's own records; the SOA serial is the snapshot
//     revision (mod 2^32, RFC 1982 arithmetic).
//   - AXFR and IXFR: REFUSED (the answer depends on the client, there is no
//     zone to transfer).
//   - any other type: NODATA with the SOA.
//
// The zone's name server is Config.NSName, or ns1.<apex> by default; when it
// lies inside the zone it resolves to the snapshot's anycast service address,
// which is where STBs reach the schedulers, and is given as glue with NS
// answers. Every other name below an apex is NXDOMAIN with the SOA; names in
// no zone are REFUSED. Names match case-insensitively (0x20-randomising
// resolvers) and answers echo the question as asked.
//
// # Errors
//
//   - A message with the QR bit set is dropped without an answer: answering
//     responses lets two servers loop and makes us a reflector.
//   - Opcode other than QUERY: NOTIMP.
//   - Not exactly one question, more than one OPT, or a malformed ECS option:
//     FORMERR. A message whose header parses but whose body does not gets a
//     header-only FORMERR from miekg/dns; one without a header is dropped.
//   - EDNS version other than 0: BADVERS (RFC 6891).
//   - Class other than IN: REFUSED (we hold no zone in any other class).
//   - No snapshot yet, or no available server anywhere: SERVFAIL, so
//     resolvers try another scheduler instead of caching a negative answer.
//
// # EDNS
//
// A request with OPT gets an OPT back advertising Config.MaxUDPSize. An NSID
// request (dig +nsid) is answered with Config.InstanceID, to tell anycast
// instances apart. EDNS Client Subnet (RFC 7871) locates the client instead
// of the packet source when its source prefix is non-zero and the query
// comes from one of Config.TrustedResolvers; from anywhere else the option
// is validated and echoed with scope 0 (RFC 7871 §7.2.1: the answer does not
// depend on it) and the packet source decides. See index.ecsScope for the
// scope of an answer that used it.
//
// # Connections
//
// TCP connections are capped (Config.MaxTCPConnections): one beyond the
// cap is accepted and reset at once. A connection must deliver its first
// query within tcpReadTimeout and each later one within tcpIdleTimeout, and
// a reply that cannot be written within tcpWriteTimeout ends it, so a slow
// or silent client holds a place for seconds, not for ever.
package dnsd

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/accesslog"
	"github.com/anysched/anysched/internal/netutil"
	"github.com/anysched/anysched/internal/steer"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures the DNS front end. Zero values take the defaults.
type Config struct {
	Listen string        // UDP and TCP address; default ":53"
	TTL    time.Duration // of answers, and the negative-caching TTL; default 30s
	// NSName is the name server of every zone; default ns1.<apex> per zone.
	NSName string
	// Hostmaster is the SOA contact, as a mailbox (a@b.example) or a DNS
	// name; default hostmaster.<apex>.
	Hostmaster string
	InstanceID string // returned to NSID requests; empty: NSID not answered
	// MaxUDPSize is the largest UDP response we send and advertise;
	// default 1232 (DNS flag day 2020: no IP fragmentation), at least 512.
	MaxUDPSize uint16
	// TrustedResolvers are the networks whose EDNS Client Subnet option is
	// believed (the operator's recursive resolvers). Empty: ECS is never
	// used, every query is answered for its packet source.
	TrustedResolvers []netip.Prefix
	// MaxTCPConnections caps the TCP connections open at once; default
	// 1000. Answers fit in UDP, so TCP is rare (a resolver retrying after
	// TC, a diagnostic dig): the cap only has to bound what a flood of idle
	// connections costs (a goroutine and buffers each).
	MaxTCPConnections int
}

// Defaults.
const (
	DefaultListen     = ":53"
	DefaultTTL        = 30 * time.Second
	DefaultMaxUDPSize = 1232
	// DefaultMaxTCPConnections: see Config.MaxTCPConnections.
	DefaultMaxTCPConnections = 1000
)

// DNS-over-TCP timeouts (miekg/dns defaults the first two to these values,
// but sets no write deadline): RFC 7766 §6.2.3 asks servers to keep idle
// connections only briefly, and a client that sends a query byte by byte or
// never reads its answer must not hold a connection.
const (
	tcpReadTimeout  = 2 * time.Second // to receive the first query of a connection
	tcpIdleTimeout  = 8 * time.Second // to receive each later query
	tcpWriteTimeout = 2 * time.Second // to hand a reply to the kernel
)

// udpReadSize bounds incoming UDP queries; real ones are far smaller, even
// padded (RFC 8467), and a larger datagram is cut by the kernel and FORMERRed.
const udpReadSize = 4096

// shutdownTimeout bounds how long Serve waits for TCP connections to finish.
const shutdownTimeout = 5 * time.Second

// EngineFunc returns the current engine, nil while no snapshot is loaded. It
// is called once per query, so it must be cheap (an atomic load).
type EngineFunc func() *steer.Engine

// Server answers queries from the current engine. Its handler is safe for
// concurrent use.
type Server struct {
	cfg  Config
	ttl  uint32
	nsid string // hex of InstanceID, as EDNS0_NSID carries it
	// trusted: Config.TrustedResolvers, masked and unmapped.
	trusted []netip.Prefix
	tcp     *netutil.ConnLimit
	engine  EngineFunc
	rec     *accesslog.Recorder
	log     *slog.Logger
	index   atomic.Pointer[index] // zones of the last snapshot seen
	// listening is true while both the UDP and the TCP server run; the
	// daemon announces the Anycast route only then.
	listening atomic.Bool
}

// Listening reports whether the UDP and TCP servers are both serving.
func (s *Server) Listening() bool { return s.listening.Load() }

// New creates a server. rec may be nil (no access log).
func New(c Config, engine EngineFunc, rec *accesslog.Recorder, log *slog.Logger) *Server {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxUDPSize == 0 {
		c.MaxUDPSize = DefaultMaxUDPSize
	}
	c.MaxUDPSize = max(c.MaxUDPSize, dns.MinMsgSize)
	if c.MaxTCPConnections <= 0 {
		c.MaxTCPConnections = DefaultMaxTCPConnections
	}
	if c.NSName != "" {
		c.NSName = dns.CanonicalName(c.NSName)
	}
	if c.Hostmaster != "" {
		c.Hostmaster = mailbox(c.Hostmaster)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:    c,
		ttl:    uint32(c.TTL / time.Second),
		nsid:   hex.EncodeToString([]byte(c.InstanceID)),
		tcp:    netutil.NewConnLimit(c.MaxTCPConnections, netutil.LimitOptions{WriteTimeout: tcpWriteTimeout}),
		engine: engine,
		rec:    rec,
		log:    log.With("component", "dns"),
	}
	for _, p := range c.TrustedResolvers {
		if a := p.Addr(); a.Is4In6() { // query sources are unmapped
			p = netip.PrefixFrom(a.Unmap(), max(p.Bits()-96, 0))
		}
		if p.IsValid() {
			s.trusted = append(s.trusted, p.Masked())
		}
	}
	return s
}

// Register adds the server's connection metrics to reg.
func (s *Server) Register(reg prometheus.Registerer) {
	s.tcp.Register(reg, "anysched_dns_tcp_connections", "DNS-over-TCP connections", "dns.max_tcp_connections")
}

// trustedResolver reports whether src may locate its clients with ECS.
func (s *Server) trustedResolver(src netip.Addr) bool {
	for _, p := range s.trusted {
		if p.Contains(src) {
			return true
		}
	}
	return false
}

// mailbox turns hostmaster@example.net into the SOA RNAME
// hostmaster.example.net., escaping dots of the local part.
func mailbox(s string) string {
	if local, domain, ok := strings.Cut(s, "@"); ok {
		s = strings.ReplaceAll(local, ".", `\.`) + "." + domain
	}
	return dns.CanonicalName(s)
}

// Handler returns the server's dns.Handler (the Server itself).
func (s *Server) Handler() dns.Handler { return s }

// Run serves UDP and TCP on Config.Listen until ctx is cancelled, then stops
// both and returns nil.
func (s *Server) Run(ctx context.Context) error {
	pc, ln, err := Listen(s.cfg.Listen)
	if err != nil {
		return err
	}
	return s.Serve(ctx, pc, ln)
}

// Listen binds UDP and TCP on addr. With port 0, TCP takes the port the
// kernel gave UDP, so both answer on one port.
func Listen(addr string) (net.PacketConn, net.Listener, error) {
	pc, err := netutil.ListenPacket("udp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dns: %w", err)
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
		if u, ok := pc.LocalAddr().(*net.UDPAddr); ok {
			addr = net.JoinHostPort(host, strconv.Itoa(u.Port))
		}
	}
	ln, err := netutil.Listen("tcp", addr)
	if err != nil {
		pc.Close()
		return nil, nil, fmt.Errorf("dns: %w", err)
	}
	return pc, ln, nil
}

// Serve answers on pc (UDP) and ln (TCP) until ctx is cancelled, then shuts
// both down, closes them and returns nil. If either stops by itself, the
// other is shut down too and its error returned.
func (s *Server) Serve(ctx context.Context, pc net.PacketConn, ln net.Listener) error {
	type running struct {
		name          string
		srv           *dns.Server
		started, done chan struct{}
		err           error
	}
	invalid := func(m []byte, err error) { s.log.Debug("unparsable message", "len", len(m), "err", err) }
	all := []*running{
		{name: "udp", srv: &dns.Server{PacketConn: pc, UDPSize: udpReadSize}},
		{name: "tcp", srv: &dns.Server{
			Listener: s.tcp.Listener(ln), ReadTimeout: tcpReadTimeout,
			IdleTimeout: func() time.Duration { return tcpIdleTimeout },
		}},
	}
	for _, r := range all {
		r.started, r.done = make(chan struct{}), make(chan struct{})
		r.srv.Handler, r.srv.MsgAcceptFunc, r.srv.MsgInvalidFunc = s, acceptQuery, invalid
		r.srv.NotifyStartedFunc = func() { close(r.started) }
		go func() {
			r.err = r.srv.ActivateAndServe()
			close(r.done)
		}()
	}
	s.log.Info("listening", "udp", pc.LocalAddr().String(), "tcp", ln.Addr().String())
	go func() {
		for _, r := range all {
			select {
			case <-r.started:
			case <-r.done:
				return
			}
		}
		s.listening.Store(true)
	}()
	defer s.listening.Store(false)
	var failed error
	select {
	case <-ctx.Done():
	case <-all[0].done:
		failed = fmt.Errorf("dns: udp server stopped: %w", all[0].err)
	case <-all[1].done:
		failed = fmt.Errorf("dns: tcp server stopped: %w", all[1].err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	for _, r := range all {
		select {
		case <-r.started: // ShutdownContext before start would be a no-op and leave it running
			if err := r.srv.ShutdownContext(sctx); err != nil && failed == nil {
				s.log.Warn("shutdown", "net", r.name, "err", err)
			}
		case <-r.done:
		}
		<-r.done
	}
	// miekg closes the listener but not always the packet conn (only on
	// shutdown); make sure both are released.
	pc.Close()
	ln.Close()
	s.log.Info("stopped")
	if failed != nil && ctx.Err() == nil {
		return failed
	}
	return nil
}

// acceptQuery replaces miekg's default filter, which would answer bad
// opcodes and question counts itself, without EDNS and unlogged. It only
// drops responses (QR set); every other message that parses reaches ServeDNS,
// which decides, forms and logs every rejection in one place.
func acceptQuery(h dns.Header) dns.MsgAcceptAction {
	const qr = 1 << 15
	if h.Bits&qr != 0 {
		return dns.MsgIgnore
	}
	return dns.MsgAccept
}
