package qoe

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"

	"github.com/anysched/anysched/internal/stb/geo"
)

// Params holds every symbol of the QoE model (Liu et al. 2023; docs/design.md). Units: seconds,
// kbps, abstract compute units (vCPU). The defaults' rationale is in
// docs/design.md, "Model parameters and their defaults". The yaml keys are
// those of a scheduler's alloc.model section, which decodes over
// DefaultParams: a key left out keeps its default.
type Params struct {
	A      float64 `yaml:"a"`          // a: weight of the interaction experience Q
	B      float64 `yaml:"b"`          // b: weight of the video quality U
	C      float64 `yaml:"c"`          // c: weight of the bitrate jitter E
	D      float64 `yaml:"d"`          // d: weight of the server switch S
	Theta  float64 `yaml:"theta_s"`    // theta: latency threshold (s)
	Lambda float64 `yaml:"lambda"`     // lambda: room-mean scale in I_v = F/(F+lambda*Fbar)
	B1     float64 `yaml:"b1"`         // b1: video-quality scale in U = ln(b1*min(r,Rhat)/Rhat)
	K      float64 `yaml:"k_per_kbps"` // k: jitter loss per kbps of bitrate decrease
	S      float64 `yaml:"s"`          // s: loss of one server switch
	Omega  float64 `yaml:"omega"`      // omega: gift weight in Y = log10(10 + omega*p)

	TIngest         float64 `yaml:"ingest_s"`                 // T(b_v, m_b): broadcaster uplink to its edge (s)
	BackboneBase    float64 `yaml:"backbone_base_s"`          // T(m_b, m) when m != m_b: fixed part (s)
	BackbonePerKm   float64 `yaml:"backbone_s_per_km"`        // T(m_b, m): per km of distance (s/km)
	BackboneOrigin  float64 `yaml:"origin_s"`                 // T(m_b, m) when the broadcaster enters via the origin (m_b = -1)
	AccessBase      float64 `yaml:"access_base_s"`            // T(m, v): fixed radio/access part (s)
	AccessPerKm     float64 `yaml:"access_s_per_km"`          // T(m, v): per km of server-user distance (s/km)
	G               float64 `yaml:"transcode_s_per_kbps"`     // G: transcoding delay per kbps reduced (s/kbps)
	H               float64 `yaml:"transcode_units_per_kbps"` // H: transcoding compute per kbps reduced (units/kbps)
	FallbackLatency float64 `yaml:"fallback_latency_s"`       // end-to-end latency of the regional fallback (s)
	FallbackRung    int     `yaml:"-"`                        // ladder index the fallback serves

	// OriginCost is the shared origin cost: objective units per pull, one
	// pull per (server, channel) with at least one viewer on that server
	// (User.Channel). 0 (the default) turns it off: User.Channel is then
	// not read and every solver behaves as without it.
	OriginCost float64 `yaml:"origin_cost"`
}

// DefaultParams returns the documented defaults (docs/design.md, "Model
// parameters and their defaults").
func DefaultParams() Params {
	return Params{
		A: 10, B: 1, C: 1, D: 1,
		Theta: 0.4, Lambda: 20, B1: 150, K: 2e-4, S: 0.5, Omega: 1,
		TIngest: 0.05, BackboneBase: 0.02, BackbonePerKm: 1e-5, BackboneOrigin: 0.06,
		AccessBase: 0.01, AccessPerKm: 0.1,
		G: 2e-5, H: 1e-3,
		FallbackLatency: 0.8, FallbackRung: 0,
	}
}

// DefaultLadder is the bitrate ladder r_1 < ... < r_K = R in kbps
// (480p, 720p, 1080p).
func DefaultLadder() []float64 { return []float64{1200, 2500, 5000} }

// Profile is what the business platform knows about a viewer.
type Profile struct {
	DesiredKbps float64 `yaml:"desired_kbps"`     // Rhat_v
	Danmaku     float64 `yaml:"danmaku_per_hour"` // F_v, danmaku per hour
	Gift        float64 `yaml:"gift"`             // p_v, gift spend
}

// User is one active session.
type User struct {
	Lat, Lon   float64
	Profile    Profile
	RoomMean   float64 // Fbar of the user's room (per capita per hour)
	Ingest     int     // m_b: server index of the broadcaster's edge, -1 = origin
	PrevServer int     // server last period, -1 = none or fallback
	PrevKbps   float64 // R_prev, 0 = none (new session)
	// Channel is the channel watched: with Params.OriginCost > 0 the
	// viewers of one channel on one server share one origin pull. Any
	// value >= 0 names a channel (they need not be dense); negative: none
	// (the user pays no share of any pull). Read only when OriginCost > 0,
	// so callers that never set it keep the model without the cost; when
	// setting OriginCost, set Channel for every user (its zero value is
	// channel 0).
	Channel int32
	// Count is how many identical viewers the user stands for (0 or 1:
	// one). Every one of them takes the user's choice: its value and its
	// use of a server's capacities are Count times one viewer's. The live
	// planner gives the viewers it cannot tell apart (same place, profile,
	// channel and previous choice) a few users of such counts instead of
	// a user each (docs/design.md, "Planning a city of 600,000").
	Count int32
}

// MaxCount bounds User.Count.
const MaxCount = 1 << 20

// count is the number of viewers user v stands for.
func (in *Instance) count(v int) float64 {
	if c := in.Users[v].Count; c > 1 {
		return float64(c)
	}
	return 1
}

// Server is one edge server.
type Server struct {
	Lat, Lon  float64
	RadiusM   float64 // coverage radius (m)
	Bandwidth float64 // D_m (kbps)
	Compute   float64 // C_m (units)
	// Excluded servers are no user's candidate (another service's pool):
	// kept so that server positions stay those of the caller's list.
	Excluded bool
}

// Instance is one period's allocation problem.
type Instance struct {
	Params  Params
	Ladder  []float64 // ascending, kbps; the last is the source bitrate R
	Servers []Server
	Users   []User

	cand     [][]int32   // M(v), lazily computed
	candDist [][]float64 // geo.DistanceM(v, m) for m in M(v)
	candIng  [][]float64 // geo.DistanceM(m_b, m) for m in M(v), m_b = Ingest >= 0 (else 0)
	candKey  candKey     // what cand was computed for
	srvCos   []float64   // geo.CosLat per server
	reuse    *candReuse  // a previous period's lists, by user position and ingest (Planner)
}

// candReuse is a previous instance's candidate lists by user position and
// ingest server, for an instance whose servers have the same positions,
// radii and exclusions.
type candReuse struct {
	at   map[[3]float64]int32
	cand [][]int32
	dist [][]float64
	ing  [][]float64
}

// reuseKey is what a user's candidate lists depend on.
func reuseKey(u *User) [3]float64 { return [3]float64{u.Lat, u.Lon, float64(u.Ingest)} }

// Choice is one user's decision: Server = -1 means fallback.
type Choice struct {
	Server int
	Rung   int
}

// Price is the dual price of one server's two capacities (objective units per
// kbps and per compute unit).
type Price struct {
	Bandwidth float64
	Compute   float64
}

// Result is what a Solver returns.
type Result struct {
	Assign    []Choice
	Objective float64
	Bound     float64 // upper bound on the optimum; NaN when unknown
	Prices    []Price // per server; nil when the solver has none
	Iter      int
}

// Gap returns (Bound-Objective)/max(1,|Bound|), or NaN without a bound.
func (r *Result) Gap() float64 {
	if math.IsNaN(r.Bound) {
		return math.NaN()
	}
	return (r.Bound - r.Objective) / math.Max(1, math.Abs(r.Bound))
}

// Solver solves an instance.
type Solver interface {
	Name() string
	Solve(ctx context.Context, inst *Instance) (*Result, error)
}

// Fallback is the Server value of a fallback choice.
const Fallback = -1

// Validate checks the instance's shape.
func (in *Instance) Validate() error {
	if len(in.Ladder) == 0 {
		return fmt.Errorf("qoe: empty ladder")
	}
	if !sort.Float64sAreSorted(in.Ladder) || in.Ladder[0] <= 0 {
		return fmt.Errorf("qoe: ladder must be positive ascending")
	}
	if in.Params.FallbackRung < 0 || in.Params.FallbackRung >= len(in.Ladder) {
		return fmt.Errorf("qoe: fallback rung out of range")
	}
	// A negative cost would reward pulls: the bound's argument (the cost
	// only lowers the objective of an assignment) needs it >= 0.
	if in.Params.OriginCost < 0 {
		return fmt.Errorf("qoe: origin cost %v is negative", in.Params.OriginCost)
	}
	// Every number must be finite: one Inf or NaN (a capacity of 1e308
	// times 1000, say) spreads through prices and objective and every
	// period would fail. Values that are finite but huge are the callers'
	// to bound (topology and config ranges).
	if err := in.checkFinite(); err != nil {
		return err
	}
	for i, u := range in.Users {
		if u.Profile.DesiredKbps <= 0 {
			return fmt.Errorf("qoe: user %d: desired bitrate must be > 0", i)
		}
		if u.Count < 0 || u.Count > MaxCount {
			return fmt.Errorf("qoe: user %d: count %d is out of range [0, %d]", i, u.Count, MaxCount)
		}
		if u.Ingest >= len(in.Servers) || u.PrevServer >= len(in.Servers) {
			return fmt.Errorf("qoe: user %d: server index out of range", i)
		}
	}
	return nil
}

func (in *Instance) checkFinite() error {
	p := in.Params
	for _, x := range []float64{p.A, p.B, p.C, p.D, p.Theta, p.Lambda, p.B1, p.K, p.S, p.Omega, p.TIngest, p.BackboneBase,
		p.BackbonePerKm, p.BackboneOrigin, p.AccessBase, p.AccessPerKm, p.G, p.H, p.FallbackLatency, p.OriginCost} {
		if !finite(x) {
			return fmt.Errorf("qoe: a model parameter is %v, not a finite number", x)
		}
	}
	for _, r := range in.Ladder {
		if !finite(r) {
			return fmt.Errorf("qoe: ladder bitrate %v is not a finite number", r)
		}
	}
	for i, s := range in.Servers {
		if !finite(s.Lat) || !finite(s.Lon) || !finite(s.RadiusM) || !finite(s.Bandwidth) || !finite(s.Compute) {
			return fmt.Errorf("qoe: server %d: %+v has a number that is not finite", i, s)
		}
	}
	for i, u := range in.Users {
		if !finite(u.Lat) || !finite(u.Lon) || !finite(u.RoomMean) || !finite(u.PrevKbps) ||
			!finite(u.Profile.DesiredKbps) || !finite(u.Profile.Danmaku) || !finite(u.Profile.Gift) {
			return fmt.Errorf("qoe: user %d: %+v has a number that is not finite", i, u)
		}
	}
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Candidates returns M(v): the servers whose radius covers each user
// (computed once, with a grid index, and cached: do not change Users or
// Servers of an instance after its first solve; build a new Instance).
func (in *Instance) Candidates() [][]int32 {
	in.candidates()
	return in.cand
}

// candidates computes (or reuses) cand and candDist, the distance in metres
// from each user to each of its candidate servers (exactly DistanceM).
func (in *Instance) candidates() {
	key := candKey{nu: len(in.Users), ns: len(in.Servers)}
	if len(in.Users) > 0 {
		key.users = &in.Users[0]
	}
	if len(in.Servers) > 0 {
		key.servers = &in.Servers[0]
	}
	if in.cand != nil && in.candKey == key {
		return
	}
	maxR := 0.0
	for _, s := range in.Servers {
		maxR = math.Max(maxR, s.RadiusM)
	}
	cell := math.Max(maxR, 1) / 111000.0 // degrees of latitude
	// Cells are as wide in longitude as a radius at the servers' highest
	// latitude (2% more): a user there or nearer the equator needs its
	// cell's neighbours only, 9 cells instead of 21 of one degree-size.
	maxLat := 0.0
	for _, s := range in.Servers {
		maxLat = math.Max(maxLat, math.Abs(s.Lat))
	}
	cosRef := math.Max(math.Cos(math.Min(maxLat, 90)*math.Pi/180), 0.05) * 0.98
	lonCell := cell / cosRef
	type gkey struct{ a, b int }
	grid := map[gkey][]int32{}
	for i, s := range in.Servers {
		if s.Excluded {
			continue
		}
		k := gkey{int(math.Floor(s.Lat / cell)), int(math.Floor(s.Lon / lonCell))}
		grid[k] = append(grid[k], int32(i))
	}
	// Pre-filter: for radii up to 10 km away from the poles the
	// equirectangular approximation (with the user's cos(lat)) is within
	// 0.5% of the great-circle distance; pairs more than 1% outside the
	// radius skip the exact haversine, every other pair is checked exactly
	// as Covers does.
	const earthR = geo.EarthRadiusM
	const rad = math.Pi / 180
	approx := maxR <= 10000
	scos := make([]float64, len(in.Servers))
	for m, s := range in.Servers {
		scos[m] = geo.CosLat(s.Lat)
		if math.Abs(s.Lat) > 80 {
			approx = false
		}
	}
	cand := make([][]int32, len(in.Users))
	dist := make([][]float64, len(in.Users))
	ing := make([][]float64, len(in.Users))
	// Users are independent: chunks of users on every core, each chunk's
	// lists cut from one slab (a few allocations per chunk, not per user).
	scratch := make([]struct {
		c []int32
		d []float64
	}, runtime.GOMAXPROCS(0))
	// Users at one place with one ingest server share their lists: the
	// live planner's users are a few per class of viewers, and a city's
	// classes sit at a few tens of places.
	rep := make([]int32, len(in.Users))
	at := map[[3]float64]int32{}
	for v := range in.Users {
		k := reuseKey(&in.Users[v])
		r, ok := at[k]
		if !ok {
			r = int32(v)
			at[k] = r
		}
		rep[v] = r
	}
	newPool(len(in.Users), 512, len(scratch)).run(func(w, _, lo, hi int) {
		// the chunk's lists go to the worker's scratch, then to one slab of
		// exactly their size
		c, d := scratch[w].c[:0], scratch[w].d[:0]
		var ends [512 + 1]int
		var reused [512]bool
		for v := lo; v < hi; v++ {
			u := &in.Users[v]
			if rep[v] != int32(v) {
				reused[v-lo] = true // set below, from its place's first user
				ends[v-lo+1] = len(c)
				continue
			}
			if in.reuse != nil {
				if j, ok := in.reuse.at[reuseKey(u)]; ok {
					cand[v], dist[v], ing[v] = in.reuse.cand[j], in.reuse.dist[j], in.reuse.ing[j]
					reused[v-lo] = true
					ends[v-lo+1] = len(c)
					continue
				}
			}
			la := int(math.Floor(u.Lat / cell))
			ucos := geo.CosLat(u.Lat)
			// the radius in longitude at the user's latitude, in cells:
			// within 1% (as the pre-filter), plus one cell where it is not
			// used (radii over 10 km, near the poles)
			coslat := math.Max(ucos, 0.05)
			span := int(math.Ceil(1.01 * cosRef / coslat))
			if !approx {
				span++
			}
			lc := int(math.Floor(u.Lon / lonCell))
			at := len(c)
			for a := la - 1; a <= la+1; a++ {
				for b := lc - span; b <= lc+span; b++ {
					for _, m := range grid[gkey{a, b}] {
						s := &in.Servers[m]
						if approx {
							dy := (s.Lat - u.Lat) * rad * earthR
							dx := (s.Lon - u.Lon) * rad * earthR * ucos
							lim := s.RadiusM*1.01 + 1
							if math.Abs(dy) > lim || dx*dx+dy*dy > lim*lim {
								continue
							}
						}
						if dm := geo.DistanceCosM(u.Lat, u.Lon, ucos, s.Lat, s.Lon, scos[m]); dm <= s.RadiusM {
							c = append(c, m)
							d = append(d, dm)
						}
					}
				}
			}
			if bs := (byServer{c[at:], d[at:]}); !sort.IsSorted(bs) {
				sort.Sort(bs)
			}
			ends[v-lo+1] = len(c)
		}
		slabC, slabD := append([]int32(nil), c...), append([]float64(nil), d...)
		slabI := make([]float64, len(c))
		for v := lo; v < hi; v++ {
			if reused[v-lo] {
				continue
			}
			a, b := ends[v-lo], ends[v-lo+1]
			cand[v], dist[v], ing[v] = slabC[a:b:b], slabD[a:b:b], slabI[a:b:b]
			if mb := in.Users[v].Ingest; mb >= 0 {
				sb := &in.Servers[mb]
				for i, m := range cand[v] {
					if int(m) != mb {
						s := &in.Servers[m]
						ing[v][i] = geo.DistanceCosM(sb.Lat, sb.Lon, scos[mb], s.Lat, s.Lon, scos[m])
					}
				}
			}
		}
		scratch[w].c, scratch[w].d = c, d
	})
	for v, r := range rep {
		if r != int32(v) {
			cand[v], dist[v], ing[v] = cand[r], dist[r], ing[r]
		}
	}
	in.cand, in.candDist, in.candIng, in.candKey, in.srvCos = cand, dist, ing, key, scos
}

type candKey struct {
	nu, ns  int
	users   *User
	servers *Server
}

type byServer struct {
	m []int32
	d []float64
}

func (b byServer) Len() int           { return len(b.m) }
func (b byServer) Less(i, j int) bool { return b.m[i] < b.m[j] }
func (b byServer) Swap(i, j int) {
	b.m[i], b.m[j] = b.m[j], b.m[i]
	b.d[i], b.d[j] = b.d[j], b.d[i]
}

// Covers reports whether server m covers user v.
func (in *Instance) Covers(v, m int) bool {
	u, s := in.Users[v], in.Servers[m]
	return geo.DistanceM(u.Lat, u.Lon, s.Lat, s.Lon) <= s.RadiusM
}

// Latency is L(v,m,r) in seconds; m = Fallback gives FallbackLatency.
func (in *Instance) Latency(v, m, k int) float64 {
	p := &in.Params
	if m == Fallback {
		return p.FallbackLatency
	}
	u, s := &in.Users[v], &in.Servers[m]
	bb := in.backbone(v, m)
	acc := p.AccessBase + p.AccessPerKm*geo.DistanceM(u.Lat, u.Lon, s.Lat, s.Lon)/1000
	return in.latency(bb, acc, k)
}

// backbone is T(m_b, m) for user v on server m.
func (in *Instance) backbone(v, m int) float64 {
	p := &in.Params
	u := &in.Users[v]
	switch {
	case u.Ingest < 0:
		return p.BackboneOrigin
	case u.Ingest == m:
		return 0
	default:
		sb, s := &in.Servers[u.Ingest], &in.Servers[m]
		return p.BackboneBase + p.BackbonePerKm*geo.DistanceM(sb.Lat, sb.Lon, s.Lat, s.Lon)/1000
	}
}

// latency is L from its backbone and access parts (the one formula used by
// Latency and by the option table, so that both agree to the bit).
func (in *Instance) latency(bb, acc float64, k int) float64 {
	p := &in.Params
	R := in.Ladder[len(in.Ladder)-1]
	return p.TIngest + bb + acc + (R-in.Ladder[k])*p.G
}

// Interaction is I_v.
func (in *Instance) Interaction(v int) float64 {
	u := &in.Users[v]
	den := u.Profile.Danmaku + in.Params.Lambda*u.RoomMean
	if den <= 0 {
		return 0
	}
	return u.Profile.Danmaku / den
}

// Weight is Y_v = log10(10 + omega*p_v).
func (in *Instance) Weight(v int) float64 {
	return math.Log10(10 + in.Params.Omega*math.Max(0, in.Users[v].Profile.Gift))
}

// QoE is QoE(v,m,r_k) (unweighted); m = Fallback uses the fallback latency
// and FallbackRung (k is ignored).
func (in *Instance) QoE(v, m, k int) float64 {
	if m == Fallback {
		k = in.Params.FallbackRung
	}
	return in.qoe(in.Latency(v, m, k), in.Interaction(v), in.quality(v, k), in.jitter(v, k), in.switchLoss(v, m))
}

// quality is U, jitter is E and switchLoss is S of the model.
func (in *Instance) quality(v, k int) float64 {
	rh := in.Users[v].Profile.DesiredKbps
	return math.Log(in.Params.B1 * math.Min(in.Ladder[k], rh) / rh)
}

func (in *Instance) jitter(v, k int) float64 {
	return in.Params.K * math.Max(0, in.Users[v].PrevKbps-in.Ladder[k])
}

func (in *Instance) switchLoss(v, m int) float64 {
	if u := &in.Users[v]; u.PrevServer >= 0 && u.PrevServer != m {
		return in.Params.S
	}
	return 0
}

// qoe combines the terms: a*Q + b*U - c*E - d*S with Q = (theta - L)*I.
func (in *Instance) qoe(L, I, U, E, S float64) float64 {
	p := &in.Params
	q := (p.Theta - L) * I
	return p.A*q + p.B*U - p.C*E - p.D*S
}

// Value is Y_v * QoE(v,m,r_k), the user's contribution to the objective
// (times its Count).
func (in *Instance) Value(v, m, k int) float64 {
	x := in.Weight(v) * in.QoE(v, m, k)
	if c := in.Users[v].Count; c > 1 {
		x *= float64(c)
	}
	return x
}

// bwUse and cpuUse are a choice's consumption of D_m and C_m.
func (in *Instance) bwUse(k int) float64 { return in.Ladder[k] }
func (in *Instance) cpuUse(k int) float64 {
	return (in.Ladder[len(in.Ladder)-1] - in.Ladder[k]) * in.Params.H
}

// capacity tolerance: loads may exceed a capacity by this relative amount
// (floating-point sums).
const capTol = 1e-9

// Evaluate computes the objective of an assignment and checks it: one choice
// per user, a covering server (or fallback), and both capacities per server.
// With Params.OriginCost > 0 the objective is net of the origin pulls
// (OriginPulls) at that cost each.
func Evaluate(in *Instance, assign []Choice) (objective float64, feasible bool, violations []string) {
	if len(assign) != len(in.Users) {
		return math.Inf(-1), false, []string{fmt.Sprintf("assignment has %d entries for %d users", len(assign), len(in.Users))}
	}
	bw := make([]float64, len(in.Servers))
	cpu := make([]float64, len(in.Servers))
	for v, c := range assign {
		if c.Server == Fallback {
			objective += in.Value(v, Fallback, in.Params.FallbackRung)
			continue
		}
		if c.Server < 0 || c.Server >= len(in.Servers) || c.Rung < 0 || c.Rung >= len(in.Ladder) {
			violations = append(violations, fmt.Sprintf("user %d: invalid choice %+v", v, c))
			continue
		}
		if !in.Covers(v, c.Server) {
			violations = append(violations, fmt.Sprintf("user %d: server %d does not cover it", v, c.Server))
		}
		bw[c.Server] += in.count(v) * in.bwUse(c.Rung)
		cpu[c.Server] += in.count(v) * in.cpuUse(c.Rung)
		objective += in.Value(v, c.Server, c.Rung)
	}
	if in.Params.OriginCost > 0 {
		pulls, _ := OriginPulls(in, assign)
		objective -= in.Params.OriginCost * float64(pulls)
	}
	for m, s := range in.Servers {
		if bw[m] > s.Bandwidth*(1+capTol)+1e-9 {
			violations = append(violations, fmt.Sprintf("server %d: bandwidth %.6g > %.6g", m, bw[m], s.Bandwidth))
		}
		if cpu[m] > s.Compute*(1+capTol)+1e-9 {
			violations = append(violations, fmt.Sprintf("server %d: compute %.6g > %.6g", m, cpu[m], s.Compute))
		}
	}
	return objective, len(violations) == 0, violations
}

// options is the flat table of every (v, m, k) a user may take; options that
// can never fit a server (r_k > D_m or (R-r_k)H > C_m) are left out. A
// user's options are sorted by server, then rung.
type options struct {
	nk    int     // ladder rungs
	start []int32 // per user, len n+1
	srv   []int32 // server of each option
	rung  []uint8 // ladder index
	// use is the option's use class: a rung taken by a number of viewers
	// (User.Count). Its capacity use is ubw[use], ucpu[use]. Without
	// counts the classes are the rungs (use = rung, nu = nk).
	use       []uint16
	nu        int
	ubw, ucpu []float64
	cix       []int32   // srv*nu + use: the option's entry in per-(server, use class) tables
	val       []float64 // Y*QoE
	// val32 is, on a large instance (more than largeOptions options),
	// every value as a float32 rounded up, for the dual's scan
	// (evaluator): it reads 8 bytes an option instead of 12 (the scan is
	// bound by memory), and a value rounded up can only raise the dual,
	// which stays an upper bound (by at most 1e-7 of it).
	val32 []float32
	fb    []float64 // fallback value per user
	org   *origin   // the shared origin cost's pairs; nil when OriginCost is 0
}

// buildOptions computes the table on every core (users are independent);
// the values are those of Value to the bit.
func buildOptions(in *Instance) *options { return buildOptionsInto(in, nil) }

// buildOptionsInto is buildOptions reusing old's arrays where they are
// large enough (a Planner's previous period: 8.2 million options are 170
// MB, and fresh memory costs page faults as well as the collector's work).
func buildOptionsInto(in *Instance, old *options) *options {
	in.candidates()
	cand, cdist := in.cand, in.candDist
	n, nk := len(in.Users), len(in.Ladder)
	p := &in.Params
	if old == nil {
		old = &options{}
	}
	o := &options{nk: nk, start: grow(old.start, n+1), fb: grow(old.fb, n)}
	// use classes: the rungs, then (count, rung) for every other count
	classOf := map[int32]int{1: 0} // count -> first class
	for k := range in.Ladder {
		o.ubw, o.ucpu = append(o.ubw, in.bwUse(k)), append(o.ucpu, in.cpuUse(k))
	}
	ucls := make([]uint16, n) // per user: its count's first class
	for v := range in.Users {
		c := max(in.Users[v].Count, 1)
		first, ok := classOf[c]
		if !ok {
			first = len(o.ubw)
			if first+nk > math.MaxUint16 {
				panic("qoe: too many distinct user counts")
			}
			classOf[c] = first
			for k := range in.Ladder {
				o.ubw, o.ucpu = append(o.ubw, float64(c)*in.bwUse(k)), append(o.ucpu, float64(c)*in.cpuUse(k))
			}
		}
		ucls[v] = uint16(first)
	}
	nu := len(o.ubw)
	o.nu = nu
	// fits[m*nk+k]: one viewer at rung k can ever fit server m. Users
	// standing for many viewers keep the options one of them fits, even
	// where all of them never could: the relaxation is then the one of
	// the viewers one by one, and its bound theirs (the plans only take
	// what fits).
	fits := make([]bool, len(in.Servers)*nk)
	for m, s := range in.Servers {
		for k := range in.Ladder {
			fits[m*nk+k] = in.bwUse(k) <= s.Bandwidth && in.cpuUse(k) <= s.Compute
		}
	}
	total := 0
	for v, c := range cand {
		o.start[v] = int32(total)
		for _, m := range c {
			for k := 0; k < nk; k++ {
				if fits[int(m)*nk+k] {
					total++
				}
			}
		}
		if total > math.MaxInt32 {
			panic("qoe: more than 2^31 options")
		}
	}
	o.start[n] = int32(total)
	o.srv = grow(old.srv, total)
	o.rung = grow(old.rung, total)
	o.use = grow(old.use, total)
	o.cix = grow(old.cix, total)
	o.val = grow(old.val, total)
	if total > largeOptions {
		o.val32 = grow(old.val32, total)
	}
	workers := runtime.GOMAXPROCS(0)
	scratch := make([]float64, 2*nk*workers)
	newPool(n, 1024, workers).run(func(w, _, lo, hi int) {
		U, E := scratch[2*nk*w:2*nk*w+nk], scratch[2*nk*w+nk:2*nk*(w+1)]
		for v := lo; v < hi; v++ {
			o.fb[v] = in.Value(v, Fallback, p.FallbackRung)
			wt, I := in.Weight(v), in.Interaction(v)
			cnt, uc := in.count(v), int32(ucls[v])
			for k := range in.Ladder {
				U[k], E[k] = in.quality(v, k), in.jitter(v, k)
			}
			i := o.start[v]
			for ci, m := range cand[v] {
				var bb float64
				switch u := &in.Users[v]; {
				case u.Ingest < 0 || u.Ingest == int(m):
					bb = in.backbone(v, int(m))
				default: // as backbone, with the distance computed with the candidates
					bb = p.BackboneBase + p.BackbonePerKm*in.candIng[v][ci]/1000
				}
				acc := p.AccessBase + p.AccessPerKm*cdist[v][ci]/1000
				S := in.switchLoss(v, int(m))
				for k := 0; k < nk; k++ {
					if !fits[int(m)*nk+k] {
						continue
					}
					o.srv[i] = m
					o.rung[i] = uint8(k)
					o.use[i] = uint16(uc) + uint16(k)
					o.cix[i] = m*int32(nu) + uc + int32(k)
					o.val[i] = wt * in.qoe(in.latency(bb, acc, k), I, U[k], E[k], S)
					if cnt != 1 {
						o.val[i] *= cnt
					}
					if o.val32 != nil {
						f := float32(o.val[i])
						if float64(f) < o.val[i] {
							f = math.Nextafter32(f, float32(math.Inf(1)))
						}
						o.val32[i] = f
					}
					i++
				}
			}
		}
	})
	if p.OriginCost > 0 {
		o.org = buildOrigin(in, o)
	}
	return o
}

// grow returns s resized to n, reusing its array when large enough (every
// element is then overwritten by the caller).
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// toChoices converts option indices (-1 = fallback) to Choices.
func (o *options) toChoices(in *Instance, sel []int32) []Choice {
	out := make([]Choice, len(sel))
	for v, i := range sel {
		if i < 0 {
			out[v] = Choice{Server: Fallback, Rung: in.Params.FallbackRung}
		} else {
			out[v] = Choice{Server: int(o.srv[i]), Rung: int(o.rung[i])}
		}
	}
	return out
}

func (o *options) value(v int, i int32) float64 {
	if i < 0 {
		return o.fb[v]
	}
	return o.val[i]
}
