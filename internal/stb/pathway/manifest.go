package pathway

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/steer"
)

// appendManifest writes the steering manifest (draft-pantos-hls-rfc8216bis
// "Content Steering"; DASH-IF's with its own priority key) by hand: the
// answer is a few hundred bytes of fixed shape, and encoding/json would
// allocate per answer.
//
//	{"VERSION":1,"TTL":10,"RELOAD-URI":"...","PATHWAY-PRIORITY":["s2","."],
//	 "PATHWAY-CLONES":[{"BASE-ID":".","ID":"s2","URI-REPLACEMENT":{"HOST":"198.51.100.2"}}]}
func appendManifest(b []byte, eng *steer.Engine, d *steer.Decision, req steer.Request, q Query, list []int32, base int32, ttl int) []byte {
	snap := eng.Snapshot()
	b = append(b, `{"VERSION":1,"TTL":`...)
	b = strconv.AppendInt(b, int64(ttl), 10)
	b = append(b, `,"RELOAD-URI":"`...)
	b = appendReloadURI(b, req, base, snap.Servers)
	if q.DASH {
		b = append(b, `","SERVICE-LOCATION-PRIORITY":[`...)
	} else {
		b = append(b, `","PATHWAY-PRIORITY":[`...)
	}
	if len(list) == 0 {
		b = append(b, `"."`...)
	}
	clones := 0
	for i, sv := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		if sv == base {
			b = append(b, BasePathway...)
		} else {
			b = append(b, snap.Servers[sv].Name...) // a valid name needs no escaping
			clones++
		}
		b = append(b, '"')
	}
	b = append(b, ']')
	if clones > 0 {
		b = append(b, `,"PATHWAY-CLONES":[`...)
		first := true
		for _, sv := range list {
			if sv == base {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `{"BASE-ID":".","ID":"`...)
			b = append(b, snap.Servers[sv].Name...)
			b = append(b, `","URI-REPLACEMENT":{"HOST":"`...)
			b = appendHost(b, eng, d, sv)
			b = append(b, `"}}`...)
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

// appendHost appends the host part (no port: players replace the hostname
// alone) of the URL the service's template gives for server sv, rendered
// in place at the end of b and moved down over itself.
func appendHost(b []byte, eng *steer.Engine, d *steer.Decision, sv int32) []byte {
	srv := &eng.Snapshot().Servers[sv]
	ad := *d
	ad.Result, ad.Server, ad.Node, ad.Region = steer.ResultCZ, sv, srv.Node, srv.Region
	start := len(b)
	b = eng.AppendLocation(b, &ad, "/", "") // the host is all that is kept: the shortest path renders fastest
	u := b[start:]
	h := hostOf(u)
	n := copy(b[start:], h)
	return sanitize(b[:start+n], start)
}

// hostOf is the host of an absolute URL, without port or userinfo ([::1]
// keeps its brackets, as a URL's hostname does).
func hostOf(u []byte) []byte {
	i := bytes.Index(u, []byte("://"))
	if i < 0 {
		return nil
	}
	u = u[i+3:]
	for j, c := range u {
		if c == '/' || c == '?' || c == '#' {
			u = u[:j]
			break
		}
	}
	for j := len(u) - 1; j >= 0; j-- {
		if u[j] == '@' {
			u = u[j+1:]
			break
		}
	}
	if len(u) > 0 && u[0] == '[' {
		for j, c := range u {
			if c == ']' {
				return u[:j+1]
			}
		}
		return u
	}
	for j, c := range u {
		if c == ':' {
			return u[:j]
		}
	}
	return u
}

// sanitize drops from b[from:] every byte that may not stand in a JSON
// string unescaped or in a hostname (a template's host is the operator's;
// this only keeps a mistake from breaking the document).
func sanitize(b []byte, from int) []byte {
	w := from
	for _, c := range b[from:] {
		if c > 0x20 && c < 0x7f && c != '"' && c != '\\' {
			b[w] = c
			w++
		}
	}
	return b[:w]
}

// appendReloadURI appends the relative RELOAD-URI: the steering path and
// the request's query without the players' parameters (they add their
// own) and with ParamBase naming the server "." stands for. Bytes that a
// URL or a JSON string must not carry as they are, percent-encoded.
func appendReloadURI(b []byte, req steer.Request, base int32, servers []topology.ServerView) []byte {
	b = append(b, Prefix...)
	b = appendURLSafe(b, req.Path, true)
	sep := byte('?')
	raw := req.Query
	for raw != "" {
		var kv string
		kv, raw = nextPair(raw)
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "", ParamHLSPathway, ParamHLSThroughput, ParamDASHPathway, ParamDASHThroughput, ParamBase:
			continue
		}
		b = append(b, sep)
		sep = '&'
		b = appendURLSafe(b, kv, false)
	}
	if base >= 0 {
		b = append(b, sep)
		b = append(b, ParamBase...)
		b = append(b, '=')
		b = append(b, servers[base].Name...)
	}
	return b
}

// appendURLSafe appends s with every byte outside the unreserved and
// sub-delimiter characters (and '/' in a path, '=' in a query pair, '%'
// as it is) percent-encoded; '"' and '\' are among them, so the result is
// a JSON string's content too.
func appendURLSafe(b []byte, s string, path bool) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '%', c == '!', c == '$', c == '\'',
			c == '(', c == ')', c == '*', c == '+', c == ',', c == ';', c == ':', c == '@',
			c == '=', path && c == '/', !path && (c == '/' || c == '?'):
			b = append(b, c)
		default:
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return b
}
