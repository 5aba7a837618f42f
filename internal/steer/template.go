package steer

import (
	"strconv"
	"strings"
)

// A template is a service's url_template split into literal text and fields,
// so that rendering a redirect is appends into a reused buffer.
type template []segment

type segment struct {
	lit   string
	field string // empty for a literal
}

func compileTemplate(tpl string) template {
	var t template
	for tpl != "" {
		i := strings.IndexByte(tpl, '{')
		if i < 0 {
			t = append(t, segment{lit: tpl})
			break
		}
		if i > 0 {
			t = append(t, segment{lit: tpl[:i]})
		}
		end := strings.IndexByte(tpl[i:], '}')
		if end < 0 { // validation forbids this; keep the rest literally
			t = append(t, segment{lit: tpl[i:]})
			break
		}
		t = append(t, segment{field: tpl[i+1 : i+end]})
		tpl = tpl[i+end+1:]
	}
	return t
}

// Channel is the content key of a request path: its first segment
// (/cctv1/index.m3u8 -> cctv1), or "" for "/".
func Channel(path string) string {
	path = strings.TrimPrefix(path, "/")
	if i := strings.IndexByte(path, '/'); i >= 0 {
		path = path[:i]
	}
	return path
}

// AppendLocation appends the redirect URL of decision d for a request path
// and raw query to dst. Fields: {server} host:port, {host} host only, {port},
// {channel} the first path segment, {path} the path without its leading
// slash, {query} the raw query string (for tokens the edge checks), {bitrate}
// kbps, {service}, {region} the server's region. Path and query are inserted
// as the STB sent them (already escaped on the wire).
func (e *Engine) AppendLocation(dst []byte, d *Decision, path, query string) []byte {
	if d.Server < 0 || d.Service < 0 {
		return dst
	}
	srv := &e.snap.Servers[d.Server]
	for _, seg := range e.templates[d.Service] {
		switch seg.field {
		case "":
			dst = append(dst, seg.lit...)
		case "server":
			dst = srv.Addr.AppendTo(dst)
		case "host":
			if srv.Addr.Addr().Is6() {
				dst = append(dst, '[')
				dst = srv.Addr.Addr().AppendTo(dst)
				dst = append(dst, ']')
			} else {
				dst = srv.Addr.Addr().AppendTo(dst)
			}
		case "port":
			dst = strconv.AppendUint(dst, uint64(srv.Addr.Port()), 10)
		case "channel":
			dst = append(dst, Channel(path)...)
		case "path":
			dst = append(dst, strings.TrimPrefix(path, "/")...)
		case "query":
			dst = append(dst, query...)
		case "bitrate":
			dst = strconv.AppendInt(dst, int64(d.BitrateKbps), 10)
		case "service":
			dst = append(dst, e.snap.Services[d.Service].Name...)
		case "region":
			dst = append(dst, e.snap.Regions[srv.Region].Name...)
		}
	}
	return dst
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
		n.Address = s.Servers[d.Server].AddrString
	}
	return n
}
