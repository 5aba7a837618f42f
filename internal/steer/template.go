package steer

import (
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/topology"
)

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
// and raw query to dst, rendering the service's template as compiled with
// the topology (topology.Placeholder says what each placeholder stands
// for). Path and query are inserted as the STB sent them (already escaped on
// the wire); {query} carries tokens the edge checks.
func (e *Engine) AppendLocation(dst []byte, d *Decision, path, query string) []byte {
	if d.Server < 0 || d.Service < 0 {
		return dst
	}
	srv := &e.snap.Servers[d.Server]
	for _, part := range e.snap.Services[d.Service].Template {
		switch part.Field {
		case topology.Literal:
			dst = append(dst, part.Text...)
		case topology.PlaceServer:
			dst = srv.Addr.AppendTo(dst)
		case topology.PlaceHost:
			if srv.Addr.Addr().Is6() {
				dst = append(dst, '[')
				dst = srv.Addr.Addr().AppendTo(dst)
				dst = append(dst, ']')
			} else {
				dst = srv.Addr.Addr().AppendTo(dst)
			}
		case topology.PlacePort:
			dst = strconv.AppendUint(dst, uint64(srv.Addr.Port()), 10)
		case topology.PlaceChannel:
			dst = append(dst, Channel(path)...)
		case topology.PlacePath:
			dst = append(dst, strings.TrimPrefix(path, "/")...)
		case topology.PlaceQuery:
			dst = append(dst, query...)
		case topology.PlaceBitrate:
			dst = strconv.AppendInt(dst, int64(d.BitrateKbps), 10)
		case topology.PlaceService:
			dst = append(dst, e.snap.Services[d.Service].Name...)
		case topology.PlaceRegion:
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
