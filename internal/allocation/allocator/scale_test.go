package allocator

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/heapuse"
)

// denseCity is one city as an operator sizes it: 5 nodes of 20 servers of
// 10 Gbps, every server covering every zone (the dense case), 64 zones of a
// /16 each, one QoE service with 200 channels.
func denseCity() string {
	var b strings.Builder
	b.WriteString(`anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: hefei, location: {lat: 31.82, lon: 117.23}}
nodes:
`)
	for n := range 5 {
		lat, lon := 31.82+0.05*math.Cos(float64(n)), 117.23+0.05*math.Sin(float64(n))
		fmt.Fprintf(&b, "  - name: hefei-%d\n    region: hefei\n    location: {lat: %.4f, lon: %.4f}\n    servers:\n", n, lat, lon)
		for s := range 20 {
			fmt.Fprintf(&b, "      - {name: s%d-%d, address: 10.1.%d.%d:8080, location: {lat: %.4f, lon: %.4f}, coverage_radius_m: 60000, capacity: {bandwidth_mbps: 10000, transcode_units: 400}}\n", n, s, n, s+1, lat, lon)
		}
	}
	b.WriteString("zones:\n")
	for z := range 64 {
		fmt.Fprintf(&b, "  - {name: z%d, region: hefei, networks: [100.%d.0.0/16], location: {lat: %.4f, lon: %.4f}}\n", z, 64+z, 31.82+0.15*math.Cos(float64(z)), 117.23+0.15*math.Sin(float64(z)))
	}
	b.WriteString(`services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/{bitrate}/index.m3u8"
    bitrates_kbps: [1200, 2500, 5000]
    selection: qoe
`)
	return b.String()
}

// TestScaleProbe measures one city's live planner at ALLOC_SCALE sessions
// (unset: skipped): cold solve, steady periods with 10% of viewers zapping,
// heap held. Run: ALLOC_SCALE=100000 go test -run TestScaleProbe -v.
func TestScaleProbe(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("ALLOC_SCALE"))
	if n <= 0 {
		t.Skip("set ALLOC_SCALE=N")
	}
	e := etcdtest.Start(t)
	eng := engineFor(t, denseCity())
	v, err := token.NewVerifier([]token.Key{key1}, token.Options{CacheSize: n + n/4})
	if err != nil {
		t.Fatal(err)
	}
	board := &store.ClaimBoard{Store: e.Store(), Region: "hefei", Instance: "probe", TTL: 10 * time.Second}
	timeout, _ := time.ParseDuration(os.Getenv("ALLOC_SOLVE_TIMEOUT")) // unset: the default
	a, err := New(Config{Region: "hefei", Instance: "probe", Verifier: v, Default: DefaultProfile(), SolveTimeout: timeout}, board, func() *steer.Engine { return eng }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, 199)
	type stb struct {
		addr netip.Addr
		tok  string
		ch   int
	}
	stbs := make([]stb, n)
	profiles := 12
	for i := range stbs {
		z, j := i%64, i/64 // distinct up to 64 x 65,536 STBs
		stbs[i].addr = netip.AddrFrom4([4]byte{100, byte(64 + z), byte(j >> 8), byte(j)})
		if rng.IntN(10) < 7 { // 70% with a token of one of 12 profiles
			p := rng.IntN(profiles)
			tok, err := token.Sign(key1, token.Claims{Subject: fmt.Sprintf("v%d", i), Expires: time.Now().Add(time.Hour),
				DesiredKbps: []float64{2500, 5000, 5000}[p%3], DanmakuPerHour: []float64{0.5, 1, 2, 4}[p/3], Gift: math.NaN()})
			if err != nil {
				t.Fatal(err)
			}
			stbs[i].tok = tok
		}
		stbs[i].ch = int(zipf.Uint64())
	}
	request := func(i int) {
		req := steer.Request{Client: stbs[i].addr, Host: "live.iptv.example", Path: "/ch" + strconv.Itoa(stbs[i].ch) + "/index.m3u8"}
		d := eng.Decide(req)
		if err := a.Allocate(eng, &d, req, stbs[i].tok); err != nil {
			t.Fatal(err)
		}
	}
	heap := func() float64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapInuse) / (1 << 20)
	}
	base := heap()
	start := time.Now()
	for i := range stbs {
		request(i)
	}
	t.Logf("%d sessions in %v; heap %.0f MB above the start", n, time.Since(start), heap()-base)
	type class struct {
		loc  [2]float64
		prof [3]float64
		ch   string
	}
	classes := map[class]int{}
	for _, s := range a.sessions.sweep(0) {
		classes[class{[2]float64{s.loc.Lat, s.loc.Lon}, [3]float64{s.profile.DesiredKbps, s.profile.Danmaku, s.profile.Gift}, s.key.channel}]++
	}
	chunks := 0
	for _, c := range classes {
		chunks += len(chunkSizes(c, 32))
	}
	t.Logf("%d classes, %d chunks of at most 32", len(classes), chunks)
	solve := func(what string) {
		start, cpu0 := time.Now(), cpuTime()
		a.Solve(context.Background())
		took, cpu1 := time.Since(start), cpuTime()
		st := a.Status()
		start = time.Now()
		sum := a.Summary() // the drain forecasts, made here, off the solve goroutine
		fTook, fCPU := time.Since(start), cpuTime()-cpu1
		t.Logf("%s: %v (plan out after %v, planner %v; process CPU %v), planned %d, gap %.4f (obj %.0f bound %.0f), heap %.0f MB (%.0f B/session); forecasts %v (CPU %v)", what, took, a.plan.Load().stats.PlanTime, a.plan.Load().stats.SolveTime, (cpu1 - cpu0).Round(time.Millisecond), st.PlannedN, sum.Gap, a.plan.Load().stats.Objective, a.plan.Load().stats.Bound, heap()-base, (heap()-base)*(1<<20)/float64(n), fTook, fCPU.Round(time.Millisecond))
	}
	solve("cold")
	// ALLOC_CPUPROFILE=FILE: a CPU profile of the steady periods alone
	// (requests and solves), not of the set-up.
	if f := os.Getenv("ALLOC_CPUPROFILE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	for period := range 3 {
		for range n / 10 {
			i := rng.IntN(n)
			stbs[i].ch = int(zipf.Uint64())
			request(i)
		}
		solve(fmt.Sprintf("steady %d", period+1))
	}
	// The whole process: the planner, the token cache, this test's STBs and
	// tokens, the embedded etcd member.
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmHWM:") || strings.HasPrefix(l, "VmRSS:") {
				t.Log(strings.Join(strings.Fields(l), " "))
			}
		}
	}
}

// TestTakeoverProbe measures the center taking over a fallen city of
// ALLOC_SCALE sessions (unset: skipped) and handing it back: the city
// plans and publishes its state; its route goes; the center's planner of
// the city gets an STB, adopts the state and plans; the route comes back
// and the city adopts the center's. Run: ALLOC_SCALE=600000 go test -run
// TestTakeoverProbe -v (ALLOC_LIVE=1: the heap each step holds at once).
func TestTakeoverProbe(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("ALLOC_SCALE"))
	if n <= 0 {
		t.Skip("set ALLOC_SCALE=N")
	}
	e := etcdtest.Start(t)
	eng := engineFor(t, denseCity())
	v, err := token.NewVerifier([]token.Key{key1}, token.Options{CacheSize: n + n/4})
	if err != nil {
		t.Fatal(err)
	}
	var routed atomic.Bool
	routed.Store(true)
	mk := func(id string, cfg Config) *Allocator {
		cfg.Region, cfg.Instance, cfg.Verifier, cfg.Default, cfg.States = "hefei", id, v, DefaultProfile(), e.Store()
		board := &store.ClaimBoard{Store: e.Store(), Region: "hefei", Instance: id, TTL: 10 * time.Second}
		a, err := New(cfg, board, func() *steer.Engine { return eng }, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	city := mk("hefei-1", Config{Routed: routed.Load})
	center := mk("center", Config{Rank: CenterRank, IdleNoReserve: true})
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, 199)
	ask := func(a *Allocator, i int) {
		req := steer.Request{Client: netip.AddrFrom4([4]byte{100, byte(64 + i%64), byte(i / 64 >> 8), byte(i / 64)}), Host: "live.iptv.example", Path: "/ch" + strconv.Itoa(int(zipf.Uint64())) + "/index.m3u8"}
		d := eng.Decide(req)
		if err := a.Allocate(eng, &d, req, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		ask(city, i)
	}
	ctx := context.Background()
	// Times under the default collector; ALLOC_LIVE=1 collects whenever the
	// heap grows by a tenth, so that the peak is what a step holds at once
	// (and its time is not the daemon's).
	measure, how := heapuse.Measure, "garbage included"
	if os.Getenv("ALLOC_LIVE") == "1" {
		measure, how = heapuse.MeasureLive, "live"
	}
	took := func(what string, f func()) {
		u := measure(f)
		t.Logf("%s: %v, heap peak %.0f MB above the start (%s)", what, u.Took, heapuse.MB(u.Peak), how)
	}
	took("city plans and publishes", func() { city.Solve(ctx) })
	routed.Store(false) // a drill: the city's route goes
	took("city goes idle (publishes its last plan)", func() { city.Solve(ctx) })
	if st, err := e.Store().AllocState(ctx, "hefei", "center"); err != nil || st == nil {
		t.Fatalf("the city's published state: %v, %v", st, err)
	} else {
		t.Logf("the city's published state: %d sessions", len(st.Sessions))
	}
	ask(center, 0) // the city's first STB at the center
	took("center takes over", func() { center.Solve(ctx) })
	st := center.plan.Load().stats
	t.Logf("center: planned %d, switches %d, drops %d, gap %.4f", st.Sessions, st.Switches, st.Drops, center.Summary().Gap)
	took("center plans a steady period", func() { center.Solve(ctx) })
	routed.Store(true) // the route comes back
	ask(city, 1)
	took("city takes its viewers back", func() { city.Solve(ctx) })
	st = city.plan.Load().stats
	t.Logf("city: planned %d, switches %d, drops %d, gap %.4f", st.Sessions, st.Switches, st.Drops, city.Summary().Gap)
}

// cpuTime is the CPU time this process has used (every thread: the
// solver's pool and the collector's workers count).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
