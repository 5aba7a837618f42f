package qoe

import "math"

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
			bb = p.BackboneBase + p.BackbonePerKm*DistanceM(sb.Lat, sb.Lon, s.Lat, s.Lon)/1000
		}
		L = in.latency(bb, p.AccessBase+p.AccessPerKm*DistanceM(u.Lat, u.Lon, s.Lat, s.Lon)/1000, k)
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
