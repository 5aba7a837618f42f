package qoe

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/anysched/anysched/internal/stb/geo"
)

// ValueFor must agree with Value to the bit: the live scheduler prices new
// sessions with it against the plan the solver made with Value.
func TestValueForMatchesValue(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for trial := 0; trial < 20; trial++ {
		in := &Instance{Params: DefaultParams(), Ladder: DefaultLadder()}
		for range 6 {
			in.Servers = append(in.Servers, Server{Lat: -37.81 + r.Float64()*0.01, Lon: 144.96 + r.Float64()*0.01, RadiusM: 800, Bandwidth: 1e4, Compute: 10})
		}
		for range 30 {
			u := User{
				Lat: -37.81 + r.Float64()*0.01, Lon: 144.96 + r.Float64()*0.01,
				Profile:  Profile{DesiredKbps: []float64{1200, 2500, 5000, 3000}[r.IntN(4)], Danmaku: float64(r.IntN(5)), Gift: float64(r.IntN(100))},
				RoomMean: r.Float64() * 0.1, Ingest: r.IntN(len(in.Servers)+1) - 1, PrevServer: r.IntN(len(in.Servers)+1) - 1,
			}
			if r.IntN(2) == 0 {
				u.PrevKbps = in.Ladder[r.IntN(len(in.Ladder))]
			}
			in.Users = append(in.Users, u)
		}
		for v := range in.Users {
			for m := Fallback; m < len(in.Servers); m++ {
				for k := range in.Ladder {
					got, want := in.ValueFor(&in.Users[v], m, k), in.Value(v, m, k)
					if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
						t.Fatalf("user %d server %d rung %d: ValueFor %v, Value %v", v, m, k, got, want)
					}
				}
			}
		}
	}
}

// ValuesFor must agree with ValueFor to the bit, fallback included, for
// users with and without a previous server and an ingest server.
func TestValuesForMatchesValueFor(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	in := &Instance{Params: DefaultParams(), Ladder: DefaultLadder()}
	for range 8 {
		in.Servers = append(in.Servers, Server{Lat: -37.81 + r.Float64()*0.01, Lon: 144.96 + r.Float64()*0.01, RadiusM: 800, Bandwidth: 1e4, Compute: 10})
	}
	nk := len(in.Ladder)
	out := make([]float64, len(in.Servers)*nk+1)
	dist := make([]float64, len(in.Servers))
	for v := range 200 {
		u := User{
			Lat: -37.81 + r.Float64()*0.01, Lon: 144.96 + r.Float64()*0.01,
			Profile:  Profile{DesiredKbps: []float64{1200, 2500, 5000, 3000}[r.IntN(4)], Danmaku: float64(r.IntN(5)), Gift: float64(r.IntN(100))},
			RoomMean: r.Float64() * 0.1, Ingest: r.IntN(len(in.Servers)+1) - 1, PrevServer: r.IntN(len(in.Servers)+1) - 1,
		}
		if r.IntN(2) == 0 {
			u.PrevKbps = in.Ladder[r.IntN(nk)]
		}
		for m, s := range in.Servers {
			dist[m] = geo.DistanceM(u.Lat, u.Lon, s.Lat, s.Lon)
		}
		in.ValuesFor(&u, dist, out)
		for m := range in.Servers {
			for k := range nk {
				if got, want := out[m*nk+k], in.ValueFor(&u, m, k); got != want {
					t.Fatalf("user %d server %d rung %d: ValuesFor %v, ValueFor %v", v, m, k, got, want)
				}
			}
		}
		if got, want := out[len(out)-1], in.ValueFor(&u, Fallback, 0); got != want {
			t.Fatalf("user %d fallback: ValuesFor %v, ValueFor %v", v, got, want)
		}
	}
}
