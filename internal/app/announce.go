package app

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/anysched/anysched/internal/announce"
	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/daemon"
	"github.com/anysched/anysched/internal/store"
	"github.com/anysched/anysched/netconfig"
	"golang.org/x/sync/errgroup"
)

// announcer is the route announcement of one scheduler: a speaker (BGP or
// OSPF) and the controller that follows readiness.
type announcer struct {
	speaker announce.Speaker
	bgp     *announce.BGP // nil in OSPF mode
	ctrl    *announce.Controller
	vip     func() (*netconfig.VIP, error) // BGP mode: the address the kernel must accept
}

// newAnnouncer builds the announcement for c, or nil when announce.mode is none.
func (s *Scheduler) newAnnouncer(c config.Common) (*announcer, error) {
	a := c.Announce
	if a.Mode == "none" {
		return nil, nil
	}
	attrs := announce.Attrs{MED: a.BGP.MED, Prepend: a.BGP.ASPathPrepend, Communities: a.BGP.CommunityValues()}
	an := &announcer{}
	switch a.Mode {
	case "bgp":
		cfg := announce.BGPConfig{ASN: a.BGP.ASN, RouterID: a.BGP.RouterID}
		for _, p := range a.BGP.Peers {
			cfg.Peers = append(cfg.Peers, announce.BGPPeer{Address: p.Address, Port: uint16(p.Port), ASN: p.ASN, HoldTime: p.HoldTime, Keepalive: p.Keepalive, Password: p.Password})
		}
		an.bgp = announce.NewBGP(cfg, s.Logger)
		an.speaker = an.bgp
		if !c.Anycast.ManageAddress {
			break
		}
		an.vip = func() (*netconfig.VIP, error) {
			snap := s.Syncer.Snapshot()
			if snap == nil {
				return nil, errors.New("no topology yet")
			}
			return netconfig.NewVIP(c.Anycast.Interface, netconfig.HostPrefix(snap.ServiceIP))
		}
	case "ospf":
		o := &announce.OSPF{Interface: c.Anycast.Interface, Logger: s.Logger}
		an.speaker = &serviceIPSpeaker{OSPF: o, s: s}
		if c.Anycast.ManageAddress {
			// Withdrawing removes the address from anycast0; the same address
			// on lo (not advertised) keeps accepting the STBs still routed
			// here until OSPF has converged, so the drain loses nothing.
			an.vip = func() (*netconfig.VIP, error) {
				snap := s.Syncer.Snapshot()
				if snap == nil {
					return nil, errors.New("no topology yet")
				}
				return netconfig.NewLocalVIP(netconfig.HostPrefix(snap.ServiceIP))
			}
		}
	}
	an.ctrl = &announce.Controller{
		Speaker: an.speaker, Logger: s.Logger, Ready: s.announceReady,
		OnChange: func() { // tell status at once, not at the next refresh
			select {
			case s.kick <- struct{}{}:
			default:
			}
			if s.allocator != nil { // routed or not: the claims follow at once
				s.allocator.Kick()
			}
		},
		Options: announce.ControllerOptions{
			PrefixFunc: s.anycastPrefix, Attrs: attrs, Check: a.CheckInterval, Rise: a.Rise, Fall: a.Fall,
			HoldDown: a.HoldDown, GracefulWait: a.Drain.PreWithdraw, Drain: a.Drain.Linger,
		},
	}
	if a.Mode == "ospf" {
		an.ctrl.Options.GracefulWait = 0 // no communities in OSPF
	}
	an.ctrl.Register(s.Registry)
	return an, nil
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
	if s.Role == RoleCentral {
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

// announceReady: the route is announced only while the scheduler can really
// answer: a fresh snapshot with its region, its front ends listening, and
// at least one available server anywhere to send STBs to. The center, the
// last resort of every city, does not withdraw for a stale snapshot: during a
// long etcd outage it keeps answering from what it has.
func (s *Scheduler) announceReady() error {
	if s.Role == RoleCentral {
		if s.Syncer.Snapshot() == nil {
			return errors.New("no topology snapshot yet")
		}
	} else if err := s.Ready(); err != nil {
		return err
	}
	eng := s.Engine()
	if eng == nil {
		return errors.New("no routing engine yet")
	}
	if !eng.AnyAvailable() {
		return errors.New("no available server in any region to send STBs to")
	}
	// Ask the front ends themselves: dialing the listen address could reach
	// another scheduler while the service address is not local yet.
	if s.httpServer != nil && s.httpServer.Addr() == nil {
		return fmt.Errorf("http front end not listening on %s", s.common.HTTP.Listen)
	}
	if s.dnsServer != nil && !s.dnsServer.Listening() {
		return fmt.Errorf("dns front end not listening on %s", s.common.DNS.Listen)
	}
	return nil
}

// AnnounceState reports the route state for status: announced, why not, BGP peers.
func (s *Scheduler) AnnounceState(ctx context.Context) (announced bool, why string, peers []announce.PeerStatus) {
	if s.announcer == nil {
		return false, store.NotAnnouncedModeNone, nil
	}
	announced, why = s.announcer.ctrl.State()
	if s.announcer.bgp != nil {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		peers = s.announcer.bgp.Peers(cctx)
	}
	return announced, why, peers
}

// runServing runs the components until ctx ends and then, when the route is
// announced, stops gracefully: the controller withdraws (after
// GRACEFUL_SHUTDOWN in BGP mode) and drains while the front ends still
// answer, and only then are the other components stopped. A failing
// component withdraws at once.
func (s *Scheduler) runServing(ctx context.Context, comps ...func(context.Context) error) error {
	an := s.announcer
	if an == nil {
		return daemon.RunAll(ctx, comps...)
	}
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	g, gctx := errgroup.WithContext(serveCtx)
	daemon.GoAll(gctx, g, comps)
	g.Go(func() error { return an.speaker.Run(gctx) })
	g.Go(func() error {
		ctrlCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			<-gctx.Done()
			an.ctrl.StopFast()
			cancel()
		}()
		if an.vip != nil {
			go s.keepVIP(ctrlCtx, an)
		}
		err := an.ctrl.Run(ctrlCtx)
		if an.vip != nil {
			if v, verr := an.vip(); verr == nil {
				_ = v.Down(context.Background())
			}
		}
		stopServing()
		return err
	})
	return g.Wait()
}

// keepVIP keeps the service address on the dummy interface in BGP mode (the
// kernel must accept packets for it), following topology changes.
func (s *Scheduler) keepVIP(ctx context.Context, an *announcer) {
	var current *netconfig.VIP
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if v, err := an.vip(); err == nil && (current == nil || current.Prefix() != v.Prefix()) {
			if err := v.Up(ctx); err != nil {
				s.Logger.Error("putting the service address on the interface failed", "component", "announce", "address", v, "err", err)
			} else {
				if current != nil {
					_ = current.Down(ctx)
				}
				current = v
				s.Logger.Info("service address up", "component", "announce", "address", v)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
