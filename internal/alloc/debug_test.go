package alloc

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"
)

func TestDebugScale(t *testing.T) {
	if os.Getenv("ALLOC_SCALE") == "" {
		t.Skip()
	}
	rng := rand.New(rand.NewPCG(21, 22))
	in := &Instance{Params: DefaultParams(), Ladder: DefaultLadder()}
	for m := 0; m < 2000; m++ {
		in.Servers = append(in.Servers, Server{Lat: -37.80 - rng.Float64()*0.04, Lon: 144.94 + rng.Float64()*0.05,
			RadiusM: 300, Bandwidth: 0.8 * 50 * 3465, Compute: 50 * 3.8})
	}
	for v := 0; v < 100000; v++ {
		in.Users = append(in.Users, User{Lat: -37.80 - rng.Float64()*0.04, Lon: 144.94 + rng.Float64()*0.05,
			Profile:  Profile{DesiredKbps: DefaultLadder()[rng.IntN(3)], Danmaku: float64(1 + rng.IntN(9)), Gift: float64(rng.IntN(2) * rng.IntN(100))},
			RoomMean: 0.01 + 0.12*rng.Float64(), Ingest: rng.IntN(2000), PrevServer: -1})
	}
	o := buildOptions(in)
	t.Logf("options %d", len(o.srv))
	res, _ := Lagrangian{}.Solve(context.Background(), in)
	bad := 0
	for v, c := range res.Assign {
		if c.Server >= 0 && !in.Covers(v, c.Server) {
			if bad < 5 {
				t.Logf("v=%d choice %+v start %d..%d", v, c, o.start[v], o.start[v+1])
			}
			bad++
		}
	}
	t.Logf("bad %d", bad)
}
