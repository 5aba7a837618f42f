package chaos

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/store"
)

func targets() Targets {
	t := Targets{Cities: []string{"hefei", "wuhu", "bengbu", "anqing"}, Center: "center", EtcdMembers: 3}
	for i, c := range t.Cities {
		ids := []string{c + "-1"}
		if i == 0 {
			ids = append(ids, c+"-2")
		}
		t.Schedulers = append(t.Schedulers, ids)
		for k := range 2 {
			srv := fmt.Sprintf("%s-1-%c", c, 'a'+k)
			t.Servers = append(t.Servers, srv)
			t.Edges = append(t.Edges, Edge{City: i, Daemon: fmt.Sprintf("edge-%d-%d", i+1, 10+k), Server: srv, Address: fmt.Sprintf("10.%d.4.%d:8080", i+1, 10+k)})
		}
	}
	return t
}

func TestPlanIsReproducibleAndKeepsFaultsApart(t *testing.T) {
	for _, tt := range []struct {
		seed     uint64
		d        time.Duration
		minKinds int
	}{
		{1, 75 * time.Second, 10},
		{2, 75 * time.Second, 10},
		{3, 75 * time.Second, 10},
		{4, 75 * time.Second, 10},
		{42, 5 * time.Minute, 10},
		{7, 10 * time.Minute, 10},
	} {
		t.Run(fmt.Sprint(tt.seed, tt.d), func(t *testing.T) {
			a, err := Plan(tt.seed, tt.d, targets())
			if err != nil {
				t.Fatal(err)
			}
			b, _ := Plan(tt.seed, tt.d, targets())
			var wa, wb bytes.Buffer
			a.Write(&wa)
			b.Write(&wb)
			if wa.String() != wb.String() {
				t.Fatalf("same seed, different schedules:\n%s\n%s", wa.String(), wb.String())
			}
			if c, _ := Plan(tt.seed+1000, tt.d, targets()); fmt.Sprint(c.Faults) == fmt.Sprint(a.Faults) {
				t.Errorf("another seed drew the same faults")
			}
			if k := a.KindsIn(); len(k) < tt.minKinds {
				t.Errorf("%d kinds %v, want at least %d:\n%s", len(k), k, tt.minKinds, wa.String())
			}
			for i, f := range a.Faults {
				if f.At < Warmup || f.At+f.For > tt.d-Settle {
					t.Errorf("%s outside the fault window", f)
				}
				for _, g := range a.Faults[i+1:] {
					if f.At < g.until && g.At < f.until {
						for _, h := range f.holds {
							for _, x := range g.holds {
								if h == x {
									t.Errorf("%s and %s both hold %s at once", f, g, h)
								}
							}
						}
					}
				}
			}
			if len(a.Storms) == 0 {
				t.Error("no zapping storm")
			}
		})
	}
}

func TestPlanRejectsShortRuns(t *testing.T) {
	if _, err := Plan(1, 20*time.Second, targets()); err == nil {
		t.Fatal("a 20 s run planned")
	}
}

func TestCheckAnswersExcusesOnlyRoutingFaultWindows(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ok := func(city int, s float64, inst string) Request {
		return Request{City: city, Start: at(s), End: at(s + 0.01), Tries: 1, Status: 302, Instance: inst}
	}
	bad := func(city int, s float64) Request {
		return Request{City: city, Start: at(s), End: at(s + 2), Tries: 2, Err: "timeout", FirstErr: "timeout"}
	}
	kill := Done{Fault: Fault{N: 1, Kind: KillScheduler, Target: "hefei-1", City: 0}, Begin: at(10)}
	term := Done{Fault: Fault{N: 2, Kind: TermScheduler, Target: "wuhu-1", City: 1}, Begin: at(10)}
	standby := Done{Fault: Fault{N: 3, Kind: FreezeScheduler, Target: "hefei-2", City: 0}, Begin: at(30)}
	cities, prim := []string{"hefei", "wuhu"}, []string{"hefei-1", "wuhu-1"}
	for _, tt := range []struct {
		name     string
		reqs     []Request
		bad      int
		failed   int
		takeover time.Duration
	}{
		{"a failure inside the kill's window", []Request{ok(0, 9, "hefei-1"), bad(0, 10.5), ok(0, 11, "center")}, 0, 1, 1010 * time.Millisecond},
		{"a failure just before the kill (in flight)", []Request{bad(0, 8.5), ok(0, 11.5, "center")}, 0, 1, 1510 * time.Millisecond},
		{"a failure past the watchdog and detection", []Request{bad(0, 12)}, 1, 0, -1},
		{"a failure after the window", []Request{bad(0, 16)}, 1, 0, -1},
		{"a graceful stop excuses nothing", []Request{bad(1, 10.5)}, 1, 0, -1},
		{"the standby frozen excuses nothing", []Request{bad(0, 30.5)}, 1, 0, -1},
		{"another city's failure is not excused", []Request{bad(1, 10.2)}, 1, 0, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, ws := CheckAnswers(tt.reqs, []Done{kill, term, standby}, cities, prim, 2*time.Second)
			if v.Bad != tt.bad || v.Checked != len(tt.reqs) {
				t.Errorf("bad %d of %d, want %d: %v", v.Bad, v.Checked, tt.bad, v.Examples)
			}
			if len(ws) != 1 || ws[0].Failed != tt.failed || ws[0].Takeover != tt.takeover {
				t.Errorf("windows %+v, want 1 with %d failed, takeover %s", ws, tt.failed, tt.takeover)
			}
		})
	}
}

func TestCheckEdges(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	edges := targets().Edges
	to := func(s float64, addr string) Request {
		return Request{Start: at(s), End: at(s + 0.01), Tries: 1, Status: 302, Instance: "hefei-1", Location: "http://" + addr + "/live/ch1/2500/index.m3u8"}
	}
	dead := Done{Fault: Fault{N: 4, Kind: KillEdge, Target: "edge-1-10", City: 0}, Begin: at(10), End: at(20)}
	drained := Done{Fault: Fault{N: 5, Kind: Drain, Target: "hefei-1-b", City: 0}, Begin: at(30), End: at(40)}
	for _, tt := range []struct {
		name string
		reqs []Request
		bad  int
	}{
		{"within detection", []Request{to(12, "10.1.4.10:8080"), to(31, "10.1.4.11:8080")}, 0},
		{"before it died and after it came back", []Request{to(9, "10.1.4.10:8080"), to(21, "10.1.4.10:8080")}, 0},
		{"dead too long", []Request{to(10+EdgeDetection.Seconds()+0.5, "10.1.4.10:8080")}, 1},
		{"drained too long", []Request{to(37, "10.1.4.11:8080")}, 1},
		{"the other edge", []Request{to(15, "10.1.4.11:8080")}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, ws := CheckEdges(tt.reqs, []Done{dead, drained}, edges, []string{"hefei"})
			if v.Bad != tt.bad {
				t.Errorf("bad %d, want %d: %v", v.Bad, tt.bad, v.Examples)
			}
			if len(ws) != 2 {
				t.Errorf("windows %+v", ws)
			}
		})
	}
}

func TestCheckRevisions(t *testing.T) {
	now := time.Now()
	v := CheckRevisions([]Sample{{"hefei-1", now, 0}, {"hefei-1", now, 12}, {"wuhu-1", now, 40}, {"center", now, 12}}, map[int64]bool{12: true, 30: true})
	if v.Bad != 1 || !strings.Contains(v.Examples[0], "wuhu-1") {
		t.Fatalf("%+v", v)
	}
}

func TestCheckClaimsReplaysRevisions(t *testing.T) {
	cl := func(kbps float64) *store.Claims {
		return &store.Claims{Servers: map[string]store.Claim{"hefei-1-a": {BandwidthKbps: kbps, Compute: 1}}}
	}
	rk := func(kbps float64, rank int, idle bool, made int64) *store.Claims {
		c := cl(kbps)
		c.Rank, c.Idle, c.Made = rank, idle, made
		return c
	}
	capa := map[string]Capacity{"hefei-1-a": CapacityOf(90, 60)}
	for _, tt := range []struct {
		name string
		ch   []ClaimChange
		bad  int
	}{
		{"two instances within capacity", []ClaimChange{{1, "c/hefei/hefei-1", cl(50000)}, {2, "c/hefei/hefei-2", cl(40000)}}, 0},
		{"over capacity at one revision", []ClaimChange{{1, "c/hefei/hefei-1", cl(50000)}, {2, "c/hefei/hefei-2", cl(45000)}, {3, "c/hefei/hefei-1", cl(10000)}}, 1},
		{"a deleted claim frees its share", []ClaimChange{{1, "c/hefei/hefei-1", cl(50000)}, {2, "c/hefei/hefei-1", nil}, {2, "c/hefei/hefei-2", cl(80000)}}, 0},
		// hefei-2 (rank 1) had the STBs; hefei-1 (rank 0) takes them back
		// over its claims, and hefei-2 yields at its next commit.
		{"a better-ranked instance over a yielding one", []ClaimChange{{1, "c/hefei/hefei-2", rk(80000, 1, false, 1000)}, {2, "c/hefei/hefei-1", rk(81000, 0, false, 2000)},
			{3, "c/hefei/hefei-2", rk(9000, 1, true, 2500)}}, 0},
		{"a standby that does not yield", []ClaimChange{{1, "c/hefei/hefei-1", rk(50000, 0, false, 1000)}, {2, "c/hefei/hefei-2", rk(30000, 1, false, 1500)}}, 1},
		{"a frozen primary's old claims are not yielded to, nor in the way", []ClaimChange{{1, "c/hefei/hefei-1", rk(50000, 0, false, 1000)}, {2, "c/hefei/hefei-2", rk(85000, 1, false, 9000)}}, 0},
		{"a primary's claims count while fresh", []ClaimChange{{1, "c/hefei/hefei-1", rk(50000, 0, false, 1000)}, {2, "c/hefei/hefei-2", rk(45000, 1, true, 5000)}}, 1},
		{"an idle reserve counts beside a better-ranked instance", []ClaimChange{{1, "c/hefei/hefei-2", rk(9000, 1, true, 1000)}, {2, "c/hefei/hefei-1", rk(85000, 0, false, 1000)}}, 1},
		{"another region's better rank is no reason to yield", []ClaimChange{{1, "c/wuhu/wuhu-1", rk(50000, 0, false, 1000)}, {2, "c/hefei/hefei-2", rk(30000, 1, false, 1000)}}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if v := CheckClaims(tt.ch, capa, 5*time.Second); v.Bad != tt.bad {
				t.Errorf("bad %d, want %d: %v", v.Bad, tt.bad, v.Examples)
			}
		})
	}
}

// The load on loopback: a new connection per request, one retry, storms.
func TestRunLoadRetriesOnceAndStorms(t *testing.T) {
	var n atomic.Int64
	var mu sync.Mutex
	peers := map[string]int{} // the client's address of each try's connection
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		peers[r.RemoteAddr]++
		mu.Unlock()
		if n.Add(1)%5 == 0 { // every fifth try fails: mostly its retry succeeds
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("X-Anysched-Instance", "hefei-1")
		w.Header().Set("Location", "http://10.1.4.10:8080/live/x/1/index.m3u8")
		w.WriteHeader(http.StatusFound)
	}))
	srv.Start()
	defer srv.Close()
	dial := func(int) func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext
	}
	reqs := RunLoad(context.Background(), LoadOptions{Cities: []string{"hefei"}, Dial: dial, Target: srv.Listener.Addr().String(), Host: "live.iptv.example",
		Viewers: 10, Steady: 2, Pause: 20 * time.Millisecond, Storms: []time.Duration{200 * time.Millisecond}, StormSTB: 20, Duration: 3 * time.Second, Seed: 1})
	storm, retried := 0, 0
	for _, r := range reqs {
		if !r.OK() && (r.Tries != 2 || r.FirstErr == "") {
			t.Errorf("request failed without its retry: %+v", r)
		}
		if r.Storm {
			storm++
			if r.Start.Sub(reqs[0].Start) > 2*time.Second {
				t.Errorf("storm request at %s", r.Start)
			}
		}
		if r.Tries > 1 {
			retried++
		}
	}
	if storm != 20 || retried == 0 || len(reqs) < 30 {
		t.Errorf("%d requests, %d in the storm, %d retried", len(reqs), storm, retried)
	}
	// A connection dialled as the run ends may carry no request; every
	// try that reached the server came on a connection of its own.
	mu.Lock()
	defer mu.Unlock()
	if tries := n.Load(); int64(len(peers)) != tries {
		t.Errorf("%d connections carried %d tries: want one each", len(peers), tries)
	}
}

func TestReportSaysWhatFailed(t *testing.T) {
	r := &Report{Schedule: Schedule{Seed: 9, Duration: time.Minute}, Cities: []string{"hefei"}, Start: time.Now(),
		Invariants: []Invariant{Expect("all good", 3, nil), Expect("something", 2, []string{"wuhu-1 did not come back"})},
		Requests:   []Request{{City: 0, Tries: 1, Status: 302, Instance: "hefei-1"}}}
	var b bytes.Buffer
	r.Write(&b)
	for _, want := range []string{"PASS  all good: 3 checked, 0 bad", "FAIL  something: 2 checked, 1 bad", "counterexample: wuhu-1 did not come back", "hefei-1=1", "chaos run FAIL (seed 9)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if r.Pass() {
		t.Error("a failed invariant passes")
	}
}

func TestCheckFreshness(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	apply := Done{Fault: Fault{Kind: Apply, City: -1}, Begin: at(0), End: at(1), Detail: "applied revision 42: 1 server changed"}
	cut := Done{Fault: Fault{Kind: CutLink, City: 1}, Begin: at(5), End: at(20)}
	cityOf := func(instance string) int {
		if strings.HasPrefix(instance, "wuhu-") {
			return 1
		}
		return 0
	}
	tests := []struct {
		name    string
		samples []Sample
		done    []Done
		bad     int
	}{
		{"caught up in time", []Sample{{"hefei-1", at(2), 41}, {"hefei-1", at(3), 42}, {"hefei-1", at(30), 42}}, []Done{apply}, 0},
		{"behind past the lag", []Sample{{"hefei-1", at(3), 41}, {"hefei-1", at(12), 41}}, []Done{apply}, 1},
		{"behind while its city is cut off", []Sample{{"wuhu-1", at(12), 41}, {"wuhu-1", at(29), 41}}, []Done{apply, cut}, 0},
		{"behind after the cut plus the lag", []Sample{{"wuhu-1", at(31), 41}}, []Done{apply, cut}, 1},
		{"another city is not excused by the cut", []Sample{{"hefei-2", at(12), 41}}, []Done{apply, cut}, 1},
		{"no snapshot yet is not a revision", []Sample{{"hefei-1", at(12), 0}}, []Done{apply}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := CheckFreshness(tc.samples, tc.done, cityOf)
			if v.Bad != tc.bad {
				t.Errorf("bad %d, want %d: %v", v.Bad, tc.bad, v.Examples)
			}
		})
	}
}
