package httpd

import "bytes"

// The fast path parses only the plain form of HTTP/1.x that STBs send: a
// request line "METHOD SP /origin-form SP HTTP/1.1|HTTP/1.0", CRLF line
// ends, "Name: value" headers, one Host, no Transfer-Encoding or Expect.
// Everything else is "other": the connection is handed, with the bytes it
// holds, to net/http's server, so that rare but valid forms (absolute-form
// targets, bare LF line ends, obs-fold, Expect, chunked bodies...) and
// malformed ones get exactly net/http's answer. Within the plain form the
// parser must agree with net/http on every field the handler core reads,
// which FuzzDifferential checks.

// parseResult is what parse found at the start of a buffer.
type parseResult int

const (
	parseMore  parseResult = iota // no complete header block yet
	parseOK                       // one plain request, parsed
	parseOther                    // not the plain form: hand to net/http
)

// span is a byte range [from, to) of the read buffer.
type span struct{ from, to int32 }

// parsed is one plain request, as spans of the buffer parse was given.
type parsed struct {
	method, target, path, query span
	http10                      bool
	host                        span
	auth                        span // first Authorization value
	hasAuth                     bool
	debug                       bool // DebugHeader present
	conn1                       span // first Connection value
	hasConn                     bool
	connClose, connKeepAlive    bool  // a Connection value lists the token
	contentLength               int64 // 0 without the header
	xff, accept                 []span
	end                         int // bytes of the request (header block)
}

// reset clears p for the next request, keeping its slices' storage.
func (p *parsed) reset() {
	xff, accept := p.xff[:0], p.accept[:0]
	*p = parsed{xff: xff, accept: accept}
}

// parse parses the request at the start of b into p.
func parse(b []byte, p *parsed) parseResult {
	p.reset()
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return parseMore
	}
	if nl == 0 || b[nl-1] != '\r' {
		return parseOther
	}
	if !parseRequestLine(b[:nl-1], p) {
		return parseOther
	}
	pos := nl + 1
	hosts, lengths := 0, 0
	for {
		n := bytes.IndexByte(b[pos:], '\n')
		if n < 0 {
			return parseMore
		}
		if n == 0 || b[pos+n-1] != '\r' {
			return parseOther
		}
		from, to := pos, pos+n-1 // the line without CRLF
		pos += n + 1
		if from == to {
			break // the blank line ending the header block
		}
		// The name: a token right up to the colon (no obs-fold, no space
		// before the colon; net/http's tolerance for those is left to it).
		i := from
		for i < to && tchar(b[i]) {
			i++
		}
		if i == from || i == to || b[i] != ':' {
			return parseOther
		}
		name := b[from:i]
		vf, vt := i+1, to
		for j := vf; j < vt; j++ {
			if c := b[j]; c < ' ' && c != '\t' || c == 0x7f {
				return parseOther
			}
		}
		for vf < vt && (b[vf] == ' ' || b[vf] == '\t') {
			vf++
		}
		for vt > vf && (b[vt-1] == ' ' || b[vt-1] == '\t') {
			vt--
		}
		v := span{int32(vf), int32(vt)}
		switch len(name) {
		case 4:
			if equalFold(name, "host") {
				if hosts++; hosts > 1 {
					return parseOther
				}
				p.host = v
			}
		case 6:
			if equalFold(name, "accept") {
				p.accept = append(p.accept, v)
			} else if equalFold(name, "expect") {
				return parseOther
			}
		case 10:
			if equalFold(name, "connection") {
				val := b[vf:vt]
				if !p.hasConn {
					p.hasConn, p.conn1 = true, v
				}
				p.connClose = p.connClose || valueHasToken(val, "close")
				p.connKeepAlive = p.connKeepAlive || valueHasToken(val, "keep-alive")
			}
		case 13:
			if equalFold(name, "authorization") && !p.hasAuth {
				p.hasAuth, p.auth = true, v
			}
		case 14:
			if equalFold(name, "content-length") {
				if lengths++; lengths > 1 {
					return parseOther
				}
				n, ok := parseLength(b[vf:vt])
				if !ok {
					return parseOther
				}
				p.contentLength = n
			}
		case 15:
			if equalFold(name, "x-forwarded-for") {
				p.xff = append(p.xff, v)
			}
		case 16:
			if equalFold(name, DebugHeader) {
				p.debug = true
			}
		case 17:
			if equalFold(name, "transfer-encoding") {
				return parseOther
			}
		}
	}
	if hosts != 1 || !validHostBytes(b[p.host.from:p.host.to]) {
		return parseOther
	}
	p.end = pos
	return parseOK
}

// parseRequestLine reads "METHOD SP target SP version" (net/http splits at
// the first two spaces too), accepting an origin-form target whose path
// net/http would hand to the handler unchanged (URL.EscapedPath is the
// path as sent) and HTTP/1.1 or HTTP/1.0.
func parseRequestLine(line []byte, p *parsed) bool {
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 {
		return false
	}
	for _, c := range line[:sp] {
		if !tchar(c) {
			return false
		}
	}
	p.method = span{0, int32(sp)}
	rest := line[sp+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 <= 0 {
		return false
	}
	switch string(rest[sp2+1:]) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		p.http10 = true
	default:
		return false
	}
	t := rest[:sp2]
	if t[0] != '/' {
		return false
	}
	base := int32(sp + 1)
	p.target = span{base, base + int32(sp2)}
	i := 0
	for ; i < len(t); i++ {
		c := t[i]
		if c == '?' {
			break
		}
		if c == '%' {
			if i+2 >= len(t) || !ishex(t[i+1]) || !ishex(t[i+2]) {
				return false
			}
			i += 2
			continue
		}
		if !pathByte(c) {
			return false
		}
	}
	p.path = span{base, base + int32(i)}
	if i < len(t) {
		for _, c := range t[i+1:] {
			if c < 0x21 || c > 0x7e {
				return false
			}
		}
		p.query = span{base + int32(i) + 1, base + int32(len(t))}
	} else {
		p.query = span{base + int32(i), base + int32(i)}
	}
	return true
}

// parseLength parses a Content-Length value as net/http does for one
// header: decimal digits only.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// tchar reports whether c may appear in a token (RFC 9110): method and
// header names.
func tchar(c byte) bool {
	return tcharTable[c]
}

var tcharTable = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// pathByte reports whether c stands for itself in a path net/http hands on
// unchanged: unreserved, sub-delims, ':' '@' '/' and the brackets that
// url.URL.EscapedPath keeps ('%' escapes are checked apart).
func pathByte(c byte) bool { return pathTable[c] }

var pathTable = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "-._~!$&'()*+,;=:@/[]" {
		t[c] = true
	}
	return t
}()

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// validHostBytes is validHost on bytes.
func validHostBytes(h []byte) bool {
	if len(h) == 0 || len(h) > maxHostLen {
		return false
	}
	for _, c := range h {
		if !hostByte(c) {
			return false
		}
	}
	return true
}

// equalFold reports whether b equals the ASCII string s ignoring case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// valueHasToken is net/http's httpguts.headerValueContainsToken: token is
// one of v's comma-separated elements (OWS trimmed), ignoring ASCII case.
func valueHasToken(v []byte, token string) bool {
	for {
		comma := bytes.IndexByte(v, ',')
		el := v
		if comma >= 0 {
			el = v[:comma]
		}
		for len(el) > 0 && (el[0] == ' ' || el[0] == '\t') {
			el = el[1:]
		}
		for len(el) > 0 && (el[len(el)-1] == ' ' || el[len(el)-1] == '\t') {
			el = el[:len(el)-1]
		}
		if equalFold(el, token) {
			return true
		}
		if comma < 0 {
			return false
		}
		v = v[comma+1:]
	}
}

// hasToken is net/http's hasToken (on the first value of a header): token
// appears delimited by space, tab, comma or the ends, ignoring ASCII case.
func hasToken(v []byte, token string) bool {
	if len(token) > len(v) || token == "" {
		return false
	}
	for sp := 0; sp <= len(v)-len(token); sp++ {
		if b := v[sp]; b != token[0] && b|0x20 != token[0] {
			continue
		}
		if sp > 0 && !tokenBoundary(v[sp-1]) {
			continue
		}
		if end := sp + len(token); end != len(v) && !tokenBoundary(v[end]) {
			continue
		}
		if equalFold(v[sp:sp+len(token)], token) {
			return true
		}
	}
	return false
}

func tokenBoundary(b byte) bool { return b == ' ' || b == ',' || b == '\t' }
