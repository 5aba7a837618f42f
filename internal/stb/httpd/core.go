package httpd

import (
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/steer"
)

// stbRequest is what the handler core reads of a request. The net/http
// adapter fills it from an *http.Request, the fast path from the bytes it
// parsed; the core alone decides and builds the answer, so the two paths
// cannot drift apart.
type stbRequest struct {
	method string
	// uriLen is the longer of the request target and its unescaped path.
	uriLen int
	// path is the path as the STB sent it (still escaped), "" for an
	// absolute-form target without one; noURL: the target did not parse.
	path  string
	noURL bool
	query string
	host  string
	peer  netip.Addr // the TCP peer
	// Header values, in the order received (nil when absent).
	xff    []string
	accept []string
	auth   string // the first Authorization value
	debug  bool   // DebugHeader present
	// hasBody: Content-Length > 0 or a chunked body. STB requests carry none;
	// one is refused and the connection closed rather than read.
	hasBody bool
}

// Content types of an answer.
const (
	ctypeNone = iota
	ctypeText
	ctypeJSON
)

// answer is the core's response, written out by either path.
type answer struct {
	status  int
	ctype   int
	allow   bool // Allow: GET, HEAD (405)
	retry   bool // Retry-After (503)
	noSniff bool // X-Content-Type-Options: nosniff (text answers)
	cors    bool // Access-Control-Allow-Origin: * (steering manifests)
	close   bool // Connection: close (a request body was refused)
	// location is the 302 target, body the answer's body (nil for HEAD);
	// both may point into the caller's scratch buffer.
	location []byte
	body     []byte
	// alternates is the X-Anysched-Alternates value of a 302 (services
	// with alternates_header), nil without.
	alternates []byte
	// Debug headers (DebugHeader): the result, the bitrate (when a server
	// was chosen) and the decision time.
	debug    bool
	result   steer.Result
	bitrate  int
	hasRate  bool
	decision time.Duration
	// entry is handed to the access log once the answer is written
	// (record false: not a decision, nothing is recorded).
	record bool
	entry  accesslog.Entry
}

// AlivePath is answered 204, with nothing recorded: the scheduler's
// watchdog asks for it through the same listener, accept loop and handler
// as an STB's request, so that an answer shows the serving path works.
const AlivePath = "/.well-known/anysched-alive"

// Bodies of the fixed answers.
const (
	bodyMethod   = "method not allowed\n"
	bodyTarget   = "bad request target\n"
	bodyURI      = "request URI too long\n"
	bodyHost     = "missing or malformed Host\n"
	bodyNoSnap   = "no topology snapshot loaded yet"
	bodyMiss     = "hostname belongs to no service\n"
	bodyBodyRefd = "request body not accepted\n"
)

// decide answers one STB request into a. scratch is a buffer the answer's
// location and body may be rendered into; the (possibly grown) buffer is
// returned for reuse. start is when the request was read.
func (s *Server) decide(r *stbRequest, a *answer, scratch []byte, start time.Time) []byte {
	*a = answer{}
	head := r.method == http.MethodHead
	text := func(status int, body string) {
		a.status, a.ctype, a.noSniff = status, ctypeText, true
		if !head {
			scratch = append(scratch[:0], body...)
			a.body = scratch
		}
	}
	switch r.method {
	case http.MethodGet, http.MethodHead:
	default:
		a.allow = true
		text(http.StatusMethodNotAllowed, bodyMethod)
		a.close = r.hasBody
		return scratch
	}
	if r.hasBody {
		text(http.StatusRequestEntityTooLarge, bodyBodyRefd)
		a.close = true
		return scratch
	}
	if r.noURL {
		text(http.StatusBadRequest, bodyTarget)
		return scratch
	}
	if r.uriLen > MaxURILength {
		text(http.StatusRequestURITooLong, bodyURI)
		return scratch
	}
	path := r.path
	if path == "" {
		path = "/" // absolute form without a path: http://host
	}
	if path[0] != '/' { // "*" or another non-path target
		text(http.StatusBadRequest, bodyTarget)
		return scratch
	}
	if reason := steer.PathReason(path); reason != "" { // dot segments and the like
		a.status, a.ctype, a.noSniff = http.StatusBadRequest, ctypeText, true
		if !head {
			scratch = append(append(scratch[:0], reason...), '\n')
			a.body = scratch
		}
		return scratch
	}
	if path == AlivePath { // the watchdog's probe: an answer, not a decision
		a.status = http.StatusNoContent
		return scratch
	}
	if !validHost(r.host) {
		text(http.StatusBadRequest, bodyHost)
		return scratch
	}
	client := s.clientAddr(r)
	if isSteering(path) {
		return s.steering(r, a, scratch, start, client, path)
	}
	asJSON := wantsJSON(r)
	a.record = true
	a.entry = accesslog.Entry{Time: start, Proto: "http", Client: client, Host: r.host, Path: path}

	eng := s.engine()
	if eng == nil {
		a.entry.Latency = time.Since(start)
		a.entry.Result, a.entry.Status = steer.ResultError, http.StatusServiceUnavailable
		a.retry = true
		if asJSON {
			s.jsonAnswer(a, head, http.StatusServiceUnavailable, &Answer{Result: steer.ResultError.String(), Reason: bodyNoSnap, Client: addrString(client), Host: r.host, Instance: s.cfg.InstanceID})
		} else {
			text(http.StatusServiceUnavailable, bodyNoSnap+"\n")
		}
		return scratch
	}

	// The family of the STB's own address (the peer's, or a trusted
	// proxy's X-Forwarded-For) is the family of the edge address it gets.
	req := steer.Request{Client: client, Host: r.host, Path: path, Query: r.query, Now: start, Family: steer.FamilyOf(client)}
	a.entry.Family = req.Family
	d := eng.Decide(req)
	if s.cfg.Allocator != nil {
		// A copy the interface call may keep, so d stays on the stack
		// (and the redirect path free of allocations) without one.
		dp := new(steer.Decision)
		*dp = d
		err := s.cfg.Allocator.Allocate(eng, dp, req, viewerToken(r))
		d = *dp
		if err != nil {
			a.entry.Latency = time.Since(start)
			names := eng.Names(&d)
			a.entry.Result, a.entry.Status = d.Result, http.StatusForbidden
			setNames(&a.entry, &names)
			if asJSON {
				s.jsonAnswer(a, head, http.StatusForbidden, &Answer{Result: d.Result.String(), Reason: err.Error(), Client: addrString(client), Host: r.host, Service: names.Service, Instance: s.cfg.InstanceID})
			} else {
				a.status, a.ctype, a.noSniff = http.StatusForbidden, ctypeText, true
				if !head {
					scratch = append(append(scratch[:0], err.Error()...), '\n')
					a.body = scratch
				}
			}
			return scratch
		}
	}
	if s.cfg.Observer != nil && d.Server >= 0 && d.Result.Served() {
		s.cfg.Observer.Observe(eng, d, req, start) // by value: pointers would move d and req to the heap
	}
	names := eng.Names(&d)
	buf := scratch[:0]
	var status int
	switch {
	case d.Result.Served(), d.Result.Redirected():
		buf = eng.AppendLocation(buf, &d, path, r.query)
		status = http.StatusFound
		if len(buf) == 0 { // no server behind a success result: never redirect nowhere
			d.Result, d.Reason, status = steer.ResultError, steer.ReasonNoServer, http.StatusServiceUnavailable
		}
	case d.Result == steer.ResultMiss:
		status = http.StatusNotFound
	default:
		status = http.StatusServiceUnavailable
	}
	lat := time.Since(start)
	// On request (DebugHeader), the result type and the decision time
	// (Server-Timing is shown by browsers' and curl's tooling).
	if r.debug {
		a.debug, a.result, a.decision = true, d.Result, lat
		a.bitrate, a.hasRate = d.BitrateKbps, d.Server >= 0
	}
	a.entry.Latency, a.entry.Result = lat, d.Result
	setNames(&a.entry, &names)
	if d.Result.Served() && d.Server >= 0 {
		_, _, a.entry.TargetFamily, _ = eng.Addr(&d)
	}
	setRedirect(&a.entry, eng, &d)

	switch {
	case asJSON:
		an := &Answer{
			Result: d.Result.String(), Reason: d.Reason, Client: addrString(client), Host: r.host,
			Service: names.Service, Zone: names.Zone, ClientRegion: names.ClientRegion, Region: names.Region,
			Node: names.Node, Server: names.Server, Address: names.Address, BitrateKbps: d.BitrateKbps,
			Instance: s.cfg.InstanceID, Rule: a.entry.Rule, Family: req.Family.String(),
		}
		if a.entry.TargetFamily != steer.FamilyAny {
			an.AddressFamily = a.entry.TargetFamily.String()
		}
		if status == http.StatusFound {
			an.Location, status = string(buf), http.StatusOK
			an.Alternates = s.alternates(eng, &d, req, path, r.query)
		}
		a.retry = status == http.StatusServiceUnavailable
		s.jsonAnswer(a, head, status, an)
	case status == http.StatusFound:
		// No body: STBs follow the Location, and the bytes are the cost.
		a.status, a.location = status, buf
		if sv := &eng.Snapshot().Services[d.Service]; sv.AlternatesHeader {
			for i, alt := range s.alternates(eng, &d, req, path, r.query) {
				if i > 0 {
					a.alternates = append(a.alternates, ", "...)
				}
				a.alternates = append(a.alternates, alt.Location...)
			}
		}
	case status == http.StatusNotFound:
		text(status, bodyMiss)
		buf = scratch
	default:
		a.retry = true
		a.status, a.ctype, a.noSniff = status, ctypeText, true
		if !head {
			buf = append(append(buf[:0], d.Reason...), '\n')
			a.body = buf
		}
	}
	a.entry.Status = a.status
	return buf
}

// finish hands a's decision to the access log and metrics. It runs after
// the answer is written.
func (s *Server) finish(a *answer) {
	if a.record && s.rec != nil {
		s.rec.Record(a.entry)
	}
}

func setNames(e *accesslog.Entry, n *steer.Names) {
	e.Zone, e.ClientRegion, e.Region, e.Server, e.Target = n.Zone, n.ClientRegion, n.Region, n.Server, n.Address
}

// setRedirect names d's rights rule in e and, for a BLACKOUT or BYPASS,
// the URL template the STB was sent to (the rendered URL would have to be
// copied for the log).
func setRedirect(e *accesslog.Entry, eng *steer.Engine, d *steer.Decision) {
	if r := eng.Rule(d); r != nil {
		e.Rule = r.Label
		if d.Result == steer.ResultBlackout && r.Slate != nil {
			e.Target = r.Slate.URL
		}
	}
	if d.Result == steer.ResultBypass {
		e.Target = eng.Snapshot().Services[d.Service].Bypass.URL
	}
}

// clientAddr is the STB's address: the TCP peer, or, when the peer is a
// trusted proxy, the right-most X-Forwarded-For entry that is not itself a
// trusted proxy. Entries left of that one could have been written by the
// client, so they are never believed. An unparsable entry stops the walk at
// the last address that could be verified.
func (s *Server) clientAddr(r *stbRequest) netip.Addr {
	peer := r.peer
	if len(s.trusted) == 0 || !s.isTrusted(peer) {
		return peer
	}
	client := peer
	xff := r.xff
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
	// A bare address (what proxies put in X-Forwarded-For) goes straight
	// to ParseAddr: ParseAddrPort would fail on it, and its error
	// allocates.
	if i := strings.LastIndexByte(s, ':'); i < 0 || (s != "" && s[0] != '[' && strings.IndexByte(s[:i], ':') >= 0) {
		if a, err := netip.ParseAddr(s); err == nil {
			return a.Unmap()
		}
		return netip.Addr{}
	}
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
	if h == "" || len(h) > maxHostLen {
		return false
	}
	for i := 0; i < len(h); i++ {
		if !hostByte(h[i]) {
			return false
		}
	}
	return true
}

const maxHostLen = 300

func hostByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' ||
		b == '-' || b == '.' || b == '_' || b == ':' || b == '[' || b == ']'
}

// wantsJSON reports whether the client asked for the decision as JSON, by
// ?format=json or an Accept header naming application/json. It parses
// neither the query nor the header fully, so the redirect path stays cheap.
func wantsJSON(r *stbRequest) bool {
	if v, ok := queryValue(r.query, "format"); ok && v == "json" {
		return true
	}
	for _, v := range r.accept {
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
func viewerToken(r *stbRequest) string {
	if v, ok := queryValue(r.query, TokenParam); ok {
		return v
	}
	if v := r.auth; len(v) > 7 && strings.EqualFold(v[:7], "Bearer ") {
		return trimOWS(v[7:])
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

// DebugHeader in a request asks for X-Anysched-Result and Server-Timing in
// the answer (canonical form, as net/http stores it).
const DebugHeader = "X-Anysched-Debug"

// AlternatesHeader lists, on a 302 of a service with alternates_header, the
// further locations a player may try when the first fails, comma-separated
// in preference order.
const AlternatesHeader = "X-Anysched-Alternates"

// alternates lists the further locations of a service with answers > 1
// (nil otherwise). Off the STB's common path: it allocates.
func (s *Server) alternates(eng *steer.Engine, d *steer.Decision, req steer.Request, path, query string) []Alternate {
	snap := eng.Snapshot()
	n := snap.Services[d.Service].Answers
	if n <= 1 {
		return nil
	}
	var out []Alternate
	for _, si := range eng.Alternates(d, req, n, nil) {
		ad := *d
		sv := &snap.Servers[si]
		ad.Server, ad.Node, ad.Region = si, sv.Node, sv.Region
		names := eng.Names(&ad)
		out = append(out, Alternate{Region: names.Region, Node: names.Node, Server: names.Server, Address: names.Address,
			Location: string(eng.AppendLocation(nil, &ad, path, query))})
	}
	return out
}
