package app

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/geoip"
	"github.com/anysched/anysched/internal/stb/outlier"
	"github.com/anysched/anysched/internal/stb/overflow"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/wiring/daemon"
)

// policyTick is how often overflow thresholds and outlier rules are
// evaluated: ejection and overflow act within about a second.
const policyTick = time.Second

// policy is the routing state kept across engine rebuilds besides the
// builder's: passive outlier ejections, nodes over their services' overflow
// thresholds, and the GeoIP database.
type policy struct {
	eject  *outlier.Detector // nil: passive ejection off
	over   *overflow.Controller
	counts overflow.SnapshotCounters // the request counters of the current snapshot
	geo    *geoip.DB                 // nil: no geoip.database

	edge     outlier.EdgeTotals // what the edges last reported (runPolicy only)
	ejectFor *topology.Snapshot // the snapshot eject's server indices are of (under rebuildMu)
}

// newPolicy builds the routing policy state from the configuration. On an
// error s.policy is still usable (without what failed) and the daemon stops
// at its start (listen).
func (s *Scheduler) newPolicy() error {
	p := &policy{over: overflow.New(s.Registry, s.Logger.With("component", "overflow"))}
	s.policy = p
	if c := s.common.Outlier; c.Enabled {
		d, err := outlier.New(c, s.Registry, s.Logger.With("component", "outlier"))
		if err != nil {
			return &daemon.ConfigError{Err: fmt.Errorf("outlier: %w", err)}
		}
		p.eject = d
	}
	if c := s.common.GeoIP; c.Database != "" {
		db, err := geoip.Open(c.Database, s.Registry, s.Logger.With("component", "geoip"), geoip.WithInterval(c.ReloadInterval))
		if err != nil {
			return &daemon.ConfigError{Err: fmt.Errorf("geoip.database: %w", err)}
		}
		p.geo = db
	}
	return nil
}

// inputs adds the policy's parts to an engine build for snap with av (the
// merged health, which it amends with the ejections).
func (p *policy) inputs(snap *topology.Snapshot, av *avail.Availability, in *steer.Inputs) {
	if p.eject != nil {
		if p.ejectFor != snap {
			// Before any engine of snap answers: Observe takes its indices.
			nodes, names := make([]int32, len(snap.Servers)), make([]string, len(snap.Servers))
			for i, sv := range snap.Servers {
				nodes[i], names[i] = sv.Node, sv.Name
			}
			p.eject.SetServers(nodes, names)
			p.ejectFor = snap
		}
		for i, ej := range p.eject.EjectedSet() {
			if ej && i < len(av.Available) && av.Available[i] {
				av.Available[i] = false
				av.Why[i] = "ejected: " + p.eject.Why(int32(i))
			}
		}
	}
	if st := p.over.State(); st != nil && st.Snapshot() == snap {
		in.Overflow = st
	}
	in.Count = p.counts.For(snap)
	if p.geo != nil {
		in.Locate = func(a netip.Addr) (topology.Location, bool) {
			lat, lon, ok := p.geo.Locate(a)
			return topology.Location{Lat: lat, Lon: lon}, ok
		}
	}
}

// Observe feeds passive outlier detection with one redirect (the HTTP
// front end's Observer); at is when the request was read.
func (p *policy) Observe(eng *steer.Engine, d steer.Decision, req steer.Request, at time.Time) {
	p.eject.Observe(steer.ClientHash(req.Client), eng.ContentHash(d.Service, req.Path, req.Query), d.Server, at.UnixNano())
}

// runPolicy evaluates the overflow thresholds and the outlier rules every
// policyTick, and has the engine rebuilt when a node or server changed
// state.
func (s *Scheduler) runPolicy(ctx context.Context) error {
	p := s.policy
	t := time.NewTicker(policyTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		snap := s.Syncer.Snapshot()
		if snap == nil {
			continue
		}
		now := time.Now()
		changed := false
		av := s.avail.Load()
		if av != nil && len(av.Figures) != len(snap.Servers) {
			av = nil // made for another snapshot
		}
		if p.eject != nil {
			if av != nil {
				p.edgeReports(snap, av)
			}
			changed = p.eject.Evaluate(now)
		}
		in := overflow.Inputs{Snap: snap, Counters: p.counts.For(snap), Now: now}
		if av != nil {
			in.BandwidthMbps = make([]float64, len(snap.Servers))
			for i, f := range av.Figures {
				in.BandwidthMbps[i] = math.NaN()
				if f.Measured && f.Load.BandwidthMbps > 0 {
					in.BandwidthMbps[i] = f.Load.BandwidthMbps
				}
			}
		}
		if s.allocator != nil {
			in.ClaimedKbps, in.Sessions = s.allocator.ServerFigures(snap)
		}
		changed = p.over.Evaluate(in) || changed
		if changed {
			s.rebuildEngine()
		}
	}
}

// edgeReports hands outlier detection what the edges reported of their own
// requests and errors (health JSON stats) since the last look.
func (p *policy) edgeReports(snap *topology.Snapshot, av *avail.Availability) {
	for i, f := range av.Figures {
		if !f.Measured {
			continue
		}
		if dr, de, ok := p.edge.Since(snap.Servers[i].Name, f.Load.Requests, f.Load.Errors); ok {
			p.eject.Report(int32(i), dr, de)
		}
	}
}
