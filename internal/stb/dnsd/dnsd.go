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
// A request with OPT gets an OPT back advertising Config.MaxUDPSize, with
// the DO bit copied from the request (RFC 3225 §3; the zones are unsigned,
// so it changes nothing else). Other flags and unknown options are ignored.
// An NSID request (dig +nsid) is answered with Config.InstanceID, to tell
// anycast instances apart. EDNS Client Subnet (RFC 7871) locates the client
// instead of the packet source when its source prefix is non-zero and the
// query comes from one of Config.TrustedResolvers; from anywhere else the
// option is validated and echoed with scope 0 (RFC 7871 §7.2.1: the answer
// does not depend on it) and the packet source decides. See index.ecsScope
// for the scope of an answer that used it.
//
// # Fast path
//
// Nearly every query is an STB's resolver asking A or AAAA for a service
// hostname over UDP, and miekg/dns spends most of a core's time on those in
// unpacking, allocating and packing. So UDP is read by a fixed set of
// goroutines, Config.UDPReaders per socket on Config.UDPSockets
// SO_REUSEPORT sockets (ListenSockets), each taking a batch of datagrams
// per recvmmsg and sending the replies with one sendmmsg. Each query of
// that common shape is answered from the wire (fastpath.go): a plain QUERY
// with one question, class IN, type A or AAAA, for an apex (any case),
// without EDNS or with an OPT of version 0 whose options are only ECS,
// COOKIE and PADDING (the handler ignores the last two; resolvers that send
// cookies stay on the fast path). The question is parsed in place and the
// reply written into the reader's buffer: no goroutine and no allocation
// per query (one string for the access log when the name is not asked in
// lowercase). The decision is the handler's: the same engine call for the
// same client, ECS trusted and scoped the same way, logged with the same
// access-log entry.
//
// Everything else goes, inline on the reader, through the full path: miekg
// unpacks the datagram as its server did and ServeDNS answers it. That is
// TCP, truncation, every other type, NSID, unknown options, names below or
// outside an apex, malformed or unsupported messages, and also any query
// whose reply might exceed the client's UDP size: the fast path checks the
// largest reply it could build before deciding, so that no query is decided
// twice (a balance policy's state moves once per query). Rare shapes keep
// the one implementation that has always answered them.
//
// The two paths send the same bytes: miekg packs a UDP reply that fits
// uncompressed without compression, and the fast path writes exactly that.
// TestFastPathDifferential and FuzzFastPath feed the same datagrams to both
// and require byte-identical replies and equal access-log lines; there is
// no legitimate difference, since the fast path declines every query whose
// reply it cannot reproduce exactly. anysched_dns_queries_total{path}
// counts the queries each path answered.
//
// A socket bound to a wildcard address learns each datagram's destination
// (IP_PKTINFO) and answers from it, as miekg's server did, so that replies
// leave from the anycast address they were sent to.
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
	"encoding/hex"
	"log/slog"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/netutil"
	"github.com/anysched/anysched/internal/stb/steer"
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
	// UDPSockets is how many UDP sockets Run binds to Listen with
	// SO_REUSEPORT, the kernel spreading queries over them by a hash of
	// the sender's address and port; default runtime.GOMAXPROCS(0), one
	// per core. See ListenSockets.
	UDPSockets int
	// UDPReaders is how many goroutines read each UDP socket; default 1.
	// A reader answers a whole batch per system call, so one per socket
	// keeps a core busy; more only help a socket that gets most of the
	// traffic (few resolvers, one source port each) on a many-core host.
	UDPReaders int
}

// Defaults.
const (
	DefaultListen     = ":53"
	DefaultTTL        = 30 * time.Second
	DefaultMaxUDPSize = 1232
	// DefaultMaxTCPConnections: see Config.MaxTCPConnections.
	DefaultMaxTCPConnections = 1000
	// DefaultUDPReaders: see Config.UDPReaders.
	DefaultUDPReaders = 1
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
	// queries counts the queries answered by path (anysched_dns_queries_total).
	queries                  *prometheus.CounterVec
	fastQueries, fullQueries prometheus.Counter
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
	if c.UDPSockets <= 0 {
		c.UDPSockets = runtime.GOMAXPROCS(0)
	}
	if c.UDPReaders <= 0 {
		c.UDPReaders = DefaultUDPReaders
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
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anysched_dns_queries_total",
			Help: "DNS queries answered, by path: fast (UDP A/AAAA at a service hostname, answered from the wire) or full (miekg/dns: TCP and every other query).",
		}, []string{"path"}),
	}
	s.fastQueries, s.fullQueries = s.queries.WithLabelValues("fast"), s.queries.WithLabelValues("full")
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

// Register adds the server's metrics to reg: TCP connections, and queries
// by path.
func (s *Server) Register(reg prometheus.Registerer) {
	s.tcp.Register(reg, "anysched_dns_tcp_connections", "DNS-over-TCP connections", "dns.max_tcp_connections")
	reg.MustRegister(s.queries)
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
