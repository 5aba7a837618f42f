package alloc

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestScale100k: 100,000 users, 2,000 servers (set ALLOC_SCALE=1; the
// target is < 5 s and < 2 GB).
func TestScale100k(t *testing.T) {
	if os.Getenv("ALLOC_SCALE") == "" {
		t.Skip("set ALLOC_SCALE=1")
	}
	rng := rand.New(rand.NewPCG(21, 22))
	in := &Instance{Params: DefaultParams(), Ladder: DefaultLadder()}
	// ~4 x 4.4 km area, 300 m radius: ~15 servers per user as on EUA
	for m := 0; m < 2000; m++ {
		in.Servers = append(in.Servers, Server{Lat: -37.80 - rng.Float64()*0.04, Lon: 144.94 + rng.Float64()*0.05,
			RadiusM: 300, Bandwidth: 0.8 * 50 * 3465, Compute: 50 * 3.8})
	}
	for v := 0; v < 100000; v++ {
		in.Users = append(in.Users, User{Lat: -37.80 - rng.Float64()*0.04, Lon: 144.94 + rng.Float64()*0.05,
			Profile:  Profile{DesiredKbps: DefaultLadder()[rng.IntN(3)], Danmaku: float64(1 + rng.IntN(9)), Gift: float64(rng.IntN(2) * rng.IntN(100))},
			RoomMean: 0.01 + 0.12*rng.Float64(), Ingest: rng.IntN(2000), PrevServer: -1})
	}
	runtime.GC()
	start := time.Now()
	res, err := Lagrangian{}.Solve(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if _, ok, v := Evaluate(in, res.Assign); !ok {
		o := buildOptions(in)
		bad := 0
		for v := range in.Users {
			for i := o.start[v]; i < o.start[v+1]; i++ {
				if !in.Covers(v, int(o.srv[i])) {
					bad++
				}
			}
		}
		t.Fatal(v[:1], len(v), bad, res.Assign[689], in.Candidates()[689])
	}
	t.Logf("100k users / 2000 servers: %v, gap %.2f%%, iters %d, peak heap sys %.0f MB", el, 100*res.Gap(), res.Iter, float64(ms.Sys)/1e6)
	if el > 5*time.Second || ms.Sys > 2<<30 {
		t.Errorf("over target")
	}
}
