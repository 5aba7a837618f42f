package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology/topogen"
)

// churn is how a city's viewers behave between two publications of its
// plan, in simulated time. The defaults are assumptions (the operator's
// own figures are not published): at prime time a viewer changes channel
// every 10 minutes on average, watches for an hour, and its STB asks the
// scheduler again about once a minute while it plays (it must, within
// alloc.session_ttl, 2 minutes, or its session ends); a plan moves one
// viewer in a hundred to another server or bitrate per publication.
type churn struct {
	ZapEvery     time.Duration // mean time between two channel changes of a viewer
	WatchFor     time.Duration // mean time a viewer watches before leaving (replaced by a new one: steady prime time)
	RequestEvery time.Duration // mean time between two requests of a playing STB
	MoveShare    float64       // share of the sessions a plan moves (server or bitrate) per publication
}

const channels = 200

// viewer is one STB playing at prime time, as the bench's planner knows it.
type viewer struct {
	user   string // as its token says: made once, as the allocator keeps it
	id     uint32 // its address
	prof   uint8  // index into profiles
	zone   uint16
	ch     uint16
	rung   uint8
	server int32 // -1: the fallback
	seen   int64 // unix milliseconds
}

// viewerProfiles are the viewers' token profiles (desired kbps, danmaku
// per hour, gift) and their weights (percent): few distinct ones, as a
// platform issues them; danmaku after the QoE paper's measurement (most
// viewers send one an hour, few ten or more).
func viewerProfiles() (profiles [][3]float64, weights []float64) {
	return [][3]float64{
			{0, 1, 0}, {0, 0, 0}, {3000, 1, 0}, {4500, 1, 0}, {2000, 1, 0}, {0, 3, 0}, {0, 1, 6}, {0, 8, 30},
			{6000, 1, 0}, {0, 20, 90}, {3000, 3, 6}, {0, 60, 990},
		},
		[]float64{40, 19, 8, 8, 6, 6, 4, 3, 2, 2, 1, 1}
}

// planCity is one city's plan as the bench simulates it.
type planCity struct {
	c        *city
	rng      *rand.Rand
	zipf     *rand.Zipf
	viewers  []viewer
	next     uint32 // the next viewer id
	prices   [][2]float64
	lastStep time.Time
	code     string // two letters for user names
	profiles [][3]float64
	weights  []float64
	channels []string // names, made once
}

func newPlanCity(c *city, seed uint64, now time.Time) *planCity {
	rng := rand.New(rand.NewPCG(seed, uint64(c.index)))
	p := &planCity{c: c, rng: rng, zipf: rand.NewZipf(rng, 1.1, 1, channels-1), lastStep: now,
		code: fmt.Sprintf("%c%c", 'a'+c.index%26, 'a'+c.index/26%26)}
	p.profiles, p.weights = viewerProfiles()
	for i := range channels {
		p.channels = append(p.channels, fmt.Sprintf("ch%03d", i))
	}
	p.viewers = make([]viewer, c.viewers)
	for i := range p.viewers {
		p.viewers[i] = p.newViewer(now.UnixMilli() - rng.Int64N(60_000))
	}
	p.prices = make([][2]float64, len(c.servers))
	for i := range p.prices {
		p.prices[i] = [2]float64{rng.Float64() * 1e-4, rng.Float64() * 1e-2}
	}
	return p
}

func (p *planCity) pickProfile() uint8 {
	x := p.rng.Float64() * 100
	for i, w := range p.weights {
		if x < w {
			return uint8(i)
		}
		x -= w
	}
	return 0
}

func (p *planCity) newViewer(seen int64) viewer {
	v := viewer{user: fmt.Sprintf("%s%09d", p.code, p.next), id: p.next, prof: p.pickProfile(), zone: uint16(p.rng.IntN(max(1, len(p.c.zones)))), seen: seen}
	p.next++
	p.place(&v)
	v.ch = uint16(p.zipf.Uint64())
	return v
}

// place gives v a server (a covering one: topogen's cover their whole city)
// and a rung, or the fallback (one in a hundred).
func (p *planCity) place(v *viewer) {
	v.rung = uint8(2 + p.rng.IntN(len(topogen.Bitrates)-2))
	if p.rng.IntN(100) == 0 || len(p.c.servers) == 0 {
		v.server, v.rung = -1, 0
		return
	}
	v.server = int32(p.rng.IntN(len(p.c.servers)))
}

// step moves the city's viewers on to now: departures (replaced by new
// viewers), channel changes (a new session: it may land elsewhere),
// requests (Seen moves) and the plan's moves; the prices drift.
func (p *planCity) step(now time.Time, ch churn) {
	dt := now.Sub(p.lastStep)
	p.lastStep = now
	if dt <= 0 {
		return
	}
	prob := func(mean time.Duration) float64 {
		if mean <= 0 {
			return 0
		}
		return 1 - math.Exp(-float64(dt)/float64(mean))
	}
	pLeave, pZap, pReq := prob(ch.WatchFor), prob(ch.ZapEvery), prob(ch.RequestEvery)
	ms, span := now.UnixMilli(), max(1, dt.Milliseconds())
	for i := range p.viewers {
		v := &p.viewers[i]
		switch x := p.rng.Float64(); {
		case x < pLeave:
			*v = p.newViewer(ms - p.rng.Int64N(span))
		case x < pLeave+pZap:
			v.ch = uint16(p.zipf.Uint64())
			v.seen = ms - p.rng.Int64N(span)
			if p.rng.IntN(2) == 0 { // priced anew: often elsewhere
				p.place(v)
			}
		default:
			if p.rng.Float64() < pReq {
				v.seen = ms - p.rng.Int64N(span)
			}
			if p.rng.Float64() < ch.MoveShare {
				p.place(v)
			}
		}
	}
	for i := range p.prices {
		p.prices[i][0] *= 1 + 0.05*(p.rng.Float64()-0.5)
		p.prices[i][1] *= 1 + 0.05*(p.rng.Float64()-0.5)
	}
}

// state is the plan as the allocator exports it (allocator.exportState):
// the region's servers, the live service's prices, every session.
func (p *planCity) state(instance string, now time.Time, revision int64) *store.AllocState {
	st := &store.AllocState{Instance: instance, Made: now, Revision: revision, Servers: p.c.servers,
		Services: []store.ServiceState{{Name: topogen.ServiceName, Prices: p.prices}}}
	st.Sessions = make([]store.SessionState, len(p.viewers))
	base := 10<<24 | uint32(p.c.index)<<20 // 10.<city>.x.x: a million STB addresses a city
	for i, v := range p.viewers {
		id := v.id % (1 << 20)
		a := base | id
		pr, z := p.profiles[v.prof], p.c.zones[v.zone]
		ss := store.SessionState{Service: 0, User: v.user, Addr: netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}),
			Channel: p.channels[v.ch], Desired: pr[0], Danmaku: pr[1], Gift: pr[2], Lat: z.Lat, Lon: z.Lon,
			Server: v.server, Kbps: float64(topogen.Bitrates[v.rung]), Seen: v.seen}
		st.Sessions[i] = ss
	}
	return st
}
