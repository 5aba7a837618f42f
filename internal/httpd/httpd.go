// Package httpd is the STB-facing HTTP redirect front end: every GET or HEAD
// on the Anycast address is answered with a 302 to the edge server the steer
// engine picks. The handler does no I/O besides the answer itself and, on the
// redirect path, allocates little more than the Location header value (the
// URL is rendered into a pooled buffer, constant headers share their value
// slices), so one scheduler can absorb a whole city's channel-change storm.
package httpd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/accesslog"
	"github.com/anysched/anysched/internal/netutil"
	"github.com/anysched/anysched/internal/steer"
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
	// Timeouts of net/http. STB requests are tiny, so they are short by default
	// (read 5s, write 5s, idle 60s, read-header 2s): a slow or idle client must
	// not pin a connection on a box that answers a whole city.
	ReadTimeout, WriteTimeout, IdleTimeout, ReadHeaderTimeout time.Duration
	// MaxHeaderBytes limits request line plus headers; default 8 KiB (net/http
	// answers 431 beyond it).
	MaxHeaderBytes int
	// MaxConnections caps the connections open at once, idle keep-alive ones
	// included; a connection beyond it is accepted and reset at once.
	// Default 50000: above a city's STBs changing channel at once (each
	// holds one connection, for at most IdleTimeout), below what file
	// descriptors (LimitNOFILE) allow, and bounding memory: an idle
	// connection costs about 15 KiB in the process (buffers and goroutine
	// stack, measured), so some 750 MiB at the cap; lower it on small hosts.
	MaxConnections int
	// Allocator refines the decisions of services that select by QoE; nil:
	// they are answered like nearest.
	Allocator Allocator
}

// Allocator is the live QoE allocation (internal/allocator). It gets the
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

	mu   sync.Mutex
	addr net.Addr
}

// Header values shared by every response. net/http never modifies a
// header's value slice in place, and len == cap, so an append by a
// middleware copies instead of writing into these; sharing them saves an
// allocation per header per request.
var (
	hdrNoStore  = []string{"no-store"}
	hdrAllow    = []string{"GET, HEAD"}
	hdrText     = []string{"text/plain; charset=utf-8"}
	hdrJSON     = []string{"application/json"}
	hdrRetry    = []string{retryAfter}
	hdrNoSniff  = []string{"nosniff"}
	instanceKey = "X-Anysched-Instance"
)

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
	if engine == nil {
		engine = func() *steer.Engine { return nil }
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg: c, engine: engine, rec: rec, log: log.With("component", "http"), instance: []string{c.InstanceID},
		conns: netutil.NewConnLimit(c.MaxConnections, netutil.LimitOptions{}),
	}
	for _, p := range c.TrustedProxies {
		if p.IsValid() {
			s.trusted = append(s.trusted, p.Masked())
		}
	}
	return s
}

// Register adds the server's connection metrics to reg.
func (s *Server) Register(reg prometheus.Registerer) {
	s.conns.Register(reg, "anysched_http_connections", "STB-facing HTTP connections (idle keep-alive ones included)", "http.max_connections")
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
// itself is returned.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		// "OPTIONS *" comes to the handler (405) instead of net/http's 200.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	ln = s.conns.Listener(ln)
	s.setAddr(ln.Addr())
	defer s.setAddr(nil)
	s.log.Info("http listener up", "addr", ln.Addr().String(), "instance", s.cfg.InstanceID)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http listener: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.log.Warn("graceful stop timed out; closing remaining connections", "err", err)
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http listener: %w", err)
	}
	s.log.Info("http listener stopped")
	return nil
}

// DebugHeader in a request asks for X-Anysched-Result and Server-Timing in
// the answer (canonical form, as net/http stores it).
const DebugHeader = "X-Anysched-Debug"

// resultHeader holds the X-Anysched-Result values, allocated once.
var resultHeader = func() map[steer.Result][]string {
	m := map[steer.Result][]string{}
	for _, r := range steer.Results {
		m[r] = []string{r.String()}
	}
	return m
}()

// bufPool holds the buffers redirect URLs are rendered into.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// ServeHTTP answers one STB request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h := w.Header()
	h[instanceKey] = s.instance
	h["Cache-Control"] = hdrNoStore
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	default:
		h["Allow"] = hdrAllow
		s.text(w, r, http.StatusMethodNotAllowed, "method not allowed\n")
		return
	}
	if r.URL == nil {
		s.text(w, r, http.StatusBadRequest, "bad request target\n")
		return
	}
	if len(r.RequestURI) > MaxURILength || len(r.URL.Path) > MaxURILength {
		s.text(w, r, http.StatusRequestURITooLong, "request URI too long\n")
		return
	}
	// The path as the STB sent it (still escaped), for the redirect URL.
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/" // absolute form without a path: http://host
	}
	if path[0] != '/' { // "*" or another non-path target
		s.text(w, r, http.StatusBadRequest, "bad request target\n")
		return
	}
	if reason := steer.PathReason(path); reason != "" { // dot segments and the like
		s.text(w, r, http.StatusBadRequest, reason+"\n")
		return
	}
	if !validHost(r.Host) {
		s.text(w, r, http.StatusBadRequest, "missing or malformed Host\n")
		return
	}
	client := s.clientAddr(r)
	asJSON := wantsJSON(r)

	eng := s.engine()
	if eng == nil {
		const reason = "no topology snapshot loaded yet"
		lat := time.Since(start)
		h["Retry-After"] = hdrRetry
		if asJSON {
			s.json(w, r, http.StatusServiceUnavailable, &Answer{Result: steer.ResultError.String(), Reason: reason, Client: addrString(client), Host: r.Host, Instance: s.cfg.InstanceID})
		} else {
			s.text(w, r, http.StatusServiceUnavailable, reason+"\n")
		}
		s.record(start, lat, r, client, path, steer.ResultError, nil, http.StatusServiceUnavailable)
		return
	}

	req := steer.Request{Client: client, Host: r.Host, Path: path, Query: r.URL.RawQuery}
	d := eng.Decide(req)
	if s.cfg.Allocator != nil {
		if err := s.cfg.Allocator.Allocate(eng, &d, req, viewerToken(r)); err != nil {
			lat := time.Since(start)
			names := eng.Names(&d)
			if asJSON {
				s.json(w, r, http.StatusForbidden, &Answer{Result: d.Result.String(), Reason: err.Error(), Client: addrString(client), Host: r.Host, Service: names.Service, Instance: s.cfg.InstanceID})
			} else {
				s.text(w, r, http.StatusForbidden, err.Error()+"\n")
			}
			s.record(start, lat, r, client, path, d.Result, &names, http.StatusForbidden)
			return
		}
	}
	names := eng.Names(&d)
	bp := bufPool.Get().(*[]byte)
	buf := (*bp)[:0]
	var status int
	switch d.Result {
	case steer.ResultCZ, steer.ResultDefault, steer.ResultFallback:
		buf = eng.AppendLocation(buf, &d, path, r.URL.RawQuery)
		status = http.StatusFound
		if len(buf) == 0 { // no server behind a success result: never redirect nowhere
			d.Result, d.Reason, status = steer.ResultError, steer.ReasonNoServer, http.StatusServiceUnavailable
		}
	case steer.ResultMiss:
		status = http.StatusNotFound
	default:
		status = http.StatusServiceUnavailable
	}
	lat := time.Since(start)
	// On request (DebugHeader), the result type and the decision time
	// (Server-Timing is shown by browsers' and curl's tooling). Off by
	// default: every header costs net/http a map insert, a sort and a write.
	if _, debug := r.Header[DebugHeader]; debug {
		h["X-Anysched-Result"] = resultHeader[d.Result]
		if d.Server >= 0 {
			h["X-Anysched-Bitrate"] = []string{strconv.Itoa(d.BitrateKbps)}
		}
		h["Server-Timing"] = []string{"decide;dur=" + strconv.FormatFloat(float64(lat.Nanoseconds())/1e6, 'f', 3, 64)}
	}

	switch {
	case asJSON:
		a := &Answer{
			Result: d.Result.String(), Reason: d.Reason, Client: addrString(client), Host: r.Host,
			Service: names.Service, Zone: names.Zone, ClientRegion: names.ClientRegion, Region: names.Region,
			Node: names.Node, Server: names.Server, Address: names.Address, BitrateKbps: d.BitrateKbps,
			Instance: s.cfg.InstanceID,
		}
		if status == http.StatusFound {
			a.Location, status = string(buf), http.StatusOK
		}
		if status == http.StatusServiceUnavailable {
			h["Retry-After"] = hdrRetry
		}
		s.json(w, r, status, a)
	case status == http.StatusFound:
		// No body: STBs follow the Location, and the bytes are the cost.
		h["Location"] = []string{string(buf)}
		w.WriteHeader(status)
	case status == http.StatusNotFound:
		s.text(w, r, status, "hostname belongs to no service\n")
	default:
		h["Retry-After"] = hdrRetry
		buf = append(append(buf, d.Reason...), '\n')
		h["Content-Type"] = hdrText
		h["X-Content-Type-Options"] = hdrNoSniff
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			_, _ = w.Write(buf)
		}
	}
	if cap(buf) <= 64<<10 {
		*bp = buf
		bufPool.Put(bp)
	}
	s.record(start, lat, r, client, path, d.Result, &names, status)
}

// text writes a short plain-text answer.
func (s *Server) text(w http.ResponseWriter, r *http.Request, status int, body string) {
	h := w.Header()
	h["Content-Type"] = hdrText
	h["X-Content-Type-Options"] = hdrNoSniff
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(body))
	}
}

// record hands one decision to the access log and metrics. It runs after the
// answer is written; lat was taken when the answer was ready.
func (s *Server) record(start time.Time, lat time.Duration, r *http.Request, client netip.Addr, path string, res steer.Result, n *steer.Names, status int) {
	if s.rec == nil {
		return
	}
	e := accesslog.Entry{
		Time: start, Proto: "http", Client: client, Host: r.Host, Path: path,
		Result: res, Status: status, Latency: lat,
	}
	if n != nil {
		e.Zone, e.ClientRegion, e.Region, e.Server, e.Target = n.Zone, n.ClientRegion, n.Region, n.Server, n.Address
	}
	s.rec.Record(e)
}

// clientAddr is the STB's address: the TCP peer, or, when the peer is a
// trusted proxy, the right-most X-Forwarded-For entry that is not itself a
// trusted proxy. Entries left of that one could have been written by the
// client, so they are never believed. An unparsable entry stops the walk at
// the last address that could be verified.
func (s *Server) clientAddr(r *http.Request) netip.Addr {
	peer := parseHostPort(r.RemoteAddr)
	if len(s.trusted) == 0 || !s.isTrusted(peer) {
		return peer
	}
	client := peer
	xff := r.Header["X-Forwarded-For"]
	for i := len(xff) - 1; i >= 0; i-- {
		v := xff[i]
		for v != "" {
			var item string
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				item, v = v[j+1:], v[:j]
			} else {
				item, v = v, ""
			}
			item = trimOWS(item)
			if item == "" {
				continue // "a,,b" or a trailing comma
			}
			a := parseHostPort(item)
			if !a.IsValid() {
				return client
			}
			client = a
			if !s.isTrusted(a) {
				return client
			}
		}
	}
	return client // every hop trusted: the left-most
}

func (s *Server) isTrusted(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range s.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHostPort parses "ip", "ip:port", "[ipv6]" or "[ipv6]:port"; the
// zero Addr if it is none of them. IPv4-mapped IPv6 is unmapped so that
// IPv4 zone and proxy prefixes match on dual-stack listeners.
func parseHostPort(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap()
	}
	return netip.Addr{}
}

func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// validHost accepts what can name a service or an address: letters, digits,
// '-', '.', '_', and ':' '[' ']' for ports and IPv6 literals. net/http's
// server already rejects most garbage; this covers handlers reached
// another way and keeps control bytes out of logs.
func validHost(h string) bool {
	if h == "" || len(h) > 300 {
		return false
	}
	for i := 0; i < len(h); i++ {
		b := h[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' ||
			b == '-' || b == '.' || b == '_' || b == ':' || b == '[' || b == ']') {
			return false
		}
	}
	return true
}

// wantsJSON reports whether the client asked for the decision as JSON, by
// ?format=json or an Accept header naming application/json. It parses
// neither the query nor the header fully, so the redirect path stays cheap.
func wantsJSON(r *http.Request) bool {
	if v, ok := queryValue(r.URL.RawQuery, "format"); ok && v == "json" {
		return true
	}
	for _, v := range r.Header["Accept"] {
		if containsFold(v, "application/json") {
			return true
		}
	}
	return false
}

// queryValue returns the raw value of the first name=value pair of a raw
// query, without parsing (and allocating for) the rest of it.
func queryValue(q, name string) (string, bool) {
	for q != "" {
		var kv string
		if i := strings.IndexByte(q, '&'); i >= 0 {
			kv, q = q[:i], q[i+1:]
		} else {
			kv, q = q, ""
		}
		if len(kv) > len(name) && kv[len(name)] == '=' && kv[:len(name)] == name {
			return kv[len(name)+1:], true
		}
	}
	return "", false
}

// TokenParam is the query parameter that carries the viewer token (the
// Authorization: Bearer header works too).
const TokenParam = steer.TokenParam

// viewerToken returns the viewer token of a request: ?token=..., else an
// "Authorization: Bearer ..." header; "" when there is none. JWTs are
// base64url and dots, so the raw query value needs no unescaping.
func viewerToken(r *http.Request) string {
	if v, ok := queryValue(r.URL.RawQuery, TokenParam); ok {
		return v
	}
	if v := r.Header["Authorization"]; len(v) > 0 && len(v[0]) > 7 && strings.EqualFold(v[0][:7], "Bearer ") {
		return trimOWS(v[0][7:])
	}
	return ""
}

// containsFold reports whether s contains the lowercase ASCII string sub,
// ignoring ASCII case in s. (Media types are case-insensitive.)
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for ; j < len(sub); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				break
			}
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
