package qoe

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestScale100k: 100,000 users, 2,000 servers with the default solver
// settings (set QOE_SCALE=1: it needs ~0.5 GB and a few seconds). Targets:
// feasible, under 5 s, under 2 GB. Memory is the process's peak
// resident set (VmHWM, instance generation included) and the Go runtime's
// total obtained from the OS (MemStats.Sys, which never shrinks).
func TestScale100k(t *testing.T) {
	if os.Getenv("QOE_SCALE") == "" {
		t.Skip("set QOE_SCALE=1")
	}
	in := scaleInstance(rand.New(rand.NewPCG(21, 22)))
	runtime.GC()
	start := time.Now()
	res, err := Lagrangian{}.Solve(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	hwm := vmHWM(t)
	obj, ok, viol := Evaluate(in, res.Assign)
	if !ok {
		t.Fatalf("infeasible: %d violations, first %v", len(viol), viol[0])
	}
	if math.Abs(obj-res.Objective) > 1e-7*math.Abs(obj) || res.Bound < obj {
		t.Fatalf("objective %v (Evaluate %v), bound %v", res.Objective, obj, res.Bound)
	}
	fb := 0
	for _, c := range res.Assign {
		if c.Server == Fallback {
			fb++
		}
	}
	t.Logf("100k users / 2000 servers: %v, objective %.1f bound %.1f gap %.2f%%, iters %d, fallback %d, peak RSS %.0f MB, Go sys %.0f MB",
		el, obj, res.Bound, 100*res.Gap(), res.Iter, fb, float64(hwm)/1e6, float64(ms.Sys)/1e6)
	if el > 5*time.Second {
		t.Errorf("solve took %v > 5 s", el)
	}
	if hwm > 2<<30 || ms.Sys > 2<<30 {
		t.Errorf("memory over 2 GB: peak RSS %d, Go sys %d", hwm, ms.Sys)
	}
}

// vmHWM is the process's peak resident set in bytes (Linux; 0 elsewhere).
func vmHWM(t *testing.T) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	return 0
}

// scaleInstance: 100,000 users and 2,000 servers with 300 m radii on a
// 4.4 x 4.4 km area (~27 servers per user, 8.2 million options).
func scaleInstance(rng *rand.Rand) *Instance {
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
	return in
}
