package httpd

import (
	"net/http"
	"net/netip"
	"strings"
	"time"
	"unsafe"
)

// session is the fast path's protocol state of one connection, apart from
// its I/O so that it can be driven (and benchmarked) on byte slices.
type session struct {
	s    *Server
	peer netip.Addr
	p    parsed
	req  stbRequest
	a    answer
	xff  []string // storage for req.xff and req.accept, reused
	acc  []string
	// afterPOST: the previous request was a POST, after which net/http
	// skips up to four stray CR or LF bytes (RFC 9112 section 2.2).
	afterPOST bool
	served    bool // a request was answered
}

// verdict is what the connection does after process.
type verdict int

const (
	vContinue verdict = iota // read more (any unconsumed bytes are a partial request)
	vClose                   // write out and close
	vHandoff                 // write out, then hand the unconsumed bytes to net/http
)

// process answers the complete plain requests at the start of in,
// appending the answers to *out, and returns how many bytes it consumed
// and what the connection does next. full says in fills the read buffer:
// a header block that does not complete within it is refused with 431.
// closing asks every answer to close the connection (shutdown).
func (ss *session) process(in []byte, out *[]byte, scratch *[]byte, ar *arena, full, closing bool) (int, verdict) {
	off := 0
	for off < len(in) {
		// net/http peeks 4 bytes between requests, then, after a POST,
		// discards the CR/LF among them: the CR/LF stay in the buffer
		// (and count towards the 4) until a request follows them.
		mark, stripped := off, ss.afterPOST
		if ss.afterPOST {
			off += strayCRLF(in[off:])
			if off == len(in) {
				return mark, vContinue
			}
		}
		b := in[off:]
		switch parse(b, &ss.p) {
		case parseMore:
			if full && mark == 0 {
				*out = append(*out, errTooLarge...)
				return len(in), vClose
			}
			return mark, vContinue
		case parseOther:
			if ss.served && len(in)-mark < 4 {
				return mark, vContinue // net/http waits for 4 bytes between requests
			}
			if stripped && len(b) < 4 {
				// net/http has its 4 bytes only with the CR/LF: hand them
				// over too, so that it reads on instead of waiting.
				return mark, vHandoff
			}
			return off, vHandoff
		}
		ss.afterPOST = false
		start := time.Now()
		ss.request(b, ar)
		*scratch = ss.s.decide(&ss.req, &ss.a, (*scratch)[:0], start)
		var closeAfter bool
		*out, closeAfter = ss.s.appendAnswer(*out, &ss.a, &ss.p, b, start, closing)
		ss.s.finish(&ss.a)
		off += ss.p.end
		ss.served = true
		ss.afterPOST = ss.req.method == http.MethodPost
		if closeAfter || ss.a.close {
			return off, vClose
		}
	}
	return off, vContinue
}

// atEOF is what of rest (bytes left unanswered when the peer closed)
// net/http would still read a request from; nil: it would close without
// an answer. Between requests net/http waits for 4 bytes and gives up on
// fewer; after a POST it then drops up to 4 leading CR or LF.
func (ss *session) atEOF(rest []byte) []byte {
	if !ss.served {
		return rest
	}
	if len(rest) < 4 {
		return nil
	}
	if ss.afterPOST {
		rest = rest[strayCRLF(rest):]
	}
	return rest
}

// strayCRLF counts the CR or LF bytes net/http drops after a POST: up to
// 4 at the start of b (RFC 9112 section 2.2).
func strayCRLF(b []byte) int {
	n := 0
	for n < 4 && n < len(b) && (b[n] == '\r' || b[n] == '\n') {
		n++
	}
	return n
}

// request fills ss.req from the parsed request in b. Strings the access
// log or the allocator may keep (host, path; query and token when an
// allocator is set) are copies; the rest point into b and are used only
// while the request is answered.
func (ss *session) request(b []byte, ar *arena) {
	p := &ss.p
	r := &ss.req
	*r = stbRequest{peer: ss.peer, debug: p.debug, hasBody: p.contentLength > 0}
	switch m := b[p.method.from:p.method.to]; string(m) {
	case http.MethodGet:
		r.method = http.MethodGet
	case http.MethodHead:
		r.method = http.MethodHead
	default:
		r.method = view(m)
	}
	r.uriLen = int(p.target.to - p.target.from)
	if ss.s.cfg.Allocator != nil { // the allocator keeps its strings
		r.path = string(b[p.path.from:p.path.to])
		r.host = string(b[p.host.from:p.host.to])
		r.query = string(b[p.query.from:p.query.to])
		if p.hasAuth {
			r.auth = string(b[p.auth.from:p.auth.to])
		}
	} else {
		r.path = ar.str(b[p.path.from:p.path.to])
		r.host = ar.str(b[p.host.from:p.host.to])
		r.query = view(b[p.query.from:p.query.to])
		if p.hasAuth {
			r.auth = view(b[p.auth.from:p.auth.to])
		}
	}
	ss.xff = ss.xff[:0]
	for _, v := range p.xff {
		ss.xff = append(ss.xff, view(b[v.from:v.to]))
	}
	ss.acc = ss.acc[:0]
	for _, v := range p.accept {
		ss.acc = append(ss.acc, view(b[v.from:v.to]))
	}
	if len(ss.xff) > 0 {
		r.xff = ss.xff
	}
	if len(ss.acc) > 0 {
		r.accept = ss.acc
	}
}

// view is b as a string without a copy: valid only while b is unchanged.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// arena hands out strings copied into large shared chunks, so that the
// strings a request must keep (the access log holds host and path until
// it writes them) cost no allocation of their own. A chunk is never
// written again where a string points, and the garbage collector frees
// it once no string does.
type arena struct{ b []byte }

const arenaChunk = 16 << 10

func (a *arena) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > cap(a.b)-len(a.b) {
		if len(b) > arenaChunk/8 {
			return string(b)
		}
		a.b = make([]byte, 0, arenaChunk)
	}
	n := len(a.b)
	a.b = append(a.b, b...)
	return unsafe.String(&a.b[n], len(b))
}

// errTooLarge is net/http's answer to a header block beyond the limit,
// byte for byte.
const errTooLarge = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large"

// appendAnswer writes a as net/http would for the request p (in b): the
// handler's headers sorted by name, then Date, Content-Length and
// Connection, with net/http's keep-alive rules. It returns whether the
// connection closes after it.
func (s *Server) appendAnswer(out []byte, a *answer, p *parsed, b []byte, now time.Time, closing bool) ([]byte, bool) {
	head := string(b[p.method.from:p.method.to]) == http.MethodHead
	var conn1 []byte
	if p.hasConn {
		conn1 = b[p.conn1.from:p.conn1.to]
	}
	// net/http's Request.Close, wantsHttp10KeepAlive and wantsClose.
	reqClose := p.connClose
	if p.http10 {
		reqClose = p.connClose || !p.connKeepAlive
	}
	wants10KA := p.http10 && hasToken(conn1, "keep-alive")
	wantsClose := reqClose || hasToken(conn1, "close")
	handlerConn := a.close // the handler's own "Connection: close"
	extraConn := ""
	closeAfter := false
	if wants10KA {
		// Every answer has a Content-Length (or is to a HEAD).
		if !handlerConn {
			extraConn = "keep-alive"
		}
	} else if p.http10 || wantsClose {
		closeAfter = true
	}
	if handlerConn || closing {
		closeAfter = true
	}
	// net/http replaces the Connection header on closing unless the
	// handler's already says close (and keep-alives are on).
	if closeAfter && (closing || !handlerConn) {
		handlerConn = false
		if !p.http10 {
			extraConn = "close"
		}
	}

	if p.http10 {
		out = append(out, "HTTP/1.0 "...)
	} else {
		out = append(out, "HTTP/1.1 "...)
	}
	out = appendInt(out, a.status)
	out = append(out, ' ')
	out = append(out, http.StatusText(a.status)...)
	out = append(out, "\r\n"...)
	if a.cors {
		out = append(out, "Access-Control-Allow-Origin: *\r\n"...)
	}
	if a.allow {
		out = append(out, "Allow: GET, HEAD\r\n"...)
	}
	out = append(out, "Cache-Control: no-store\r\n"...)
	if handlerConn {
		out = append(out, "Connection: close\r\n"...)
	}
	switch a.ctype {
	case ctypeText:
		out = append(out, "Content-Type: text/plain; charset=utf-8\r\n"...)
	case ctypeJSON:
		out = append(out, "Content-Type: application/json\r\n"...)
	}
	if a.status == http.StatusFound {
		out = append(out, "Location: "...)
		out = append(out, a.location...)
		out = append(out, "\r\n"...)
		if a.alternates != nil {
			out = append(out, AlternatesHeader+": "...)
			out = append(out, a.alternates...)
			out = append(out, "\r\n"...)
		}
	}
	if a.retry {
		out = append(out, "Retry-After: "+retryAfter+"\r\n"...)
	}
	if a.debug {
		out = append(out, "Server-Timing: "...)
		out = appendTiming(out, a.decision)
		out = append(out, "\r\n"...)
		if a.hasRate {
			out = append(out, "X-Anysched-Bitrate: "...)
			out = appendInt(out, a.bitrate)
			out = append(out, "\r\n"...)
		}
	}
	out = append(out, s.instanceLine...)
	if a.debug {
		out = append(out, "X-Anysched-Result: "...)
		out = append(out, a.result.String()...)
		out = append(out, "\r\n"...)
	}
	if a.noSniff {
		out = append(out, "X-Content-Type-Options: nosniff\r\n"...)
	}
	out = append(out, "Date: "...)
	out = s.dates.append(out, now)
	out = append(out, "\r\n"...)
	if !head && a.status != http.StatusNoContent { // net/http sends none with a 204
		out = append(out, "Content-Length: "...)
		out = appendInt(out, len(a.body))
		out = append(out, "\r\n"...)
	}
	if extraConn != "" {
		out = append(out, "Connection: "...)
		out = append(out, extraConn...)
		out = append(out, "\r\n"...)
	}
	out = append(out, "\r\n"...)
	if !head {
		out = append(out, a.body...)
	}
	return out, closeAfter
}

func appendInt(b []byte, n int) []byte {
	if n >= 0 && n < 10 {
		return append(b, byte('0'+n))
	}
	var d [20]byte
	i := len(d)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		d[i] = '-'
	}
	return append(b, d[i:]...)
}

// instanceHeaderLine is the X-Anysched-Instance header line of id, with
// the value cleaned as net/http's Header.Write does.
func instanceHeaderLine(id string) []byte {
	v := strings.NewReplacer("\n", " ", "\r", " ").Replace(id)
	v = strings.Trim(v, " \t\n\r")
	return []byte(instanceKey + ": " + v + "\r\n")
}
