package qoe

import (
	"math"

	"github.com/anysched/anysched/internal/stb/geo"
)

// ValueFor is Value for a user that is not in the instance: Y_u * QoE(u, m,
// r_k), with m = Fallback for the regional fallback. The live scheduler uses
// it to price a session that arrives between two solves against the
// instance's servers and prices. It reads only Params, Ladder and Servers,
// so it is safe for concurrent use on an instance nobody modifies.
func (in *Instance) ValueFor(u *User, m, k int) float64 {
	p := &in.Params
	var L float64
	if m == Fallback {
		k = p.FallbackRung
		L = p.FallbackLatency
	} else {
		s := &in.Servers[m]
		bb := p.BackboneOrigin
		switch {
		case u.Ingest == m:
			bb = 0
		case u.Ingest >= 0:
			sb := &in.Servers[u.Ingest]
			bb = p.BackboneBase + p.BackbonePerKm*geo.DistanceM(sb.Lat, sb.Lon, s.Lat, s.Lon)/1000
		}
		L = in.latency(bb, p.AccessBase+p.AccessPerKm*geo.DistanceM(u.Lat, u.Lon, s.Lat, s.Lon)/1000, k)
	}
	var I float64
	if den := u.Profile.Danmaku + p.Lambda*u.RoomMean; den > 0 {
		I = u.Profile.Danmaku / den
	}
	rh := u.Profile.DesiredKbps
	U := math.Log(p.B1 * math.Min(in.Ladder[k], rh) / rh)
	E := p.K * math.Max(0, u.PrevKbps-in.Ladder[k])
	var S float64
	if u.PrevServer >= 0 && u.PrevServer != m {
		S = p.S
	}
	return math.Log10(10+p.Omega*math.Max(0, u.Profile.Gift)) * in.qoe(L, I, U, E, S)
}

// Uses returns what rung k takes from a server: D_m (kbps) and C_m (units).
func (in *Instance) Uses(k int) (bandwidth, compute float64) { return in.bwUse(k), in.cpuUse(k) }

// ValuesFor sets out[m*len(Ladder)+k] to ValueFor(u, m, k) for every server
// m and rung k, and out[len(Servers)*len(Ladder)] (out's last) to the
// fallback's, for u at distM[m] metres from server m (geo.DistanceM, which
// the caller computes once per place, not once per viewer). The values are
// ValueFor's to the bit, for a fraction of its cost: one logarithm per
// rung and per viewer, not one per value.
func (in *Instance) ValuesFor(u *User, distM, out []float64) {
	p := &in.Params
	nk := len(in.Ladder)
	var I float64
	if den := u.Profile.Danmaku + p.Lambda*u.RoomMean; den > 0 {
		I = u.Profile.Danmaku / den
	}
	wt := math.Log10(10 + p.Omega*math.Max(0, u.Profile.Gift))
	rh := u.Profile.DesiredKbps
	uk, ek := make([]float64, nk), make([]float64, nk)
	for k := range nk {
		uk[k] = math.Log(p.B1 * math.Min(in.Ladder[k], rh) / rh)
		ek[k] = p.K * math.Max(0, u.PrevKbps-in.Ladder[k])
	}
	for m := range in.Servers {
		bb := p.BackboneOrigin
		switch {
		case u.Ingest == m:
			bb = 0
		case u.Ingest >= 0:
			sb, s := &in.Servers[u.Ingest], &in.Servers[m]
			bb = p.BackboneBase + p.BackbonePerKm*geo.DistanceM(sb.Lat, sb.Lon, s.Lat, s.Lon)/1000
		}
		acc := p.AccessBase + p.AccessPerKm*distM[m]/1000
		var S float64
		if u.PrevServer >= 0 && u.PrevServer != m {
			S = p.S
		}
		for k := range nk {
			out[m*nk+k] = wt * in.qoe(in.latency(bb, acc, k), I, uk[k], ek[k], S)
		}
	}
	var S float64
	if u.PrevServer >= 0 { // as ValueFor: leaving its server for the fallback is a switch
		S = p.S
	}
	fk := p.FallbackRung
	out[len(in.Servers)*nk] = wt * in.qoe(p.FallbackLatency, I, uk[fk], ek[fk], S)
}
