package app

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"sync/atomic"
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
	// eject6 maps ejectFor's dual-stack servers to the detector's entries
	// for their IPv6 addresses (read by Observe on the STB path).
	eject6 atomic.Pointer[familyIndex]
}

// familyIndex is the outlier detector's entry for each server's IPv6
// address: a dual-stack server's redirects to its IPv6 address, and the
// re-asks after them, are counted apart from its IPv4 ones, so a broken
// IPv6 address is ejected alone. byServer[i] is -1 for a server with one
// family; server[j] is the server of entry len(snap.Servers)+j.
type familyIndex struct {
	snap     *topology.Snapshot
	byServer []int32
	server   []int32
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
			n := len(snap.Servers)
			nodes, names := make([]int32, n), make([]string, n)
			fi := &familyIndex{snap: snap, byServer: make([]int32, n)}
			for i, sv := range snap.Servers {
				nodes[i], names[i], fi.byServer[i] = sv.Node, sv.Name, -1
				if sv.Addr6.IsValid() {
					fi.byServer[i] = int32(n + len(fi.server))
					fi.server = append(fi.server, int32(i))
				}
			}
			for _, si := range fi.server {
				nodes, names = append(nodes, snap.Servers[si].Node), append(names, snap.Servers[si].Name+" (IPv6)")
			}
			p.eject.SetServers(nodes, names)
			p.eject6.Store(fi)
			p.ejectFor = snap
		}
		fi := p.eject6.Load()
		for i, ej := range p.eject.EjectedSet() {
			switch {
			case !ej:
			case i < len(av.Available):
				// The server's (IPv4) address: the whole server, as
				// edge-reported errors, which say nothing of a family.
				if av.Available[i] {
					av.Available[i] = false
					av.Why[i] = "ejected: " + p.eject.Why(int32(i))
				}
			case i-len(av.Available) < len(fi.server):
				ejectFamily(av, fi.server[i-len(av.Available)], 1, "ejected: "+p.eject.Why(int32(i)))
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

// ejectFamily marks server's address of family f (1: IPv6) down in av
// with why, copying FamilyDown first: av's may be shared with the merger's
// last result. A server available by that family alone becomes unavailable.
func ejectFamily(av *avail.Availability, server int32, f int, why string) {
	n := len(av.Available)
	if !av.Available[server] {
		return
	}
	down := [2][]bool{make([]bool, n), make([]bool, n)}
	whys := [2][]string{make([]string, n), make([]string, n)}
	if av.FamilyDown != nil {
		copy(down[0], av.FamilyDown[0])
		copy(down[1], av.FamilyDown[1])
	}
	if av.FamilyWhy != nil {
		copy(whys[0], av.FamilyWhy[0])
		copy(whys[1], av.FamilyWhy[1])
	}
	if down[1-f][server] { // the other family is down already: nothing is left
		av.Available[server], av.Why[server] = false, why
		return
	}
	down[f][server], whys[f][server] = true, why
	av.FamilyDown, av.FamilyWhy = &down, &whys
}

// Observe feeds passive outlier detection with one redirect (the HTTP
// front end's Observer); at is when the request was read. A redirect to a
// dual-stack server's IPv6 address counts for that address's entry.
func (p *policy) Observe(eng *steer.Engine, d steer.Decision, req steer.Request, at time.Time) {
	server := d.Server
	if fi := p.eject6.Load(); fi != nil && fi.snap == eng.Snapshot() && d.Family == steer.FamilyV6 && fi.byServer[server] >= 0 {
		if _, _, given, _ := eng.Addr(&d); given == steer.FamilyV6 {
			server = fi.byServer[server]
		}
	}
	p.eject.Observe(steer.ClientHash(req.Client), eng.ContentHash(d.Service, req.Path, req.Query), server, at.UnixNano())
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
