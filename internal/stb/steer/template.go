package steer

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/province/topology"
)

// TokenParam is the query parameter the viewer token is read from (the
// HTTP front end reads it; {query} never copies it to the edge).
const TokenParam = "token"

// Reasons a request path is refused (400), static so the check does not
// allocate.
const (
	ReasonDotSegment   = "request path has a . or .. segment"
	ReasonPathEscape   = "request path has a backslash or an encoded slash"
	ReasonPathControl  = "request path has a control byte"
	ReasonPathEncoding = "request path has a malformed percent-escape"
)

// PathReason says why an escaped request path must be refused, or "" when
// it may be answered. A piece of the path becomes {channel} (the first
// segment, or what the service's channel pattern finds), a session key
// and, rendered into the edge URL, part of a path the edge resolves:
// dot segments ("." and "..", also percent-encoded), backslashes, encoded
// slashes and control bytes would let an STB step outside the channel.
func PathReason(path string) string {
	seg, dots, other := 0, 0, false // bytes in the current segment; dots among them
	for i := 0; i <= len(path); i++ {
		if i == len(path) || path[i] == '/' {
			if seg > 0 && seg == dots && !other && dots <= 2 {
				return ReasonDotSegment
			}
			seg, dots, other = 0, 0, false
			continue
		}
		c := path[i]
		if c == '%' {
			if i+2 >= len(path) || unhex(path[i+1]) < 0 || unhex(path[i+2]) < 0 {
				return ReasonPathEncoding
			}
			c = byte(unhex(path[i+1])<<4 | unhex(path[i+2]))
			i += 2
			if c == '/' {
				return ReasonPathEscape
			}
		}
		switch {
		case c == '\\':
			return ReasonPathEscape
		case c < 0x20 || c == 0x7f:
			return ReasonPathControl
		case c == '.':
			dots++
		default:
			other = true
		}
		seg++
	}
	return ""
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// queryParts finds, per service, the first template part after the
// literal that holds the URL's '?' (len(template) when none does).
func queryParts(snap *topology.Snapshot) []int {
	out := make([]int, len(snap.Services))
	for i, sv := range snap.Services {
		out[i] = queryPart(sv.Template)
	}
	return out
}

// queryPart is the first part of tpl after the literal holding its '?'
// (len(tpl) when none does).
func queryPart(tpl topology.Template) int {
	for k, part := range tpl {
		if part.Field == topology.Literal && strings.IndexByte(part.Text, '?') >= 0 {
			return k + 1
		}
	}
	return len(tpl)
}

// stripList is the parameters {query} leaves out: TokenParam and extra.
func stripList(extra []string) []string {
	out := []string{TokenParam}
	for _, p := range extra {
		if p != "" && !slices.ContainsFunc(out, func(q string) bool { return strings.EqualFold(p, q) }) {
			out = append(out, p)
		}
	}
	return out
}

// AppendLocation appends the redirect URL of decision d for a request path
// and raw query to dst, rendering the service's template as compiled with
// the topology (topology.Placeholder says what each placeholder stands
// for; {channel} is Engine.Channel). {channel}, {path} and {query} are
// copied escaped (appendEscaped), so the Location holds no quote, angle
// bracket, space, control byte or non-ASCII byte whatever the STB sent;
// {query} leaves out the viewer token and the configured parameters (the
// edge checks its own tokens, and a credential for the scheduler must not
// reach edge logs).
//
// A BLACKOUT is sent to its rule's slate URL and a BYPASS to the service's
// bypass URL, rendered the same way ({region}: the client's region).
func (e *Engine) AppendLocation(dst []byte, d *Decision, path, query string) []byte {
	if d.Service < 0 {
		return dst
	}
	sv := &e.snap.Services[d.Service]
	switch {
	case d.Result == ResultBlackout:
		if r := e.Rule(d); r != nil && r.Slate != nil {
			return e.appendTemplate(dst, r.Slate.Template, queryPart(r.Slate.Template), d, nil, netip.AddrPort{}, path, query)
		}
		return dst
	case d.Result == ResultBypass:
		if sv.Bypass != nil {
			return e.appendTemplate(dst, sv.Bypass.Template, queryPart(sv.Bypass.Template), d, nil, netip.AddrPort{}, path, query)
		}
		return dst
	case d.Server < 0:
		return dst
	}
	addr, _, _, _ := e.Addr(d)
	return e.appendTemplate(dst, sv.Template, e.queryPart[d.Service], d, &e.snap.Servers[d.Server], addr, path, query)
}

// appendTemplate renders tpl for d (qp: its first part after the '?');
// srv is nil for a template without server placeholders, whose {region}
// is then the client's; addr is the address of srv the client is given
// (of its family), an IPv6 one bracketed in {server} and {host}.
func (e *Engine) appendTemplate(dst []byte, tpl topology.Template, qp int, d *Decision, srv *topology.ServerView, addr netip.AddrPort, path, query string) []byte {
	// After the template's '?', {channel} and {path} are query values: there
	// '&', '=', '+' and '?' are escaped too, so a path cannot add parameters.
	class := uint8(pathSafe)
	for k, part := range tpl {
		if k == qp {
			class = valueSafe
		}
		switch part.Field {
		case topology.Literal:
			dst = append(dst, part.Text...)
		case topology.PlaceServer:
			dst = addr.AppendTo(dst)
		case topology.PlaceHost:
			if addr.Addr().Is6() {
				dst = append(dst, '[')
				dst = addr.Addr().AppendTo(dst)
				dst = append(dst, ']')
			} else {
				dst = addr.Addr().AppendTo(dst)
			}
		case topology.PlacePort:
			dst = strconv.AppendUint(dst, uint64(addr.Port()), 10)
		case topology.PlaceChannel:
			dst = appendEscaped(dst, e.Channel(d.Service, path, query), class)
		case topology.PlacePath:
			dst = appendEscaped(dst, strings.TrimPrefix(path, "/"), class)
		case topology.PlaceQuery:
			dst = AppendQuery(dst, query, e.strip)
		case topology.PlaceBitrate:
			dst = strconv.AppendInt(dst, int64(d.BitrateKbps), 10)
		case topology.PlaceService:
			dst = append(dst, e.snap.Services[d.Service].Name...)
		case topology.PlaceRegion:
			if srv != nil {
				dst = append(dst, e.snap.Regions[srv.Region].Name...)
			} else if d.ClientRegion >= 0 {
				dst = append(dst, e.snap.Regions[d.ClientRegion].Name...)
			}
		}
	}
	return dst
}

// Byte classes of RFC 3986 copied as they are; everything else (and a '%'
// not starting a valid escape) is percent-encoded.
const (
	pathSafe  = 1 << iota // pchar and '/': unreserved, sub-delims, ':', '@'
	querySafe             // query bytes inside one key=value: pchar, '/', '?', without '&'
	valueSafe             // a path copied into a query: querySafe without '=', '+', '?'
)

var safe = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9',
			strings.IndexByte("-._~!$'()*,;:@/", b) >= 0:
			t[c] = pathSafe | querySafe | valueSafe
		case b == '+' || b == '=':
			t[c] = pathSafe | querySafe
		case b == '&':
			t[c] = pathSafe
		case b == '?':
			t[c] = querySafe
		}
	}
	return t
}()

const hexDigits = "0123456789ABCDEF"

// appendEscaped appends s to dst, keeping bytes of class and valid
// percent-escapes as they are and percent-encoding every other byte.
func appendEscaped(dst []byte, s string, class uint8) []byte {
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && safe[s[j]]&class != 0 {
			j++
		}
		dst = append(dst, s[i:j]...) // runs of clean bytes at once
		if j == len(s) {
			break
		}
		if c := s[j]; c == '%' && j+2 < len(s) && unhex(s[j+1]) >= 0 && unhex(s[j+2]) >= 0 {
			dst = append(dst, s[j:j+3]...)
			i = j + 3
		} else {
			dst = append(dst, '%', hexDigits[c>>4], hexDigits[c&15])
			i = j + 1
		}
	}
	return dst
}

// AppendQuery appends the raw query q to dst without the parameters named in
// strip (matched on the percent-decoded name, ignoring ASCII case, so
// "TOKEN" or "tok%65n" do not slip through) and without empty pairs, each
// pair escaped as appendEscaped does. It does not allocate.
func AppendQuery(dst []byte, q string, strip []string) []byte {
	first := true
	for q != "" {
		var kv string
		if i := strings.IndexByte(q, '&'); i >= 0 {
			kv, q = q[:i], q[i+1:]
		} else {
			kv, q = q, ""
		}
		if kv == "" {
			continue
		}
		key := kv
		if i := strings.IndexByte(kv, '='); i >= 0 {
			key = kv[:i]
		}
		if stripped(key, strip) {
			continue
		}
		if !first {
			dst = append(dst, '&')
		}
		first = false
		dst = appendEscaped(dst, kv, querySafe)
	}
	return dst
}

func stripped(key string, strip []string) bool {
	for _, name := range strip {
		if nameIs(key, name) {
			return true
		}
	}
	return false
}

// nameIs reports whether the raw (escaped) query key decodes to name,
// ignoring ASCII case.
func nameIs(key, name string) bool {
	if len(key) < len(name) || len(key) > 3*len(name) { // each byte spelled as itself or %XX
		return false
	}
	j := 0
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c == '%' && i+2 < len(key) && unhex(key[i+1]) >= 0 && unhex(key[i+2]) >= 0 {
			c = byte(unhex(key[i+1])<<4 | unhex(key[i+2]))
			i += 2
		}
		if j >= len(name) || lower(c) != lower(name[j]) {
			return false
		}
		j++
	}
	return j == len(name)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// Names resolves a decision's indices for logs and JSON answers.
type Names struct {
	Service, Zone, ClientRegion, Region, Node, Server, Address string
}

// Names returns the names behind d's indices ("" for none).
func (e *Engine) Names(d *Decision) Names {
	s := e.snap
	var n Names
	if d.Service >= 0 {
		n.Service = s.Services[d.Service].Name
	}
	if d.Zone >= 0 {
		n.Zone = s.Zones[d.Zone].Name
	}
	if d.ClientRegion >= 0 {
		n.ClientRegion = s.Regions[d.ClientRegion].Name
	}
	if d.Region >= 0 {
		n.Region = s.Regions[d.Region].Name
	}
	if d.Node >= 0 {
		n.Node = s.Nodes[d.Node].Name
	}
	if d.Server >= 0 {
		n.Server = s.Servers[d.Server].Name
		_, n.Address, _, _ = e.Addr(d)
	}
	return n
}
