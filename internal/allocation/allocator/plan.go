package allocator

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/steer"
)

// plan is one solve's outcome, immutable once published except for the
// headroom counters new sessions draw on.
type plan struct {
	gen    uint64
	made   time.Time
	budget time.Duration // the solve's: solve_timeout, or cold_solve_timeout
	snap   *topology.Snapshot
	region int32
	// servers[pos] is the snapshot index of the pos-th server the solve
	// used (the region's available servers); pos[snapshot index] the
	// reverse, -1 for servers not used.
	servers []int32
	pos     []int32
	// cover[zone] lists the positions whose coverage contains the zone's
	// location (zones of the region only); coverCentre is for STBs placed
	// at the region's centre (no zone).
	cover       [][]int32
	coverCentre []int32
	services    []*servicePlan // by service index; nil unless selection qoe
	// groups[pos] are the sessions the plan keeps at pos, grouped by what
	// a price can tell apart (the drain forecast's unit).
	groups [][]group
	// Headroom of this instance's claims beyond the plan, per position:
	// bandwidth in kbps, compute in thousandths of a unit.
	bwLeft, cpuLeft []atomic.Int64
	stats           planStats
	// idle: no STB of the region reached the instance lately; the plan
	// places nobody (services are all nil) and claims only the reserve.
	idle bool
}

// release marks the session's place in plan gen given back; false when it
// was already.
func (s *session) release(gen uint64) bool {
	for {
		old := s.released.Load()
		if old == gen {
			return false
		}
		if s.released.CompareAndSwap(old, gen) {
			return true
		}
	}
}

// placeAt is the plan's shared assignment to position pos (-1: the
// fallback) at rung k.
func (sp *servicePlan) placeAt(p *plan, pos int32, k int) int {
	nk := len(sp.inst.Ladder)
	if sp.places == nil {
		sp.places = make([]*assignment, len(p.servers)*nk+1)
	}
	i := len(sp.places) - 1
	server := int32(-1)
	if pos >= 0 {
		i, server = int(pos)*nk+k, p.servers[pos]
	}
	if sp.places[i] == nil {
		sp.places[i] = &assignment{snap: p.snap, gen: p.gen, server: server, rung: k, kbps: sp.inst.Ladder[k]}
	}
	return i
}

// planned is a session's place in plan gen as a number (session.planned):
// the plan's generation (its low 32 bits) and its index in the service
// plan's places, plus one. A number, not a pointer: storing 600,000 of
// them a period pays no write barrier, and the collector has less to
// mark.
func planned(gen uint64, place int) uint64 { return uint64(uint32(gen))<<32 | uint64(place+1) }

// plannedOf is where plan p puts s, nil unless p's solve placed it.
func (p *plan) plannedOf(s *session) *assignment {
	v := s.planned.Load()
	if v == 0 || uint32(v>>32) != uint32(p.gen) || int(s.key.service) >= len(p.services) {
		return nil
	}
	sp := p.services[s.key.service]
	if i := int(uint32(v)) - 1; sp != nil && i < len(sp.places) {
		return sp.places[i]
	}
	return nil
}

// pull is a (server position, channel) pair the plan streams from the
// origin.
type pull struct{ pos, channel int32 }

type servicePlan struct {
	// With the model's origin cost on: the plan's channels (qoe.User's
	// Channel) and the pairs it pulls; a session priced onto a server
	// that does not pull its channel pays the cost.
	chans  map[string]int32
	pulls  map[pull]bool
	svc    int32              // the service (snapshot index)
	inst   *qoe.Instance      // Servers, Params, Ladder (read-only after the solve)
	prices []qoe.Price        // per position
	rooms  map[string]float64 // Fbar by channel
	room0  float64            // Fbar of a channel the solve did not see
	// places are the plan's assignments, by position and rung, the
	// fallback's last (placeAt); written by the solve only.
	places []*assignment
}

type planStats struct {
	Sessions, Fallback   int
	Starved              int // fallback sessions a server covers (lack of capacity)
	AtDesired            int // sessions on a server at or above their desired rung
	Switches, Drops      int // moved to another server, to a lower rung, by this plan
	HeldKbps, TotalKbps  float64
	OriginPulls          int     // (server, channel) pairs with a viewer
	OriginKbps           float64 // what they stream from the origin
	Objective, Bound     float64
	SolveTime            time.Duration // the solve of the QoE services
	PlanTime             time.Duration // from the sweep to the plan out (claims read and committed)
	UsersByServer        map[string]int
	UsageByServer        map[string][2]float64 // bandwidth kbps, compute
	ClaimByServer        map[string][2]float64
	CapacityByServer     map[string][2]float64 // after the peers' claims
	Peers                int
	SafeMode, Conflicted bool
}

// milli converts compute units to the integer headroom counters.
func milli(x float64) int64 { return int64(math.Ceil(x*1000 - 1e-6)) }

// take reserves a choice's use of position pos; false when it does not fit.
func (p *plan) take(pos int32, bw, cpu float64) bool {
	b, c := int64(math.Ceil(bw)), milli(cpu)
	for {
		lb := p.bwLeft[pos].Load()
		if lb < b {
			return false
		}
		if p.bwLeft[pos].CompareAndSwap(lb, lb-b) {
			break
		}
	}
	for {
		lc := p.cpuLeft[pos].Load()
		if lc < c {
			p.bwLeft[pos].Add(b) // give the bandwidth back
			return false
		}
		if p.cpuLeft[pos].CompareAndSwap(lc, lc-c) {
			return true
		}
	}
}

// release gives back the capacity of a session that ended (its viewer
// switched channel) when this plan accounts for it.
func (p *plan) release(s *session) {
	as := p.plannedOf(s) // planned: the plan accounts for it
	if as == nil {
		as = s.cur.Load() // priced under this plan, or nothing to give back
	}
	if as == nil || as.gen != p.gen || as.server < 0 || !s.release(p.gen) {
		return
	}
	pos := p.pos[as.server]
	if pos < 0 {
		return
	}
	sp := p.services[s.key.service]
	if sp == nil {
		return
	}
	bw, cpu := sp.inst.Uses(as.rung)
	p.bwLeft[pos].Add(int64(math.Ceil(bw)))
	p.cpuLeft[pos].Add(milli(cpu))
}

// carry keeps, in p (not yet published), the place a session the plan
// does not place was priced to by the plan before it: the same server and
// rung, its capacity taken here, when the server is in p and it fits.
func (p *plan) carry(s *session) {
	cur := s.cur.Load()
	if cur == nil || cur.gen == p.gen || cur.snap != p.snap || cur.server < 0 || p.plannedOf(s) != nil {
		return
	}
	pos := p.pos[cur.server]
	if pos < 0 || int(s.key.service) >= len(p.services) || p.services[s.key.service] == nil {
		return
	}
	bw, cpu := p.services[s.key.service].inst.Uses(cur.rung)
	if p.take(pos, bw, cpu) {
		s.cur.Store(&assignment{snap: p.snap, gen: p.gen, server: cur.server, rung: cur.rung, kbps: cur.kbps})
	}
}

// price returns the choice for a session the plan does not place: the
// highest value net of the plan's prices among covering, available servers
// with headroom left, or the fallback. The choice's capacity is reserved.
func (p *plan) price(eng *steer.Engine, sp *servicePlan, s *session, channel string, prof qoe.Profile, loc topology.Location, zone int32) *assignment {
	in := sp.inst
	u := qoe.User{Lat: loc.Lat, Lon: loc.Lon, Profile: prof, RoomMean: sp.roomOf(channel), Ingest: -1, PrevServer: -1, Channel: sp.channelOf(channel)}
	if s != nil {
		if cur := s.cur.Load(); cur != nil && cur.snap == p.snap {
			u.PrevKbps = cur.kbps
			if cur.server >= 0 {
				u.PrevServer = int(p.pos[cur.server])
			}
		}
	}
	cover := p.coverCentre
	if zone >= 0 {
		cover = p.cover[zone]
	}
	// The prices choose among the servers and rungs that fit (a cheaper rung
	// on a scarce server, or another server); the fallback only when none
	// fits or it would serve the viewer better than the best that does.
	for tries := 0; tries < 4; tries++ {
		bestPos, bestK, _ := choose(eng, sp, p.servers, cover, nil, p.bwLeft, p.cpuLeft, &u, nil)
		if bestPos < 0 {
			break
		}
		bw, cpu := in.Uses(bestK)
		if p.take(bestPos, bw, cpu) {
			return &assignment{snap: p.snap, gen: p.gen, server: p.servers[bestPos], rung: bestK, kbps: in.Ladder[bestK]}
		}
		// Another request took the headroom meanwhile: look again.
	}
	return &assignment{snap: p.snap, gen: p.gen, server: qoe.Fallback, rung: in.Params.FallbackRung, kbps: in.Ladder[in.Params.FallbackRung]}
}

// channelOf is the plan's index of channel (qoe.User's Channel); -1 for
// one the plan has no viewer of.
func (sp *servicePlan) channelOf(channel string) int32 {
	if ch, ok := sp.chans[channel]; ok {
		return ch
	}
	return -1
}
