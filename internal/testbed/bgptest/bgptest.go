// Package bgptest runs a GoBGP speaker in the test process standing in for
// an uplink router: it accepts one peer's session on loopback and reports
// the routes it learned.
package bgptest

import (
	"context"
	"net/netip"
	"testing"

	testport "github.com/anysched/anysched/internal/testbed/port"
	api "github.com/osrg/gobgp/v3/api"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"github.com/osrg/gobgp/v3/pkg/server"
)

// Router is a GoBGP listening on 127.0.0.1:Port (and [::1]:Port when dual-stack).
type Router struct {
	srv  *server.BgpServer
	Port int
}

// Route is a learned route with the attributes tests look at.
type Route struct {
	Prefix      string
	NextHop     string
	MED         uint32
	Communities []uint32
	ASPathLen   int
}

// New starts a router with asn that accepts a session from 127.0.0.1 with peerASN.
func New(t testing.TB, asn, peerASN uint32, password string) *Router {
	t.Helper()
	return start(t, asn, peerASN, password, "127.0.0.1")
}

// NewDualStack starts a router that accepts two sessions from peerASN, one
// from 127.0.0.1 (IPv4 unicast) and one from ::1 (IPv6 unicast), as a
// dual-stack uplink with a session per family.
func NewDualStack(t testing.TB, asn, peerASN uint32) *Router {
	t.Helper()
	return start(t, asn, peerASN, "", "127.0.0.1", "::1")
}

func start(t testing.TB, asn, peerASN uint32, password string, addrs ...string) *Router {
	t.Helper()
	srv := server.NewBgpServer(server.LoggerOption(nopLogger{}))
	go srv.Serve()
	t.Cleanup(func() { _ = srv.StopBgp(context.Background(), &api.StopBgpRequest{}); srv.Stop() })
	ctx := context.Background()
	// GoBGP takes a port number (0 means "do not listen") and does not say
	// which port it bound, so it cannot bind :0 and be asked. Pick ports
	// that were free a moment ago; if another process took one in between,
	// the listen fails with EADDRINUSE and nothing was started: try another.
	var port uint16
	for attempt := 1; ; attempt++ {
		port = netip.MustParseAddrPort(testport.Pick(t, 1)[0]).Port()
		err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: asn, RouterId: "10.255.0.1", ListenPort: int32(port), ListenAddresses: addrs}})
		if err == nil {
			break
		}
		if !testport.InUse(err) || attempt == 5 {
			t.Fatalf("bgptest: start on %v port %d: %v", addrs, port, err)
		}
	}
	for _, a := range addrs {
		if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
			Conf:      &api.PeerConf{NeighborAddress: a, PeerAsn: peerASN, AuthPassword: password},
			Transport: &api.Transport{PassiveMode: true},
			Timers:    &api.Timers{Config: &api.TimersConfig{HoldTime: 3, KeepaliveInterval: 1}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	return &Router{srv: srv, Port: int(port)}
}

// Routes lists the IPv4 and IPv6 unicast routes learned (IPv4 first).
func (r *Router) Routes(t testing.TB) []Route {
	t.Helper()
	var out []Route
	for _, afi := range []api.Family_Afi{api.Family_AFI_IP, api.Family_AFI_IP6} {
		err := r.srv.ListPath(context.Background(), &api.ListPathRequest{TableType: api.TableType_GLOBAL, Family: &api.Family{Afi: afi, Safi: api.Family_SAFI_UNICAST}}, func(d *api.Destination) {
			for _, p := range d.Paths {
				out = append(out, route(d.Prefix, p))
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func route(prefix string, p *api.Path) Route {
	l := Route{Prefix: prefix}
	for _, a := range p.Pattrs {
		m, err := a.UnmarshalNew()
		if err != nil {
			continue
		}
		switch v := m.(type) {
		case *api.NextHopAttribute:
			l.NextHop = v.NextHop
		case *api.MpReachNLRIAttribute:
			if len(v.NextHops) > 0 {
				l.NextHop = v.NextHops[0]
			}
		case *api.MultiExitDiscAttribute:
			l.MED = v.Med
		case *api.CommunitiesAttribute:
			l.Communities = v.Communities
		case *api.AsPathAttribute:
			for _, s := range v.Segments {
				l.ASPathLen += len(s.Numbers)
			}
		}
	}
	return l
}

type nopLogger struct{}

func (nopLogger) Panic(string, gobgplog.Fields) {}
func (nopLogger) Fatal(string, gobgplog.Fields) {}
func (nopLogger) Error(string, gobgplog.Fields) {}
func (nopLogger) Warn(string, gobgplog.Fields)  {}
func (nopLogger) Info(string, gobgplog.Fields)  {}
func (nopLogger) Debug(string, gobgplog.Fields) {}
func (nopLogger) SetLevel(gobgplog.LogLevel)    {}
func (nopLogger) GetLevel() gobgplog.LogLevel   { return gobgplog.PanicLevel }
