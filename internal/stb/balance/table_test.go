package balance

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// genInput is a topology of nodes x per servers whose Index encodes the
// generation and node (gen*1000 + node*10 + i) while names stay stable
// (n<node>-s<i>), so a pick can be traced to the table that made it and
// rebuilds still inherit state by name.
func genInput(gen uint64, nodes, per int, cfg Config) TableInput {
	in := TableInput{Config: cfg}
	for n := range nodes {
		var node NodeInput
		for i := range per {
			node.Servers = append(node.Servers, Server{
				Index:  int32(gen*1000) + int32(n*10+i),
				Name:   fmt.Sprintf("n%d-s%d", n, i),
				Weight: float64(100 + 10*((i+int(gen))%5)),
			})
			node.Loads = append(node.Loads, Load{Healthy: true, CPU: float64(i) / 10, RTT: time.Duration(i) * time.Millisecond, CapacityMbps: 10000})
		}
		in.Nodes = append(in.Nodes, node)
	}
	return in
}

func testConfig() Config {
	c := DefaultConfig()
	c.Adaptive.Enabled = true
	c.SlowStart.Window = time.Minute
	return c
}

func TestTableBuildAndPick(t *testing.T) {
	in := genInput(0, 3, 4, testConfig())
	in.Use = []Selection{SelectQoE, SelectCHash}
	tb, err := BuildTable(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tb.Policy(SelectSWRR, 0) != nil || tb.Pick(SelectSWRR, 0, 1, 1) != -1 {
		t.Error("swrr built though not in use")
	}
	if p := tb.Policy(SelectQoE, 1); p == nil || p.Name() != "nearest" {
		t.Errorf("qoe falls back to nearest: %v", p)
	}
	if p := tb.Policy(SelectCHash, 2); p == nil || p.Name() != "chash" {
		t.Errorf("chash: %v", p)
	}
	if tb.Policy(SelectCHash, 3) != nil || tb.Policy(SelectCHash, -1) != nil || (*Table)(nil).Policy(SelectCHash, 0) != nil {
		t.Error("out-of-range lookups return a policy")
	}
	for n := range int32(3) {
		if got := tb.Pick(SelectCHash, n, HashKey("cctv1"), 0); got/10 != n {
			t.Errorf("node %d picked %d", n, got)
		}
	}
	if tb.Generation() != 0 || !tb.RampingUntil().IsZero() {
		t.Errorf("gen %d, ramping %v", tb.Generation(), tb.RampingUntil())
	}
}

func TestTableWeightsOverrideAndRamp(t *testing.T) {
	cfg := testConfig()
	cfg.Adaptive.Enabled = false
	cfg.Weights = map[string]float64{"n0-s1": 0} // drained by the operator
	in := genInput(0, 1, 2, cfg)
	now := time.Now()
	in.Now = now
	in.Nodes[0].Loads[0].Since = now.Add(-10 * time.Second)
	in.Use = []Selection{SelectSWRR}
	tb, err := BuildTable(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if got := tb.Pick(SelectSWRR, 0, 0, 0); got != 0 {
			t.Fatalf("drained server picked: %d", got)
		}
	}
	if want := now.Add(50 * time.Second); !tb.RampingUntil().Equal(want) {
		t.Errorf("ramping until %v, want %v", tb.RampingUntil(), want)
	}
	if in.Nodes[0].Servers[1].Weight == 0 {
		t.Error("override changed the caller's servers")
	}
}

// TestTableRebuildInherits: rebuilding between picks keeps swrr's sequence
// and failure penalties, chash's loads and the adaptive weights' smoothing.
func TestTableRebuildInherits(t *testing.T) {
	cfg := DefaultConfig()
	in := TableInput{Config: cfg, Use: []Selection{SelectSWRR, SelectCHash}, Nodes: []NodeInput{{Servers: servers(5, 1, 1)}}}
	var live Live
	var b strings.Builder
	for range 7 {
		tb, err := live.Rebuild(in)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteByte(byte('a' + tb.Pick(SelectSWRR, 0, 0, 0)))
		tb.Pick(SelectCHash, 0, 1, 0)
	}
	if b.String() != "aabacaa" {
		t.Errorf("sequence across rebuilds: %s", b.String())
	}
	live.Load().Fail(0, 0)
	tb, _ := live.Rebuild(in)
	if e := tb.Policy(SelectSWRR, 0).Explain(0, 0).Candidates[0].Effective; e != 0 {
		t.Errorf("failure penalty lost: %v", e)
	}
	if _, total := tb.Policy(SelectCHash, 0).(*CHash).Loads(); total != 7 {
		t.Errorf("chash loads lost: total %d", total)
	}
	if tb.Generation() != 7 { // seven builds (0..6), then this one
		t.Errorf("generation %d", tb.Generation())
	}

	// Adaptive: a server turning bad moves Alpha of the way per rebuild.
	cfg.Adaptive.Enabled = true
	in = TableInput{Config: cfg, Use: []Selection{SelectSWRR}, Nodes: []NodeInput{{Servers: servers(100, 100), Loads: healthy(2)}}}
	live = Live{}
	live.Rebuild(in)
	in.Nodes[0].Loads = healthy(2)
	in.Nodes[0].Loads[0].Loss = 0.9
	tb, _ = live.Rebuild(in)
	if w := tb.adapted["s0"]; w != 100+0.2*(10-100) {
		t.Errorf("adapted weight after one bad report: %v", w)
	}
	tb, _ = live.Rebuild(in)
	if w := tb.adapted["s0"]; w >= 82 || w <= 10 {
		t.Errorf("adapted weight after two bad reports: %v", w)
	}
}

func TestTableBuildErrors(t *testing.T) {
	bad := DefaultConfig()
	bad.Panic = 2
	if _, err := BuildTable(TableInput{Config: bad}, nil); err == nil {
		t.Error("invalid config accepted")
	}
	in := TableInput{Config: DefaultConfig(), Nodes: []NodeInput{{Servers: servers(1, 1), Loads: healthy(1)}}}
	if _, err := BuildTable(in, nil); err == nil || !strings.HasPrefix(err.Error(), "balance: node 0: loads must be") {
		t.Errorf("mismatched loads: %v", err)
	}
	in = TableInput{Config: DefaultConfig(), Use: []Selection{"random"}}
	if _, err := BuildTable(in, nil); err == nil {
		t.Error("unknown selection accepted")
	}
	var live Live
	if _, err := live.Rebuild(TableInput{Config: bad}); err == nil || live.Load() != nil {
		t.Error("failed rebuild published a table")
	}
}

// TestTableSwapRace: readers pick from whatever table is live while a
// writer rebuilds and swaps it, and report failures into it. Every pick must
// come from the generation of the table it was made from (a half-built or
// mixed table would answer with another generation's servers). Run with
// -race.
func TestTableSwapRace(t *testing.T) {
	const nodes, per, readers = 8, 6, 8
	gens := uint64(150)
	if testing.Short() {
		gens = 30
	}
	cfg := testConfig()
	cfg.Panic = 0.3
	var live Live
	if _, err := live.Rebuild(genInput(0, nodes, per, cfg)); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var picks atomic.Int64
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			k := uint64(r)
			for !stop.Load() {
				tb := live.Load()
				gen := int32(tb.Generation())
				for _, s := range selections {
					for n := range int32(nodes) {
						k++
						got := tb.Pick(s, n, HashKey(fmt.Sprint(k%50)), mix(k))
						if got/1000 != gen || (got%1000)/10 != n {
							t.Errorf("generation %d node %d (%s) picked %d", gen, n, s, got)
							stop.Store(true)
							return
						}
						picks.Add(1)
					}
				}
				if k%97 == 0 {
					if x := tb.Policy(SelectCHash, 0).Explain(k, k); x.Pick/1000 != gen {
						t.Errorf("explain from another generation: %d", x.Pick)
					}
				}
			}
		})
	}
	for g := uint64(1); g <= gens && !stop.Load(); g++ {
		in := genInput(g, nodes, per, cfg)
		in.Nodes[g%nodes].Loads[0].Healthy = false
		in.Nodes[(g+1)%nodes].Loads[1].Since = time.Now()
		live.Load().Fail(int32(g%nodes), int32((g-1)*1000)+int32((g%nodes)*10))
		if _, err := live.Rebuild(in); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if live.Load().Generation() != gens {
		t.Errorf("ended at generation %d", live.Load().Generation())
	}
	t.Logf("%d picks across %d table swaps", picks.Load(), gens)
}

// TestSelections: the table serves every topology selection (qoe with the
// nearest policy) and nothing else.
func TestSelections(t *testing.T) {
	tb, err := BuildTable(TableInput{Config: DefaultConfig(), Nodes: []NodeInput{{Servers: servers(1, 1), Loads: healthy(2)}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range selections {
		want := string(s)
		if s == SelectQoE {
			want = "nearest"
		}
		if p := tb.Policy(s, 0); p == nil || p.Name() != want {
			t.Errorf("%s: policy %v", s, p)
		}
	}
	if tb.Policy("", 0) == nil || tb.Policy("", 0).Name() != "nearest" {
		t.Error("the empty selection is not nearest")
	}
	if tb.Policy("random", 0) != nil || tb.Pick("random", 0, 0, 0) != -1 {
		t.Error("an unknown selection has a policy")
	}
}

func TestTableExplainAndSwap(t *testing.T) {
	in := genInput(0, 2, 3, testConfig())
	in.Use = []Selection{SelectQoE}
	tb, err := BuildTable(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := tb.Explain(SelectQoE, 1, 0, 12345)
	if x.Policy != "nearest" || x.Pick != tb.Pick(SelectQoE, 1, 0, 12345) || !strings.HasPrefix(x.Notes[0], "qoe:") {
		t.Errorf("qoe explain: %+v", x)
	}
	if x := tb.Explain(SelectP2C, 0, 0, 0); x.Pick != -1 || x.Policy != "p2c" || len(x.Notes) != 1 {
		t.Errorf("explain of a policy not built: %+v", x)
	}
	if !tb.Config().Adaptive.Enabled {
		t.Error("config not kept")
	}
	var live Live
	if old := live.Swap(tb); old != nil || live.Load() != tb {
		t.Error("swap")
	}
}

// TestUnnamedServers: without names, identity is the index, for state
// inheritance and hashing alike.
func TestUnnamedServers(t *testing.T) {
	ss := []Server{{Index: 3, Weight: 5}, {Index: 7, Weight: 1}, {Index: 9, Weight: 1}}
	prev := mustSWRR(t, ss, nil, SWRROptions{})
	prev.Pick(0, 0)
	p := mustSWRR(t, ss, nil, SWRROptions{})
	p.Inherit(prev)
	if got := p.Pick(0, 0); got != 3 {
		t.Errorf("second pick %d", got)
	}
	c := mustCHash(t, ss, nil, CHashOptions{})
	if got := c.Servers(); len(got) != 3 || c.Owner(1) < 3 {
		t.Errorf("servers %v owner %d", got, c.Owner(1))
	}
}

func TestEnumStrings(t *testing.T) {
	var k KeyBy
	if err := k.UnmarshalText([]byte("path")); err != nil || k != KeyPath || k.String() != "path" {
		t.Errorf("%v %v", k, err)
	}
	if b, _ := KeyChannel.MarshalText(); string(b) != "channel" || KeyBy(7).String() != "KeyBy(7)" {
		t.Errorf("%s", b)
	}
	if SkipPanic.String() != "below the panic threshold" || Skip(9).String() != "Skip(9)" || RankBy(5).String() != "RankBy(5)" {
		t.Error("skip/rank strings")
	}
}
