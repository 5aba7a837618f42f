package app

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/daemon"
	"github.com/anysched/anysched/internal/geoip"
	"github.com/anysched/anysched/internal/health/avail"
	"github.com/anysched/anysched/internal/outlier"
	"github.com/anysched/anysched/internal/overflow"
	"github.com/anysched/anysched/internal/steer"
	"github.com/anysched/anysched/internal/topology"
)

// policyTick is how often overflow thresholds and outlier rules are
// evaluated: ejection and overflow act within about a second.
const policyTick = time.Second

// policy is the routing state kept across engine rebuilds: when servers
// came back into service (slow start), passive outlier ejections, nodes
// over their services' overflow thresholds, and the GeoIP database.
type policy struct {
	mu     sync.Mutex           // guards back and prev
	back   map[string]time.Time // server name -> when it came back into service
	prev   map[string]bool      // server name -> available at the last rebuild
	eject  *outlier.Detector    // nil: passive ejection off
	over   *overflow.Controller
	counts atomic.Pointer[snapCounters] // the request counters of one snapshot
	geo    *geoip.DB                    // nil: no geoip.database

	edge     map[string][2]int64 // server name -> requests, errors the edge last reported (runPolicy only)
	ejectFor *topology.Snapshot  // the snapshot eject's server indices are of (under rebuildMu)
}

// newPolicy builds the routing policy state from the configuration. On an
// error s.policy is still usable (without what failed) and the daemon stops
// at its start (listen).
func (s *Scheduler) newPolicy() error {
	p := &policy{back: map[string]time.Time{}, over: overflow.New(s.Registry, s.Logger.With("component", "overflow"))}
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

// snapCounters are the per-node request counters of one snapshot.
type snapCounters struct {
	snap *topology.Snapshot
	c    *overflow.Counters
}

// counters returns the per-node request counters for snap, new ones when
// the snapshot changed. Engine rebuilds and the evaluation ask
// concurrently: the compare-and-swap keeps them on one set.
func (p *policy) counters(snap *topology.Snapshot) *overflow.Counters {
	for {
		cur := p.counts.Load()
		if cur != nil && cur.snap == snap {
			return cur.c
		}
		next := &snapCounters{snap: snap, c: overflow.NewCounters(len(snap.Services), len(snap.Nodes))}
		if p.counts.CompareAndSwap(cur, next) {
			return next.c
		}
	}
}

// inputs adds the policy's parts to an engine build for snap with av (the
// merged health, which it amends with the ejections), and records which
// servers came back into service.
func (p *policy) inputs(snap *topology.Snapshot, av *avail.Availability, in *steer.Inputs) {
	now := in.Now
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
	p.mu.Lock()
	cur := make(map[string]bool, len(snap.Servers))
	in.Back = make([]time.Time, len(snap.Servers))
	for i, sv := range snap.Servers {
		cur[sv.Name] = av.Available[i]
		if was, known := p.prev[sv.Name]; known && !was && av.Available[i] {
			p.back[sv.Name] = now
		}
		in.Back[i] = p.back[sv.Name]
	}
	for name, t := range p.back {
		if now.Sub(t) > time.Hour { // long past any slow-start window
			delete(p.back, name)
		}
	}
	p.prev = cur
	p.mu.Unlock()
	if st := p.over.State(); st != nil && st.Snapshot() == snap {
		in.Overflow = st
	}
	in.Count = p.counters(snap)
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
		in := overflow.Inputs{Snap: snap, Counters: p.counters(snap), Now: now}
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
	if p.edge == nil {
		p.edge = map[string][2]int64{}
	}
	for i, f := range av.Figures {
		if !f.Measured || f.Load.Requests <= 0 {
			continue
		}
		name := snap.Servers[i].Name
		cur := [2]int64{f.Load.Requests, f.Load.Errors}
		last, seen := p.edge[name]
		p.edge[name] = cur
		if seen && cur[0] >= last[0] && cur[1] >= last[1] && cur[0] > last[0] { // a counter reset (restart) is skipped
			p.eject.Report(int32(i), cur[0]-last[0], cur[1]-last[1])
		}
	}
}
