package app

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/routing/announce"
	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/daemon"
	"github.com/anysched/anysched/netconfig"
)

// announcer is the route announcement of one scheduler.
type announcer struct {
	announce.Route
	bgp *announce.BGP // nil in OSPF mode
}

// newAnnouncer builds the announcement for c, or nil when announce.mode is none.
func (s *Scheduler) newAnnouncer(c config.Common) *announcer {
	a := c.Announce
	if a.Mode == announcecfg.ModeNone {
		return nil
	}
	attrs := announce.Attrs{MED: a.BGP.MED, Prepend: a.BGP.ASPathPrepend, Communities: a.BGP.CommunityValues()}
	an := &announcer{Route: announce.Route{Logger: s.Logger}}
	switch a.Mode {
	case announcecfg.ModeBGP:
		an.bgp = announce.NewBGP(a.BGP, s.Logger)
		an.Speaker = an.bgp
		if !c.Anycast.ManageAddress {
			break
		}
		an.VIPs = s.serviceVIPs(a, func(p netip.Prefix) (*netconfig.VIP, error) { return netconfig.NewVIP(c.Anycast.Interface, p) })
	case announcecfg.ModeOSPF:
		o := &announce.OSPF{Interface: c.Anycast.Interface, Logger: s.Logger}
		an.Speaker = &serviceIPSpeaker{OSPF: o, s: s}
		if c.Anycast.ManageAddress {
			// Withdrawing removes the address from anycast0; the same address
			// on lo (not advertised) keeps accepting the STBs still routed
			// here until OSPF has converged, so the drain loses nothing.
			an.VIPs = s.serviceVIPs(a, netconfig.NewLocalVIP)
		}
	}
	an.Controller = &announce.Controller{
		Speaker: an.Speaker, Logger: s.Logger, Ready: s.readiness(c).Check, Drilled: s.drilled,
		OnChange: func() { // tell status at once, not at the next refresh
			select {
			case s.kick <- struct{}{}:
			default:
			}
			if s.allocator != nil { // routed or not: the claims follow at once
				s.allocator.Kick()
			}
		},
		Options: announce.ControllerOptions{Targets: func() []announce.Target { return s.anycastTargets(a) }, Attrs: attrs, Timing: a.Timing},
	}
	if a.Mode == announcecfg.ModeOSPF {
		an.Controller.Options.Drain.PreWithdraw = 0 // no communities in OSPF
	}
	an.Controller.Register(s.Registry)
	return an
}

// serviceVIPs are the service addresses of the families this scheduler
// announces, as host routes made into VIPs by mk.
func (s *Scheduler) serviceVIPs(a announcecfg.Config, mk func(netip.Prefix) (*netconfig.VIP, error)) func() ([]*netconfig.VIP, error) {
	return func() ([]*netconfig.VIP, error) {
		snap := s.Syncer.Snapshot()
		if snap == nil {
			return nil, errors.New("no topology yet")
		}
		var out []*netconfig.VIP
		for _, pair := range snap.Anycast() {
			if !a.Announces(familyOf(pair.ServiceIP)) {
				continue
			}
			v, err := mk(netconfig.HostPrefix(pair.ServiceIP))
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
}

func familyOf(ip netip.Addr) announce.Family {
	return announce.FamilyOf(netip.PrefixFrom(ip, 0))
}

// serviceIPSpeaker gives the OSPF speaker the service addresses from the
// current snapshot (the center puts ServiceIP/26 on its interface).
type serviceIPSpeaker struct {
	*announce.OSPF
	s *Scheduler
}

func (o *serviceIPSpeaker) Set(ctx context.Context, routes map[netip.Prefix]announce.Attrs) error {
	if snap := o.s.Syncer.Snapshot(); snap != nil {
		var ips []netip.Addr
		for _, pair := range snap.Anycast() {
			ips = append(ips, pair.ServiceIP)
		}
		o.OSPF.ServiceIPs = ips
	}
	return o.OSPF.Set(ctx, routes)
}

// anycastTargets is what this scheduler announces, one route per family of
// announce.families (all the province has when empty): the service /32 and
// /128 (regional) or the center's aggregates. A family it cannot announce
// says why.
func (s *Scheduler) anycastTargets(a announcecfg.Config) []announce.Target {
	snap := s.Syncer.Snapshot()
	if snap == nil {
		return nil
	}
	var out []announce.Target
	has := map[announce.Family]bool{}
	for _, pair := range snap.Anycast() {
		f := familyOf(pair.ServiceIP)
		has[f] = true
		if !a.Announces(f) {
			continue
		}
		t := announce.Target{Family: f, Prefix: netconfig.HostPrefix(pair.ServiceIP)}
		if s.Role == instance.Central {
			t.Prefix = pair.CenterPrefix
		}
		// The last line: a snapshot compiled here was validated already, but
		// nothing that validation would refuse may reach a router.
		if err := s.Syncer.Limits.CheckAnnounced(t.Prefix, pair.ServiceIP); err != nil {
			if s.refusedRoute.Swap(snap) != snap {
				s.Logger.Error("not announcing", "component", "announce", "family", f, "revision", snap.Revision, "err", err)
			}
			t.Prefix, t.Err = netip.Prefix{}, err
		} else if a.Mode == announcecfg.ModeBGP && !slices.ContainsFunc(a.BGP.Peers, func(p announcecfg.BGPPeer) bool { return p.Address.Unmap().Is6() == f.Is6() }) {
			t.Err = fmt.Errorf("no %s peer in announce.bgp.peers: no router would hear the route", f)
		}
		out = append(out, t)
	}
	for _, f := range a.Families {
		if !has[f] {
			out = append(out, announce.Target{Family: f, Err: fmt.Errorf("topology revision %d has no %s service address (anycast.service_ip6 or service_ip)", snap.Revision, f)})
		}
	}
	return out
}

// routeLines are /readyz's lines on the routes, one per family:
// "route ipv6 fd00:a::1/128: announced", or withdrawn and why.
func (s *Scheduler) routeLines() []string {
	if s.announcer == nil {
		return nil
	}
	var out []string
	for _, f := range s.announcer.Controller.Families() {
		l := fmt.Sprintf("route %s", f.Family)
		if f.Prefix.IsValid() {
			l += " " + f.Prefix.String()
		}
		if f.Announced {
			out = append(out, l+": announced")
		} else {
			out = append(out, l+": not announced: "+f.Why)
		}
	}
	return out
}

// announceConfig is the announce section this scheduler runs with.
func (s *Scheduler) announceConfig() announcecfg.Config { return s.common.Announce }

// readiness is the rule the route follows (announce.Readiness), over this
// scheduler's snapshot, engine and front ends.
func (s *Scheduler) readiness(c config.Common) announce.Readiness {
	r := announce.Readiness{
		Center:   s.Role == instance.Central,
		Snapshot: func() bool { return s.Syncer.Snapshot() != nil },
		Fresh:    s.Ready,
		Routing: func() (built, available bool) {
			eng := s.Engine()
			return eng != nil, eng != nil && eng.AnyAvailable()
		},
	}
	// The servers are made with the components, after the announcer.
	if c.HTTP.Listen != "" {
		r.FrontEnds = append(r.FrontEnds, announce.FrontEnd{Name: "http", Listen: c.HTTP.Listen,
			Listening: func() bool { return s.httpServer == nil || s.httpServer.Addr() != nil }})
	}
	if c.DNS.Listen != "" {
		r.FrontEnds = append(r.FrontEnds, announce.FrontEnd{Name: "dns", Listen: c.DNS.Listen,
			Listening: func() bool { return s.dnsServer == nil || s.dnsServer.Listening() }})
	}
	return r
}

// AnnounceState reports the route state for status: announced, why not,
// each family's route, BGP peers.
func (s *Scheduler) AnnounceState(ctx context.Context) (announced bool, why string, families []announce.FamilyState, peers []announce.PeerStatus) {
	if s.announcer == nil {
		return false, store.NotAnnouncedModeNone, nil, nil
	}
	announced, why = s.announcer.Controller.State()
	families = s.announcer.Controller.Families()
	if s.announcer.bgp != nil {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		peers = s.announcer.bgp.Peers(cctx)
	}
	return announced, why, families, peers
}

// Serve runs the components until ctx ends and then, when the route is
// announced, stops as announce.Route.Serve does: withdraw, drain, stop.
func (s *Scheduler) Serve(ctx context.Context, comps ...func(context.Context) error) error {
	if s.announcer == nil {
		return daemon.RunAll(ctx, comps...)
	}
	return s.announcer.Serve(ctx, func(ctx context.Context) error { return daemon.RunAll(ctx, comps...) })
}
