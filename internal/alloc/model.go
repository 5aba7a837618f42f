package alloc

import (
	"context"
	"fmt"
	"math"
	"sort"
)

// Params holds every symbol of the ARCHITECTURE §6 model. Units: seconds,
// kbps, abstract compute units (vCPU). See doc.go for the defaults' rationale.
type Params struct {
	A      float64 // a: weight of the interaction experience Q
	B      float64 // b: weight of the video quality U
	C      float64 // c: weight of the bitrate jitter E
	D      float64 // d: weight of the server switch S
	Theta  float64 // theta: latency threshold (s)
	Lambda float64 // lambda: room-mean scale in I_v = F/(F+lambda*Fbar)
	B1     float64 // b1: video-quality scale in U = ln(b1*min(r,Rhat)/Rhat)
	K      float64 // k: jitter loss per kbps of bitrate decrease
	S      float64 // s: loss of one server switch
	Omega  float64 // omega: gift weight in Y = log10(10 + omega*p)

	TIngest         float64 // T(b_v, m_b): broadcaster uplink to its edge (s)
	BackboneBase    float64 // T(m_b, m) when m != m_b: fixed part (s)
	BackbonePerKm   float64 // T(m_b, m): per km of distance (s/km)
	BackboneOrigin  float64 // T(m_b, m) when the broadcaster enters via the origin (m_b = -1)
	AccessBase      float64 // T(m, v): fixed radio/access part (s)
	AccessPerKm     float64 // T(m, v): per km of server-user distance (s/km)
	G               float64 // G: transcoding delay per kbps reduced (s/kbps)
	H               float64 // H: transcoding compute per kbps reduced (units/kbps)
	FallbackLatency float64 // end-to-end latency of the regional fallback (s)
	FallbackRung    int     // ladder index the fallback serves
}

// DefaultParams returns the documented defaults (doc.go).
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
	DesiredKbps float64 // Rhat_v
	Danmaku     float64 // F_v, danmaku per hour
	Gift        float64 // p_v, gift spend
}

// User is one active session.
type User struct {
	Lat, Lon   float64
	Profile    Profile
	RoomMean   float64 // Fbar of the user's room (per capita per hour)
	Ingest     int     // m_b: server index of the broadcaster's edge, -1 = origin
	PrevServer int     // server last period, -1 = none or fallback
	PrevKbps   float64 // R_prev, 0 = none (new session)
}

// Server is one edge server.
type Server struct {
	Lat, Lon  float64
	RadiusM   float64 // coverage radius (m)
	Bandwidth float64 // D_m (kbps)
	Compute   float64 // C_m (units)
}

// Instance is one period's allocation problem.
type Instance struct {
	Params  Params
	Ladder  []float64 // ascending, kbps; the last is the source bitrate R
	Servers []Server
	Users   []User

	cand [][]int32 // M(v), lazily computed
}

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

// DistanceM is the great-circle distance in metres.
func DistanceM(lat1, lon1, lat2, lon2 float64) float64 {
	const r = 6371000.0
	p1, p2 := lat1*math.Pi/180, lat2*math.Pi/180
	dp, dl := p2-p1, (lon2-lon1)*math.Pi/180
	h := math.Sin(dp/2)*math.Sin(dp/2) + math.Cos(p1)*math.Cos(p2)*math.Sin(dl/2)*math.Sin(dl/2)
	return 2 * r * math.Asin(math.Min(1, math.Sqrt(h)))
}

// Validate checks the instance's shape.
func (in *Instance) Validate() error {
	if len(in.Ladder) == 0 {
		return fmt.Errorf("alloc: empty ladder")
	}
	if !sort.Float64sAreSorted(in.Ladder) || in.Ladder[0] <= 0 {
		return fmt.Errorf("alloc: ladder must be positive ascending")
	}
	if in.Params.FallbackRung < 0 || in.Params.FallbackRung >= len(in.Ladder) {
		return fmt.Errorf("alloc: fallback rung out of range")
	}
	for i, u := range in.Users {
		if u.Profile.DesiredKbps <= 0 {
			return fmt.Errorf("alloc: user %d: desired bitrate must be > 0", i)
		}
		if u.Ingest >= len(in.Servers) || u.PrevServer >= len(in.Servers) {
			return fmt.Errorf("alloc: user %d: server index out of range", i)
		}
	}
	return nil
}

// Candidates returns M(v): the servers whose radius covers each user
// (computed once, with a grid index).
func (in *Instance) Candidates() [][]int32 {
	if in.cand != nil && len(in.cand) == len(in.Users) {
		return in.cand
	}
	maxR := 0.0
	for _, s := range in.Servers {
		maxR = math.Max(maxR, s.RadiusM)
	}
	cell := math.Max(maxR, 1) / 111000.0 // degrees of latitude
	type key struct{ a, b int }
	grid := map[key][]int32{}
	for i, s := range in.Servers {
		k := key{int(math.Floor(s.Lat / cell)), int(math.Floor(s.Lon / cell))}
		grid[k] = append(grid[k], int32(i))
	}
	cand := make([][]int32, len(in.Users))
	for v, u := range in.Users {
		la := int(math.Floor(u.Lat / cell))
		coslat := math.Max(math.Cos(u.Lat*math.Pi/180), 0.05)
		span := int(math.Ceil(1/coslat)) + 1
		lo := int(math.Floor(u.Lon / cell))
		var c []int32
		for a := la - 1; a <= la+1; a++ {
			for b := lo - span; b <= lo+span; b++ {
				for _, m := range grid[key{a, b}] {
					s := in.Servers[m]
					if DistanceM(u.Lat, u.Lon, s.Lat, s.Lon) <= s.RadiusM {
						c = append(c, m)
					}
				}
			}
		}
		sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
		cand[v] = c
	}
	in.cand = cand
	return cand
}

// Covers reports whether server m covers user v.
func (in *Instance) Covers(v, m int) bool {
	u, s := in.Users[v], in.Servers[m]
	return DistanceM(u.Lat, u.Lon, s.Lat, s.Lon) <= s.RadiusM
}

// Latency is L(v,m,r) in seconds; m = Fallback gives FallbackLatency.
func (in *Instance) Latency(v, m, k int) float64 {
	p := &in.Params
	if m == Fallback {
		return p.FallbackLatency
	}
	u, s := &in.Users[v], &in.Servers[m]
	var bb float64
	switch {
	case u.Ingest < 0:
		bb = p.BackboneOrigin
	case u.Ingest == m:
		bb = 0
	default:
		sb := &in.Servers[u.Ingest]
		bb = p.BackboneBase + p.BackbonePerKm*DistanceM(sb.Lat, sb.Lon, s.Lat, s.Lon)/1000
	}
	acc := p.AccessBase + p.AccessPerKm*DistanceM(u.Lat, u.Lon, s.Lat, s.Lon)/1000
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
	p := &in.Params
	u := &in.Users[v]
	if m == Fallback {
		k = p.FallbackRung
	}
	r := in.Ladder[k]
	q := (p.Theta - in.Latency(v, m, k)) * in.Interaction(v)
	rh := u.Profile.DesiredKbps
	U := math.Log(p.B1 * math.Min(r, rh) / rh)
	E := p.K * math.Max(0, u.PrevKbps-r)
	var S float64
	if u.PrevServer >= 0 && u.PrevServer != m {
		S = p.S
	}
	return p.A*q + p.B*U - p.C*E - p.D*S
}

// Value is Y_v * QoE(v,m,r_k), the user's contribution to the objective.
func (in *Instance) Value(v, m, k int) float64 { return in.Weight(v) * in.QoE(v, m, k) }

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
		bw[c.Server] += in.bwUse(c.Rung)
		cpu[c.Server] += in.cpuUse(c.Rung)
		objective += in.Value(v, c.Server, c.Rung)
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
// can never fit a server (r_k > D_m or (R-r_k)H > C_m) are left out.
type options struct {
	start []int32   // per user, len n+1
	srv   []int32   // server of each option
	rung  []uint8   // ladder index
	val   []float64 // Y*QoE
	fb    []float64 // fallback value per user
}

func buildOptions(in *Instance) *options {
	cand := in.Candidates()
	n := len(in.Users)
	o := &options{start: make([]int32, n+1), fb: make([]float64, n)}
	total := 0
	for _, c := range cand {
		total += len(c) * len(in.Ladder)
	}
	o.srv = make([]int32, 0, total)
	o.rung = make([]uint8, 0, total)
	o.val = make([]float64, 0, total)
	for v := range in.Users {
		o.start[v] = int32(len(o.srv))
		o.fb[v] = in.Value(v, Fallback, in.Params.FallbackRung)
		for _, m := range cand[v] {
			s := &in.Servers[m]
			for k := range in.Ladder {
				if in.bwUse(k) > s.Bandwidth || in.cpuUse(k) > s.Compute {
					continue
				}
				o.srv = append(o.srv, m)
				o.rung = append(o.rung, uint8(k))
				o.val = append(o.val, in.Value(v, int(m), k))
			}
		}
	}
	o.start[n] = int32(len(o.srv))
	return o
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
