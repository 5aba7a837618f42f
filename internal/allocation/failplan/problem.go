package failplan

import (
	"context"
	"math"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/geo"
)

// unlimited stands for a capacity the topology does not state (as the
// planners take it).
const unlimited = 1e15

// anywhereM is the coverage radius of a server that states none, and of a
// host's server for a lost city's viewers: in a failure the region
// fallback sends them to the fallback region's servers whatever their
// coverage says.
const anywhereM = 2e7

// problem is one QoE instance being built: servers by position with the
// region they are in, and viewers grouped by what the model can tell
// apart (place, profile, channel, previous server) into users with counts.
type problem struct {
	inst     *qoe.Instance
	chunk    int32   // the most viewers one user stands for (the planners' rule)
	least    float64 // the smallest stated bandwidth of a host's server (0: the instance's own)
	regionOf []int32 // by server position
	chans    map[string]int32
	groups   map[group]int32 // -> user index
	room     float64
}

type group struct {
	lat, lon, desired, danmaku, gift float64
	channel, prev                    int32
}

// newProblem is an empty instance of service svc.
func (in *Input) newProblem(svc int32) *problem {
	sv := &in.Snap.Services[svc]
	inst := &qoe.Instance{Params: in.Params, Ladder: make([]float64, len(sv.BitratesKbps))}
	for i, b := range sv.BitratesKbps {
		inst.Ladder[i] = float64(b)
	}
	if inst.Params.FallbackRung >= len(inst.Ladder) {
		inst.Params.FallbackRung = 0
	}
	return &problem{inst: inst, chans: map[string]int32{}, groups: map[group]int32{}, room: in.RoomMean}
}

// addViewers adds g's viewers as if they were at lat, lon, last on server
// position prev (-1: none).
func (p *problem) addViewers(g *viewerGroup, v *Viewers, prev int32, lat, lon float64) {
	ch := int32(-1) // no channel: no share of any origin pull
	if g.channel >= 0 {
		name := v.chans[g.channel]
		var ok bool
		if ch, ok = p.chans[name]; !ok {
			ch = int32(len(p.chans))
			p.chans[name] = ch
		}
	}
	k := group{lat, lon, g.desired, g.danmaku, g.gift, ch, prev}
	for n := g.count; n > 0; {
		u, ok := p.groups[k]
		if !ok || p.inst.Users[u].Count >= p.maxCount() {
			u = int32(len(p.inst.Users))
			p.groups[k] = u
			user := qoe.User{Lat: lat, Lon: lon, Profile: qoe.Profile{DesiredKbps: g.desired, Danmaku: g.danmaku, Gift: g.gift},
				RoomMean: p.room, Ingest: -1, PrevServer: int(prev), Channel: ch}
			if prev >= 0 {
				user.PrevKbps = g.kbps
			}
			p.inst.Users = append(p.inst.Users, user)
		}
		add := min(n, int(p.maxCount()-p.inst.Users[u].Count))
		p.inst.Users[u].Count += int32(add)
		n -= add
	}
}

// maxCount is the most viewers one user may stand for: as the live
// planners chunk a class (allocator's maxChunk), a power of two no more
// than a thirty-second of the smallest server's bandwidth at the top rung,
// so that a user that does not fit whole loses little; without it a
// city's 600,000 viewers in a few groups could not fit anywhere whole.
// Servers come first in every problem, so it is known by the first user.
func (p *problem) maxCount() int32 {
	if p.chunk > 0 {
		return p.chunk
	}
	top := p.inst.Ladder[len(p.inst.Ladder)-1]
	least := p.least // stated, not what a host's viewers leave
	if least <= 0 {
		least = math.Inf(1)
		for _, s := range p.inst.Servers {
			if s.Bandwidth > 0 && s.Bandwidth < unlimited {
				least = math.Min(least, s.Bandwidth)
			}
		}
	}
	c := int32(64)
	for c > 1 && float64(c)*top*32 > least {
		c /= 2
	}
	p.chunk = c
	return c
}

// addServers adds what a host region's servers have left for the viewers
// of a lost city centred at at, which reach them over the backbone: the
// model prices a viewer's distance to a server as access network (its
// AccessPerKm, 0.1 s a km by default, which is why a city's servers cover
// a few kilometres), so the lost city's viewers are put at its centre and
// each host server where its access distance costs what the backbone's
// (BackbonePerKm) does over the real one.
func (p *problem) addServers(h *hostPlan, at topology.Location) {
	scale := 0.0
	if a := p.inst.Params.AccessPerKm; a > 0 {
		scale = p.inst.Params.BackbonePerKm / a
	}
	for i, srv := range h.inst.Servers {
		if b := srv.Bandwidth; b > 0 && b < unlimited && (p.least <= 0 || b < p.least) {
			p.least = b
		}
		d := geo.DistanceM(at.Lat, at.Lon, srv.Lat, srv.Lon) * scale
		srv.Lat, srv.Lon = at.Lat+d/111195, at.Lon // metres of latitude a degree
		srv.RadiusM, srv.Bandwidth, srv.Compute = anywhereM, h.leftBw[i], h.leftCPU[i]
		p.inst.Servers = append(p.inst.Servers, srv)
		p.regionOf = append(p.regionOf, h.region)
	}
}

// tallied is a solve's outcome for its viewers.
type tallied struct {
	viewers, planned, unplanned, atDesired int
	kbps                                   float64
	byRegion                               map[int32]Take
}

func (p *problem) tally(res *qoe.Result) tallied {
	t := tallied{byRegion: map[int32]Take{}}
	top := p.inst.Ladder[len(p.inst.Ladder)-1]
	for i, c := range res.Assign {
		u := &p.inst.Users[i]
		n := int(max(u.Count, 1))
		t.viewers += n
		if c.Server < 0 {
			t.unplanned += n
			continue
		}
		kbps := p.inst.Ladder[c.Rung]
		t.planned += n
		t.kbps += kbps * float64(n)
		if want := u.Profile.DesiredKbps; want <= 0 || kbps >= min(top, want) {
			t.atDesired += n
		}
		if p.regionOf != nil {
			r := p.regionOf[c.Server]
			tk := t.byRegion[r]
			tk.Viewers += n
			tk.Kbps += kbps * float64(n)
			t.byRegion[r] = tk
		}
	}
	return t
}

// hostPlan is a host region's own viewers of one service planned on its
// own servers, and what that leaves of each server.
type hostPlan struct {
	region             int32
	inst               *qoe.Instance
	leftBw, leftCPU    []float64
	viewers, atDesired int
	gap                float64
}

// hostPlan plans region h's viewers of svc on h's servers, once per Plan.
func (in *Input) hostPlan(ctx context.Context, svc, h int32) (*hostPlan, error) {
	key := [2]int32{svc, h}
	if hp, ok := in.hostPlans[key]; ok {
		return hp, nil
	}
	snap := in.Snap
	p := in.newProblem(svc)
	// A node's servers are one server of the solve, their capacities
	// summed: a plan of a region's loss is read a region at a time, and a
	// province's 10,000 servers as candidates of a lost city's viewers
	// made an option table of tens of gigabytes. Viewers last on one of
	// its servers were last on the node.
	pos := map[string]int32{}
	for _, ni := range snap.Regions[h].Nodes {
		node := &snap.Nodes[ni]
		srv := qoe.Server{Lat: node.Loc.Lat, Lon: node.Loc.Lon}
		n := 0
		for _, si := range node.Servers {
			sv := &snap.Servers[si]
			if !in.Up(si) || sv.Weight <= 0 || !snap.InPool(svc, si) {
				continue
			}
			r := sv.CoverageRadiusM
			if r <= 0 {
				r = anywhereM
			}
			srv.RadiusM = math.Max(srv.RadiusM, r)
			srv.Bandwidth += capacityOr(sv.Capacity.BandwidthMbps*1000, unlimited)
			srv.Compute += capacityOr(sv.Capacity.TranscodeUnits, unlimited)
			pos[sv.Name] = int32(len(p.inst.Servers))
			n++
		}
		if n > 0 {
			srv.Bandwidth, srv.Compute = math.Min(srv.Bandwidth, unlimited), math.Min(srv.Compute, unlimited)
			p.inst.Servers = append(p.inst.Servers, srv)
		}
	}
	in.eachGroup(h, func(g *viewerGroup, v *Viewers) {
		if g.svc != svc {
			return
		}
		prev := int32(-1)
		if g.server >= 0 {
			if at, ok := pos[v.servers[g.server]]; ok {
				prev = at
			}
		}
		p.addViewers(g, v, prev, g.lat, g.lon)
	})
	hp := &hostPlan{region: h, inst: p.inst, gap: math.NaN(),
		leftBw: make([]float64, len(p.inst.Servers)), leftCPU: make([]float64, len(p.inst.Servers))}
	for i, s := range p.inst.Servers {
		hp.leftBw[i], hp.leftCPU[i] = s.Bandwidth, s.Compute
	}
	if len(p.inst.Users) > 0 && len(p.inst.Servers) > 0 {
		res, err := in.solveOne(ctx, p.inst)
		if err != nil {
			return nil, err
		}
		hp.gap = res.Gap()
		t := p.tally(res)
		hp.viewers, hp.atDesired = t.viewers, t.atDesired
		for i, c := range res.Assign {
			if c.Server < 0 {
				continue
			}
			bw, cpu := p.inst.Uses(c.Rung)
			n := float64(max(p.inst.Users[i].Count, 1))
			hp.leftBw[c.Server] = math.Max(0, hp.leftBw[c.Server]-bw*n)
			hp.leftCPU[c.Server] = math.Max(0, hp.leftCPU[c.Server]-cpu*n)
		}
	} else {
		in.eachGroup(h, func(g *viewerGroup, _ *Viewers) {
			if g.svc == svc {
				hp.viewers += g.count // no server to plan them on: none at desired
			}
		})
	}
	in.hostPlans[key] = hp
	return hp, nil
}

// capacityOr is a stated capacity, or or when none is stated.
func capacityOr(c, or float64) float64 {
	if c > 0 {
		return c
	}
	return or
}
