package app

import (
	"context"
	"errors"
	"net/netip"
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
		an.VIP = func() (*netconfig.VIP, error) {
			snap := s.Syncer.Snapshot()
			if snap == nil {
				return nil, errors.New("no topology yet")
			}
			return netconfig.NewVIP(c.Anycast.Interface, netconfig.HostPrefix(snap.ServiceIP))
		}
	case announcecfg.ModeOSPF:
		o := &announce.OSPF{Interface: c.Anycast.Interface, Logger: s.Logger}
		an.Speaker = &serviceIPSpeaker{OSPF: o, s: s}
		if c.Anycast.ManageAddress {
			// Withdrawing removes the address from anycast0; the same address
			// on lo (not advertised) keeps accepting the STBs still routed
			// here until OSPF has converged, so the drain loses nothing.
			an.VIP = func() (*netconfig.VIP, error) {
				snap := s.Syncer.Snapshot()
				if snap == nil {
					return nil, errors.New("no topology yet")
				}
				return netconfig.NewLocalVIP(netconfig.HostPrefix(snap.ServiceIP))
			}
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
		Options: announce.ControllerOptions{PrefixFunc: s.anycastPrefix, Attrs: attrs, Timing: a.Timing},
	}
	if a.Mode == announcecfg.ModeOSPF {
		an.Controller.Options.Drain.PreWithdraw = 0 // no communities in OSPF
	}
	an.Controller.Register(s.Registry)
	return an
}

// serviceIPSpeaker gives the OSPF speaker the service address from the
// current snapshot (the center puts ServiceIP/26 on its interface).
type serviceIPSpeaker struct {
	*announce.OSPF
	s *Scheduler
}

func (o *serviceIPSpeaker) Set(ctx context.Context, routes map[netip.Prefix]announce.Attrs) error {
	if snap := o.s.Syncer.Snapshot(); snap != nil {
		o.OSPF.ServiceIP = snap.ServiceIP
	}
	return o.OSPF.Set(ctx, routes)
}

// anycastPrefix is what this scheduler announces: the service /32 (regional)
// or the center's aggregate.
func (s *Scheduler) anycastPrefix() (netip.Prefix, bool) {
	snap := s.Syncer.Snapshot()
	if snap == nil {
		return netip.Prefix{}, false
	}
	p := netconfig.HostPrefix(snap.ServiceIP)
	if s.Role == instance.Central {
		p = snap.CenterPrefix
	}
	// The last line: a snapshot compiled here was validated already, but
	// nothing that validation would refuse may reach a router.
	if err := s.Syncer.Limits.CheckAnnounced(p, snap.ServiceIP); err != nil {
		if s.refusedRoute.Swap(snap) != snap {
			s.Logger.Error("not announcing", "component", "announce", "revision", snap.Revision, "err", err)
		}
		return netip.Prefix{}, false
	}
	return p, true
}

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

// AnnounceState reports the route state for status: announced, why not, BGP peers.
func (s *Scheduler) AnnounceState(ctx context.Context) (announced bool, why string, peers []announce.PeerStatus) {
	if s.announcer == nil {
		return false, store.NotAnnouncedModeNone, nil
	}
	announced, why = s.announcer.Controller.State()
	if s.announcer.bgp != nil {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		peers = s.announcer.bgp.Peers(cctx)
	}
	return announced, why, peers
}

// Serve runs the components until ctx ends and then, when the route is
// announced, stops as announce.Route.Serve does: withdraw, drain, stop.
func (s *Scheduler) Serve(ctx context.Context, comps ...func(context.Context) error) error {
	if s.announcer == nil {
		return daemon.RunAll(ctx, comps...)
	}
	return s.announcer.Serve(ctx, func(ctx context.Context) error { return daemon.RunAll(ctx, comps...) })
}
