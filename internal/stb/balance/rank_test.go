package balance

import (
	"math"
	"testing"
	"time"
)

func TestRankNodesByDistance(t *testing.T) {
	from := Point{31.82, 117.23} // Hefei
	nodes := []NodeState{
		{Index: 0, Loc: Point{32.00, 117.23}, Servers: 2, Healthy: 2},                                       // ~20 km
		{Index: 1, Loc: Point{31.83, 117.23}, Servers: 2, Healthy: 2},                                       // ~1 km
		{Index: 2, Loc: Point{31.84, 117.23}, Servers: 4, Healthy: 1},                                       // ~2 km, 25% healthy
		{Index: 3, Loc: Point{31.85, 117.23}, Servers: 2, Healthy: 2, LoadMbps: 20000, CapacityMbps: 20000}, // ~3 km, full
		{Index: 4, Loc: Point{31.86, 117.23}, Servers: 2, Healthy: 0},                                       // ~4 km, dead
		{Index: 5, Loc: Point{33.00, 117.23}, Servers: 2, Healthy: 2, LoadMbps: 17000, CapacityMbps: 20000}, // ~130 km, 85%
	}
	got := RankNodes(nodes, from, RankOptions{Panic: 0.5})
	order := []int32{}
	for _, r := range got {
		order = append(order, r.Index)
	}
	want := []int32{1, 0, 5, 2, 3, 4}
	if !equal32(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	wantSkip := map[int32]Skip{1: SkipNone, 0: SkipNone, 5: SkipNone, 2: SkipPanic, 3: SkipOverCapacity, 4: SkipNoServer}
	for _, r := range got {
		if r.Skip != wantSkip[r.Index] {
			t.Errorf("node %d: skip %q, want %q", r.Index, r.Skip, wantSkip[r.Index])
		}
	}
	if math.Abs(got[0].Score-got[0].DistanceM/1000) > 1e-9 || got[0].DistanceM < 1000 || got[0].DistanceM > 1200 {
		t.Errorf("node 1: distance %v m, score %v", got[0].DistanceM, got[0].Score)
	}
	// A lower utilisation ceiling skips node 5 (85% loaded) too.
	for _, r := range RankNodes(nodes, from, RankOptions{Panic: 0.5, MaxUtilisation: 0.8}) {
		if r.Index == 5 && r.Skip != SkipOverCapacity {
			t.Errorf("node 5 at 85%% with ceiling 80%%: %q", r.Skip)
		}
	}
}

func equal32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRankNodesByRTTLoss(t *testing.T) {
	from := Point{31.82, 117.23}
	nodes := []NodeState{
		// Nearest but lossy: 2% loss costs as much as ~20ms.
		{Index: 0, Loc: Point{31.83, 117.23}, Servers: 2, Healthy: 2, Measured: true, RTT: 2 * time.Millisecond, Loss: 0.02},
		// Farther, clean.
		{Index: 1, Loc: Point{31.90, 117.23}, Servers: 2, Healthy: 2, Measured: true, RTT: 5 * time.Millisecond},
		// Unmeasured, 130 km: estimated 1.3ms RTT, no loss.
		{Index: 2, Loc: Point{33.00, 117.23}, Servers: 2, Healthy: 2},
	}
	got := RankNodes(nodes, from, RankOptions{By: RankRTTLoss})
	if got[0].Index != 2 || got[1].Index != 1 || got[2].Index != 0 {
		t.Fatalf("order %d %d %d, want 2 1 0", got[0].Index, got[1].Index, got[2].Index)
	}
	if got[0].Measured || got[0].RTT < 1200*time.Microsecond || got[0].RTT > 1400*time.Microsecond {
		t.Errorf("estimated RTT %v", got[0].RTT)
	}
	o := RankOptions{}.withDefaults()
	if d := RTTLossDistance(20*time.Millisecond, 0, o); d != 1 {
		t.Errorf("RTT at reference: %v", d)
	}
	if d := RTTLossDistance(0, 0.01, o); math.Abs(d-50*-math.Log(0.99)) > 1e-12 {
		t.Errorf("1%% loss: %v", d)
	}
	if d := RTTLossDistance(0, 1, o); !math.IsInf(d, 1) {
		t.Errorf("total loss: %v", d)
	}
	custom := RankOptions{RTTWeight: 0.7, LossWeight: 0.3, RTTRef: 10 * time.Millisecond}
	if d := RTTLossDistance(10*time.Millisecond, 0.5, custom); math.Abs(d-(0.7+0.3*math.Ln2)) > 1e-12 {
		t.Errorf("custom weights: %v", d)
	}
}

func TestRankByText(t *testing.T) {
	var r RankBy
	if err := r.UnmarshalText([]byte("rtt_loss")); err != nil || r != RankRTTLoss {
		t.Errorf("%v %v", r, err)
	}
	if err := r.UnmarshalText([]byte("ping")); err == nil {
		t.Error("unknown ranking accepted")
	}
	if b, _ := RankDistance.MarshalText(); string(b) != "distance" {
		t.Errorf("%s", b)
	}
}
