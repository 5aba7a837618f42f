package announce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
	api "github.com/osrg/gobgp/v3/api"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"github.com/osrg/gobgp/v3/pkg/server"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// BGP announces routes with an embedded GoBGP server. Set is desired state:
// after it returns, exactly the given routes are announced to every peer of
// their family. Each family travels over sessions of its own family (an
// IPv6 route to the peers with IPv6 addresses): next-hop-self is then the
// session's local address, of the route's family, which an IPv6 route over
// an IPv4 session could not have without a configured IPv6 next hop.
type BGP struct {
	cfg announcecfg.BGP
	log *slog.Logger

	mu      sync.Mutex
	srv     *server.BgpServer
	current map[netip.Prefix]Attrs
	ready   chan struct{}
	err     error
}

// NewBGP prepares a speaker; Run starts it.
func NewBGP(cfg announcecfg.BGP, log *slog.Logger) *BGP {
	return &BGP{cfg: cfg, log: log.With("component", "bgp"), current: map[netip.Prefix]Attrs{}, ready: make(chan struct{})}
}

// Run starts the speaker and its sessions, and stops them when ctx ends
// (routes are withdrawn as the sessions close).
func (b *BGP) Run(ctx context.Context) error {
	srv := server.NewBgpServer(server.LoggerOption(&gobgpLogger{l: b.log}))
	go srv.Serve()
	// ListenPort -1 accepts no sessions: the speaker connects out to its
	// peers, which is all a scheduler needs.
	err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: b.cfg.ASN, RouterId: b.cfg.RouterID.String(), ListenPort: -1}})
	if err == nil {
		for _, p := range b.cfg.Peers {
			var peer *api.Peer
			if peer, err = peerConf(p); err == nil {
				err = srv.AddPeer(ctx, &api.AddPeerRequest{Peer: peer})
			}
			if err != nil {
				err = fmt.Errorf("peer %s: %w", p.Address, err)
				break
			}
		}
	}
	b.mu.Lock()
	b.srv, b.err = srv, err
	close(b.ready)
	b.mu.Unlock()
	if err != nil {
		srv.Stop()
		return fmt.Errorf("bgp: %w", err)
	}
	b.log.Info("bgp speaker started", "asn", b.cfg.ASN, "router_id", b.cfg.RouterID, "peers", len(b.cfg.Peers))
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = srv.StopBgp(sctx, &api.StopBgpRequest{})
	srv.Stop()
	return nil
}

func peerConf(p announcecfg.BGPPeer) (*api.Peer, error) {
	key, err := p.Key()
	if err != nil {
		return nil, fmt.Errorf("password_file: %w", err)
	}
	hold := p.HoldTime
	if hold == 0 {
		hold = 9 * time.Second
	}
	ka := p.Keepalive
	if ka == 0 {
		ka = hold / 3
	}
	port := uint32(p.Port)
	if port == 0 {
		port = 179
	}
	return &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: p.Address.String(), PeerAsn: p.ASN, AuthPassword: key},
		Timers:    &api.Timers{Config: &api.TimersConfig{HoldTime: uint64(hold / time.Second), KeepaliveInterval: uint64(max(ka/time.Second, 1)), ConnectRetry: 1}},
		Transport: &api.Transport{RemotePort: port},
		AfiSafis: []*api.AfiSafi{
			{Config: &api.AfiSafiConfig{Family: family(p.Address.Is4()), Enabled: true}},
		},
	}, nil
}

func family(v4 bool) *api.Family {
	if v4 {
		return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	}
	return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
}

func (b *BGP) server(ctx context.Context) (*server.BgpServer, error) {
	select {
	case <-b.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return nil, b.err
	}
	return b.srv, nil
}

// Set announces exactly routes (with their attributes) and withdraws the rest.
func (b *BGP) Set(ctx context.Context, routes map[netip.Prefix]Attrs) error {
	srv, err := b.server(ctx)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for p := range b.current {
		if _, keep := routes[p]; !keep {
			if err := srv.DeletePath(ctx, &api.DeletePathRequest{Path: b.path(p, Attrs{})}); err != nil {
				errs = append(errs, &RouteError{Prefix: p, Withdraw: true, Err: err})
				continue
			}
			delete(b.current, p)
			b.log.Info("route withdrawn", "prefix", p)
		}
	}
	for p, a := range routes {
		if cur, ok := b.current[p]; ok && cur.Equal(a) {
			continue
		}
		// Adding the same prefix again replaces its attributes.
		if _, err := srv.AddPath(ctx, &api.AddPathRequest{Path: b.path(p, a)}); err != nil {
			errs = append(errs, &RouteError{Prefix: p, Err: err})
			continue
		}
		b.current[p] = a
		b.log.Info("route announced", "prefix", p, "med", a.MED, "communities", a.Communities, "prepend", a.Prepend)
	}
	return errors.Join(errs...)
}

func (b *BGP) path(p netip.Prefix, a Attrs) *api.Path {
	nlri, _ := anypb.New(&api.IPAddressPrefix{PrefixLen: uint32(p.Bits()), Prefix: p.Addr().String()})
	nh := "0.0.0.0" // next-hop self: GoBGP uses the session's local address
	if p.Addr().Is6() {
		nh = "::"
	}
	attrs := []*anypb.Any{
		mustAny(&api.OriginAttribute{Origin: 0}),
		mustAny(&api.NextHopAttribute{NextHop: nh}),
	}
	if a.MED > 0 {
		attrs = append(attrs, mustAny(&api.MultiExitDiscAttribute{Med: a.MED}))
	}
	if len(a.Communities) > 0 {
		attrs = append(attrs, mustAny(&api.CommunitiesAttribute{Communities: a.Communities}))
	}
	if a.Prepend > 0 {
		asns := make([]uint32, a.Prepend)
		for i := range asns {
			asns[i] = b.cfg.ASN
		}
		attrs = append(attrs, mustAny(&api.AsPathAttribute{Segments: []*api.AsSegment{{Type: api.AsSegment_AS_SEQUENCE, Numbers: asns}}}))
	}
	return &api.Path{Family: family(p.Addr().Is4()), Nlri: nlri, Pattrs: attrs}
}

// mustAny wraps a GoBGP attribute; the types are fixed, so failure is a bug.
func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("announce: wrapping %T: %v", m, err))
	}
	return a
}

// PeerStatus is one BGP session's state, for status and metrics.
type PeerStatus struct {
	Address string `json:"address"`
	ASN     uint32 `json:"asn"`
	State   string `json:"state"` // idle, connect, active, opensent, openconfirm, established
}

// Peers reports the sessions' states.
func (b *BGP) Peers(ctx context.Context) []PeerStatus {
	srv, err := b.server(ctx)
	if err != nil {
		return nil
	}
	var out []PeerStatus
	_ = srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		st := PeerStatus{Address: p.GetConf().GetNeighborAddress(), ASN: p.GetConf().GetPeerAsn()}
		if s := p.GetState(); s != nil {
			st.State = sessionState(s.GetSessionState())
		}
		out = append(out, st)
	})
	slices.SortFunc(out, func(a, b PeerStatus) int {
		if a.Address < b.Address {
			return -1
		}
		if a.Address > b.Address {
			return 1
		}
		return 0
	})
	return out
}

func sessionState(s api.PeerState_SessionState) string {
	switch s {
	case api.PeerState_IDLE:
		return "idle"
	case api.PeerState_CONNECT:
		return "connect"
	case api.PeerState_ACTIVE:
		return "active"
	case api.PeerState_OPENSENT:
		return "opensent"
	case api.PeerState_OPENCONFIRM:
		return "openconfirm"
	case api.PeerState_ESTABLISHED:
		return "established"
	}
	return "unknown"
}

// gobgpLogger sends GoBGP's logs through slog.
type gobgpLogger struct {
	l     *slog.Logger
	level gobgplog.LogLevel
}

func (g *gobgpLogger) log(lv slog.Level, msg string, f gobgplog.Fields) {
	attrs := make([]any, 0, 2*len(f))
	for k, v := range f {
		attrs = append(attrs, k, v)
	}
	g.l.Log(context.Background(), lv, msg, attrs...)
}

func (g *gobgpLogger) Panic(msg string, f gobgplog.Fields) { g.log(slog.LevelError, msg, f) }
func (g *gobgpLogger) Fatal(msg string, f gobgplog.Fields) { g.log(slog.LevelError, msg, f) }
func (g *gobgpLogger) Error(msg string, f gobgplog.Fields) { g.log(slog.LevelError, msg, f) }
func (g *gobgpLogger) Warn(msg string, f gobgplog.Fields)  { g.log(slog.LevelWarn, msg, f) }
func (g *gobgpLogger) Info(msg string, f gobgplog.Fields)  { g.log(slog.LevelInfo, msg, f) }
func (g *gobgpLogger) Debug(msg string, f gobgplog.Fields) { g.log(slog.LevelDebug, msg, f) }
func (g *gobgpLogger) SetLevel(level gobgplog.LogLevel)    { g.level = level }
func (g *gobgpLogger) GetLevel() gobgplog.LogLevel         { return gobgplog.InfoLevel }
