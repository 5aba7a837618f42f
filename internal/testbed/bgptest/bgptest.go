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

// Router is a GoBGP listening on 127.0.0.1:Port.
type Router struct {
	srv  *server.BgpServer
	Port int
}

// Route is a learned route with the attributes tests look at.
type Route struct {
	Prefix      string
	MED         uint32
	Communities []uint32
	ASPathLen   int
}

// New starts a router with asn that accepts a session from 127.0.0.1 with peerASN.
func New(t testing.TB, asn, peerASN uint32, password string) *Router {
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
		err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: asn, RouterId: "10.255.0.1", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"}}})
		if err == nil {
			break
		}
		if !testport.InUse(err) || attempt == 5 {
			t.Fatalf("bgptest: start on 127.0.0.1:%d: %v", port, err)
		}
	}
	if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: peerASN, AuthPassword: password},
		Transport: &api.Transport{PassiveMode: true},
		Timers:    &api.Timers{Config: &api.TimersConfig{HoldTime: 3, KeepaliveInterval: 1}},
	}}); err != nil {
		t.Fatal(err)
	}
	return &Router{srv: srv, Port: int(port)}
}

// Routes lists the IPv4 unicast routes learned.
func (r *Router) Routes(t testing.TB) []Route {
	t.Helper()
	var out []Route
	err := r.srv.ListPath(context.Background(), &api.ListPathRequest{TableType: api.TableType_GLOBAL, Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}}, func(d *api.Destination) {
		for _, p := range d.Paths {
			l := Route{Prefix: d.Prefix}
			for _, a := range p.Pattrs {
				m, err := a.UnmarshalNew()
				if err != nil {
					continue
				}
				switch v := m.(type) {
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
			out = append(out, l)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
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
