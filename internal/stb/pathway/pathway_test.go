package pathway_test

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/pathway"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/prometheus/client_golang/prometheus"
)

// One city, three single-server nodes: edge-a nearest to the zone, then
// edge-b, then edge-c.
const doc = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: hefei, location: {lat: 31.82, lon: 117.23}}
nodes:
  - {name: n-a, region: hefei, location: {lat: 31.82, lon: 117.24}, servers: [{name: edge-a, address: "127.0.0.2:8080"}]}
  - {name: n-b, region: hefei, location: {lat: 31.85, lon: 117.30}, servers: [{name: edge-b, address: "127.0.0.3:8080"}]}
  - {name: n-c, region: hefei, location: {lat: 31.95, lon: 117.50}, servers: [{name: edge-c, address: "[::1]:8080"}]}
zones:
  - {name: z, region: hefei, networks: [100.64.0.0/16], location: {lat: 31.82, lon: 117.23}}
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/index.m3u8"
    bitrates_kbps: [500]
    steering: {ttl_seconds: 10, retry_seconds: 2, moves_per_second: 1, move_burst: 2, pathways: 3}
`

// manifest is the steering manifest as a player reads it.
type manifest struct {
	VERSION  int
	TTL      int
	Reload   string   `json:"RELOAD-URI"`
	Priority []string `json:"PATHWAY-PRIORITY"`
	DASH     []string `json:"SERVICE-LOCATION-PRIORITY"`
	Clones   []struct {
		Base string `json:"BASE-ID"`
		ID   string
		Repl struct{ HOST string } `json:"URI-REPLACEMENT"`
	} `json:"PATHWAY-CLONES"`
}

type world struct {
	t    *testing.T
	snap *topology.Snapshot
	st   *pathway.Steering
	reg  *prometheus.Registry
	now  time.Time
}

func newWorld(t *testing.T) *world {
	reg := prometheus.NewRegistry()
	return &world{t: t, snap: fixture.CompileYAML(t, doc, 1), st: pathway.New(reg), reg: reg, now: time.Unix(1_800_000_000, 0)}
}

// engine with the named servers drained (still serving) or down.
func (w *world) engine(drained, down []string) *steer.Engine {
	out := map[int32]bool{}
	isDown := map[int32]bool{}
	for _, n := range append(slices.Clone(drained), down...) {
		i, ok := w.snap.Server(n)
		if !ok {
			w.t.Fatalf("no server %s", n)
		}
		out[i] = true
		isDown[i] = slices.Contains(down, n)
	}
	return steer.New(w.snap, steer.Options{
		Available: func(s int32) bool { return !out[s] },
		Down:      func(s int32) bool { return isDown[s] },
	})
}

// ask is one manifest request from client with query.
func (w *world) ask(eng *steer.Engine, client, query string) (manifest, pathway.Result) {
	w.t.Helper()
	q, bad := pathway.ParseQuery(query)
	if bad != "" {
		w.t.Fatalf("query %q: %s", query, bad)
	}
	req := steer.Request{Client: netip.MustParseAddr(client), Host: "live.iptv.example", Path: "/cctv1/index.m3u8", Query: query, Now: w.now}
	d := eng.Peek(req)
	b, res := w.st.Answer(nil, eng, &d, req, q, w.now)
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		w.t.Fatalf("manifest %s: %v", b, err)
	}
	return m, res
}

// count is the manifests counted with outcome.
func (w *world) count(outcome string) float64 {
	w.t.Helper()
	mfs, err := w.reg.Gather()
	if err != nil {
		w.t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "anysched_steering_manifests_total" && m.GetLabel()[0].GetValue() == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

func TestPinThenFollowADrain(t *testing.T) {
	w := newWorld(t)
	all := w.engine(nil, nil)
	// The first manifest pins "." to the decision's server: no move.
	m, res := w.ask(all, "100.64.0.1", "_HLS_pathway=.&_HLS_throughput=800000")
	if res.Outcome != pathway.Pinned || m.VERSION != 1 || m.TTL != 10 || m.Priority[0] != "." {
		t.Fatalf("first manifest %+v %+v", m, res)
	}
	if want := pathway.Prefix + "/cctv1/index.m3u8?_anysched_base=edge-a"; m.Reload != want {
		t.Fatalf("RELOAD-URI %q, want %q", m.Reload, want)
	}
	// The fallbacks are clones of "." on their servers' hosts (no port:
	// players replace the hostname alone).
	if !slices.Equal(m.Priority, []string{".", "edge-b", "edge-c"}) || len(m.Clones) != 2 ||
		m.Clones[0].Base != "." || m.Clones[0].ID != "edge-b" || m.Clones[0].Repl.HOST != "127.0.0.3" || m.Clones[1].Repl.HOST != "[::1]" {
		t.Fatalf("pathways %+v", m)
	}
	// Asking again through RELOAD-URI: it stays.
	m, res = w.ask(all, "100.64.0.1", "_anysched_base=edge-a&_HLS_pathway=.&_HLS_throughput=1")
	if res.Outcome != pathway.Stay || m.Priority[0] != "." {
		t.Fatalf("settled manifest %+v %+v", m, res)
	}
	// edge-a is drained: the player moves to edge-b, edge-a (which still
	// serves) last.
	drained := w.engine([]string{"edge-a"}, nil)
	m, res = w.ask(drained, "100.64.0.1", "_anysched_base=edge-a&_HLS_pathway=.")
	if res.Outcome != pathway.Moved || !slices.Equal(m.Priority, []string{"edge-b", "edge-c", "."}) || m.TTL != 10 {
		t.Fatalf("drain manifest %+v %+v", m, res)
	}
	// On edge-b it stays.
	if _, res = w.ask(drained, "100.64.0.1", "_anysched_base=edge-a&_HLS_pathway=edge-b"); res.Outcome != pathway.Stay {
		t.Fatalf("after the move: %+v", res)
	}
	if w.count("pinned") != 1 || w.count("moved") != 1 || w.count("stay") != 2 {
		t.Fatalf("metrics pinned %v moved %v stay %v", w.count("pinned"), w.count("moved"), w.count("stay"))
	}
}

func TestMovesAreRateLimitedPerTarget(t *testing.T) {
	w := newWorld(t)
	drained := w.engine([]string{"edge-a"}, nil)
	moved, deferred := 0, 0
	for i := range 5 {
		m, res := w.ask(drained, "100.64.0.1", "_anysched_base=edge-a&_HLS_pathway=.&p="+string(rune('a'+i)))
		switch res.Outcome {
		case pathway.Moved:
			moved++
		case pathway.Deferred:
			deferred++
			// Told to stay where it is, the target next, and to ask again soon.
			if m.TTL != 2 || !slices.Equal(m.Priority[:2], []string{".", "edge-b"}) {
				t.Fatalf("deferred manifest %+v", m)
			}
		default:
			t.Fatalf("outcome %v", res.Outcome)
		}
	}
	if moved != 2 || deferred != 3 { // the burst
		t.Fatalf("moved %d deferred %d, want 2 and 3", moved, deferred)
	}
	// At most 2 (the burst) in any 2 s (burst / rate): not a second
	// later, two more two seconds later.
	w.now = w.now.Add(time.Second)
	if _, res := w.ask(drained, "100.64.0.1", "_anysched_base=edge-a&_HLS_pathway=."); res.Outcome != pathway.Deferred {
		t.Fatalf("a second later: %v", res.Outcome)
	}
	w.now = w.now.Add(time.Second)
	for i := range 3 {
		want := pathway.Moved
		if i == 2 {
			want = pathway.Deferred
		}
		if _, res := w.ask(drained, "100.64.0.1", "_anysched_base=edge-a&_HLS_pathway=."); res.Outcome != want {
			t.Fatalf("two seconds later, ask %d: %v, want %v", i, res.Outcome, want)
		}
	}
}

func TestDownServerMovesRegardless(t *testing.T) {
	w := newWorld(t)
	drained := w.engine([]string{"edge-a"}, nil)
	for range 2 { // spend edge-b's burst
		if _, res := w.ask(drained, "100.64.0.1", "_anysched_base=edge-a&_HLS_pathway=."); res.Outcome != pathway.Moved {
			t.Fatal(res.Outcome)
		}
	}
	down := w.engine(nil, []string{"edge-a"})
	m, res := w.ask(down, "100.64.0.1", "_anysched_base=edge-a&_HLS_pathway=.")
	if res.Outcome != pathway.Forced || m.Priority[0] != "edge-b" || slices.Contains(m.Priority, ".") {
		t.Fatalf("down manifest %+v %+v", m, res)
	}
	// A pathway that names no server any more (removed from the topology).
	if _, res := w.ask(w.engine(nil, nil), "100.64.0.1", "_anysched_base=edge-a&_HLS_pathway=edge-gone"); res.Outcome != pathway.Forced || res.From != -1 {
		t.Fatalf("unknown pathway: %+v", res)
	}
}

func TestDASHKeysAndReloadURIKeepsOtherParameters(t *testing.T) {
	w := newWorld(t)
	m, _ := w.ask(w.engine(nil, nil), "100.64.0.1", `token=abc.def&_DASH_pathway=.&_DASH_throughput=5&x=%22q%22`)
	if len(m.DASH) == 0 || len(m.Priority) != 0 {
		t.Fatalf("DASH manifest %+v", m)
	}
	if want := pathway.Prefix + `/cctv1/index.m3u8?token=abc.def&x=%22q%22&_anysched_base=edge-a`; m.Reload != want {
		t.Fatalf("RELOAD-URI %q, want %q", m.Reload, want)
	}
}

func TestParseQueryRefusesBadInput(t *testing.T) {
	for q, want := range map[string]string{
		"_HLS_pathway=a%20b":                       "_HLS_pathway is not a pathway name",
		"_HLS_pathway=":                            "_HLS_pathway is not a pathway name",
		"_HLS_pathway=" + strings.Repeat("a", 129): "_HLS_pathway is not a pathway name",
		"_HLS_throughput=fast":                     "_HLS_throughput is not a number of bits per second",
		"_HLS_throughput=-1":                       "_HLS_throughput is not a number of bits per second",
		"_anysched_base=.":                         "_anysched_base is not a server name",
		"_HLS_pathway=a&_HLS_pathway=b":            "_HLS_pathway given twice",
		"_HLS_pathway=a&_DASH_pathway=b":           "_DASH_pathway given twice",
	} {
		if _, bad := pathway.ParseQuery(q); bad != want {
			t.Errorf("%q: %q, want %q", q, bad, want)
		}
	}
	if q, bad := pathway.ParseQuery("a=b&_HLS_pathway=edge-1.x_y&_HLS_throughput=7&_anysched_base=edge-2"); bad != "" || q.Pathway != "edge-1.x_y" || q.Throughput != 7 || q.Base != "edge-2" || q.DASH {
		t.Errorf("good query: %+v %q", q, bad)
	}
}

func TestAnswerAllocatesNothing(t *testing.T) {
	w := newWorld(t)
	eng := w.engine([]string{"edge-a"}, nil)
	q, _ := pathway.ParseQuery("_anysched_base=edge-a&_HLS_pathway=.")
	req := steer.Request{Client: netip.MustParseAddr("100.64.0.1"), Host: "live.iptv.example", Path: "/cctv1/index.m3u8", Query: "_anysched_base=edge-a&_HLS_pathway=.", Now: w.now}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(200, func() {
		d := eng.Peek(req)
		buf, _ = w.st.Answer(buf[:0], eng, &d, req, q, w.now)
	}); n != 0 {
		t.Fatalf("%v allocations per answer", n)
	}
}

// TestExplainSaysSteering: explain tells an operator what steering does to
// the sessions already playing.
func TestExplainSaysSteering(t *testing.T) {
	w := newWorld(t)
	x := w.engine(nil, nil).Explain(steer.Request{Client: netip.MustParseAddr("100.64.0.1"), Host: "live.iptv.example", Path: "/cctv1/index.m3u8"})
	want := "content steering on: a playing session asks again every 10 s and is moved to this answer when it differs, at most 2 moves onto a server in any 2 s per scheduler (deferred: asks again in 2 s); at once if its server is down"
	if !slices.Contains(x.Steps, want) {
		t.Fatalf("steps %q lack %q", x.Steps, want)
	}
}

// TestMoveLimitHoldsForManyPlayers: 300 players of a drained server ask
// at once, again and again, from as many goroutines for a second of real
// time; the moves onto edge-b never exceed the limit in any window.
func TestMoveLimitHoldsForManyPlayers(t *testing.T) {
	w := newWorld(t)
	snap := fixture.CompileYAML(t, strings.Replace(doc, "moves_per_second: 1, move_burst: 2", "moves_per_second: 40, move_burst: 4", 1), 1)
	w.snap = snap
	eng := w.engine([]string{"edge-a"}, nil)
	const players, window = 300, 100 * time.Millisecond // burst / rate
	q, _ := pathway.ParseQuery("_anysched_base=edge-a&_HLS_pathway=.")
	req := steer.Request{Client: netip.MustParseAddr("100.64.0.1"), Host: "live.iptv.example", Path: "/cctv1/index.m3u8", Query: "_anysched_base=edge-a&_HLS_pathway=."}
	times := make(chan time.Time, players)
	deadline := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	for range players {
		wg.Go(func() {
			buf := make([]byte, 0, 1024)
			for time.Now().Before(deadline) {
				now := time.Now()
				d := eng.Peek(req)
				var res pathway.Result
				if buf, res = w.st.Answer(buf[:0], eng, &d, req, q, now); res.Outcome == pathway.Moved {
					times <- now
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	close(times)
	var moves []time.Time
	for at := range times {
		moves = append(moves, at)
	}
	slices.SortFunc(moves, func(a, b time.Time) int { return a.Compare(b) })
	// 4 at once, then 40 a second: about 44 in the second.
	if len(moves) < 30 || len(moves) > 4+40*1.1 {
		t.Fatalf("%d moves in a second at 40/s, burst 4", len(moves))
	}
	for i := range moves {
		n := 0
		// A goroutine's time may precede its turn at the lock by a little.
		for j := i; j < len(moves) && moves[j].Sub(moves[i]) < window-2*time.Millisecond; j++ {
			n++
		}
		if n > 4 {
			t.Fatalf("%d moves within %v of %v: the limit is 4", n, window, moves[i])
		}
	}
}

// overNode marks one node over its service's overflow thresholds.
type overNode int32

func (o overNode) Over(_, node int32) bool  { return node == int32(o) }
func (o overNode) Reason(_, _ int32) string { return "test" }

// TestOverflowAndPlanMovePlayingSessions: the manifest follows whatever
// the decision follows: a node over its thresholds, and the QoE plan (the
// allocator's server for the session, as httpd hands it over).
func TestOverflowAndPlanMovePlayingSessions(t *testing.T) {
	w := newWorld(t)
	w.snap = fixture.CompileYAML(t, strings.Replace(doc, "    steering:", "    overflow: {rps_per_server: 100}\n    steering:", 1), 1)
	nodeA, _ := w.snap.Node("n-a")
	over := steer.New(w.snap, steer.Options{Overflow: overNode(nodeA)})
	m, res := w.ask(over, "100.64.0.1", "_anysched_base=edge-a&_HLS_pathway=.")
	if res.Outcome != pathway.Moved || m.Priority[0] != "edge-b" || m.Priority[len(m.Priority)-1] != "." {
		t.Fatalf("overflow: %+v %+v", m, res)
	}
	// The plan puts the session on edge-c: the allocator's decision is the
	// one the manifest answers.
	eng := w.engine(nil, nil)
	req := steer.Request{Client: netip.MustParseAddr("100.64.0.1"), Host: "live.iptv.example", Path: "/cctv1/index.m3u8"}
	q, _ := pathway.ParseQuery("_anysched_base=edge-a&_HLS_pathway=.")
	d := eng.Peek(req)
	c, _ := w.snap.Server("edge-c")
	d.Server, d.Node, d.Region = c, w.snap.Servers[c].Node, w.snap.Servers[c].Region
	if _, res := w.st.Answer(nil, eng, &d, req, q, w.now); res.Outcome != pathway.Moved || res.To != c {
		t.Fatalf("plan: %+v", res)
	}
}
