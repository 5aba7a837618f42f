package failplan_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/allocation/failplan"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// bigState is a city of n sessions over 400 zone places and 200 channels,
// three desired bitrates, each on the city's server at its desired rung.
func bigState(region, server string, lat, lon float64, n int) *store.AllocState {
	st := &store.AllocState{Made: time.Now(), Services: []store.ServiceState{{Name: "live"}}, Servers: []string{server}}
	st.Sessions = make([]store.SessionState, n)
	desired := [...]float64{1200, 2500, 5000}
	for i := range st.Sessions {
		z := i % 400
		st.Sessions[i] = store.SessionState{User: fmt.Sprint(i), Addr: netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)}),
			Channel: fmt.Sprint("ch", (i*7919)%200), Desired: desired[i%3], Danmaku: 1,
			Lat: lat + float64(z/20)*0.01, Lon: lon + float64(z%20)*0.01, Kbps: desired[i%3]}
	}
	return st
}

// BenchmarkSummarize: grouping a 600,000-session city's plan state, as the
// center does for each region it reads (reported: groups, and the heap the
// groups keep against the state's).
func BenchmarkSummarize(b *testing.B) {
	snap := fixture.CompileYAML(b, province, 1)
	st := bigState("hefei", "h1", 31.82, 117.23, 600_000)
	var v *failplan.Viewers
	for b.Loop() {
		v = failplan.Summarize(snap, st)
	}
	b.ReportMetric(float64(v.Groups()), "groups")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/600_000, "ns/session")
	var m0, m1 runtime.MemStats
	v = nil
	runtime.GC()
	runtime.ReadMemStats(&m0)
	v = failplan.Summarize(snap, st)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/(1<<20), "MiB-kept")
	runtime.KeepAlive(v)
	runtime.KeepAlive(st) // the state is the caller's until it drops it
}

// BenchmarkPlanProvinceLoss: every city's loss when hefei has 600,000
// viewers and wuhu 300,000 (1 s a solve).
func BenchmarkPlanProvinceLoss(b *testing.B) {
	snap := fixture.CompileYAML(b, province, 1)
	in := failplan.Input{Snap: snap, Budget: time.Second, Viewers: map[string]*failplan.Viewers{
		"hefei": failplan.Summarize(snap, bigState("hefei", "h1", 31.82, 117.23, 600_000)),
		"wuhu":  failplan.Summarize(snap, bigState("wuhu", "w1", 31.33, 118.38, 300_000)),
	}}
	for b.Loop() {
		rep, err := failplan.Plan(context.Background(), in)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Cities[0].Viewers != 600_000 {
			b.Fatal(rep.Cities[0])
		}
	}
}
