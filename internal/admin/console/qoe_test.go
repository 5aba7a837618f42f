package console

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/statusview"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

var t0 = time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)

// secs is t0 + s seconds.
func secs(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// planned is a status where each region named has a plan by its first
// scheduler ("<region>-1"): 100 sessions, objective obj, 90% at desired.
func planned(obj float64, regions ...string) *pb.StatusResponse {
	st := &pb.StatusResponse{}
	for _, r := range regions {
		st.Instances = append(st.Instances, &pb.Instance{Id: r + "-1", Role: "regional", Region: r,
			Qoe: &pb.QoEPlan{Sessions: 100, Planned: 100, Objective: obj, AtDesired: 0.9}})
	}
	return st
}

// brief is samples as "at:objective", "at:-" without a plan.
func brief(ss []QoESample) string {
	var b []string
	for _, s := range ss {
		v := "-"
		if s.Plan {
			v = fmt.Sprint(s.Objective)
		}
		b = append(b, fmt.Sprintf("%g:%s", time.UnixMilli(s.At).Sub(t0).Seconds(), v))
	}
	return strings.Join(b, " ")
}

// TestQoEHistory: a sample per region and period, at once when a plan
// appears or goes; a region nobody plans is forgotten after the window
// unless the topology has it; only the window is returned.
func TestQoEHistory(t *testing.T) {
	type obs struct {
		at float64
		st *pb.StatusResponse
	}
	every := func(from, to, step float64, st *pb.StatusResponse) []obs {
		var out []obs
		for s := from; s <= to; s += step {
			out = append(out, obs{s, st})
		}
		return out
	}
	for _, tt := range []struct {
		name    string
		obs     []obs
		known   bool
		now     float64
		want    map[string]string // by region
		regions int               // rings kept
	}{
		{"a sample a period", every(0, 11, 1, planned(7, "wuhu")), false, 11,
			map[string]string{"wuhu": "0:7 5:7 10:7"}, 1},
		{"a plan going and coming back is sampled at once", []obs{{0, planned(7, "wuhu")}, {1, planned(0)}, {2, planned(0)}, {3, planned(8, "wuhu")}, {6, planned(0)}, {9, planned(0)}},
			false, 9, map[string]string{"wuhu": "0:7 1:- 3:8 6:-"}, 1},
		{"regions apart", []obs{{0, planned(7, "wuhu", "hefei")}, {5, planned(9, "hefei")}}, false, 5,
			map[string]string{"wuhu": "0:7 5:-", "hefei": "0:7 5:9"}, 2},
		{"forgotten after the window without a plan", []obs{{0, planned(7, "wuhu")}, {300, planned(0)}, {601, planned(0)}}, false, 601,
			map[string]string{"wuhu": ""}, 0},
		{"kept while the topology has it", []obs{{0, planned(7, "wuhu")}, {300, planned(0)}, {601, planned(0)}}, true, 601,
			map[string]string{"wuhu": "300:- 601:-"}, 1},
		{"only the window", every(0, 1800, 5, planned(7, "wuhu")), false, 1800,
			map[string]string{"wuhu": brief(func() []QoESample {
				var ss []QoESample
				for s := 1200.0; s <= 1800; s += 5 {
					ss = append(ss, QoESample{At: secs(s).UnixMilli(), Plan: true, Objective: 7})
				}
				return ss
			}())}, 1},
	} {
		h := newQoEHistory(qoeEvery, qoeWindow)
		for _, o := range tt.obs {
			h.observe(o.st, secs(o.at), func(string) bool { return tt.known })
		}
		for region, want := range tt.want {
			if got := brief(h.samples(region, secs(tt.now))); got != want {
				t.Errorf("%s: %s: %s, want %s", tt.name, region, got, want)
			}
		}
		if len(h.regions) != tt.regions {
			t.Errorf("%s: %d regions kept, want %d", tt.name, len(h.regions), tt.regions)
		}
		for region, r := range h.regions {
			if r.n > len(r.buf) || len(r.buf) != 2*int(qoeWindow/qoeEvery) {
				t.Errorf("%s: %s holds %d of %d", tt.name, region, r.n, len(r.buf))
			}
		}
	}
}

func TestSparkPath(t *testing.T) {
	s := func(at, v float64) QoESample { return QoESample{At: secs(at).UnixMilli(), Plan: true, Objective: v} }
	gap := func(at float64) QoESample { return QoESample{At: secs(at).UnixMilli()} }
	for _, tt := range []struct {
		name string
		ss   []QoESample
		want string
	}{
		{"nothing", nil, ""},
		{"low, then high", []QoESample{s(595, 0), s(600, 10)}, "M158.7,29.0 h0.1 L160.0,3.0"},
		{"the window's ends: dots", []QoESample{s(0, 0), s(600, 10)}, "M0.0,29.0 h0.1 M160.0,3.0 h0.1"},
		{"older than the window", []QoESample{s(-5, 10), s(300, 5), s(305, 5)}, "M80.0,16.0 h0.1 L81.3,16.0"},
		{"no plan breaks the line", []QoESample{s(300, 0), gap(305), s(310, 10)}, "M80.0,29.0 h0.1 M82.7,3.0 h0.1"},
		{"no sample for three periods breaks it", []QoESample{s(300, 0), s(305, 0), s(321, 0)}, "M80.0,29.0 h0.1 L81.3,29.0 M85.6,29.0 h0.1"},
		{"out of range is at the edge", []QoESample{s(600, 20)}, "M160.0,3.0 h0.1"},
	} {
		if got := sparkPath(tt.ss, secs(600), qoeWindow, qoeEvery, 0, 10, func(s QoESample) float64 { return s.Objective }); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestObjectiveRange(t *testing.T) {
	s := func(v float64) QoESample { return QoESample{Plan: true, Objective: v} }
	for _, tt := range []struct {
		name   string
		ss     []QoESample
		lo, hi float64
	}{
		{"none", nil, 0, 1},
		{"no plan", []QoESample{{Objective: 50}}, 0, 1},
		{"flat", []QoESample{s(50), s(50)}, 49.5, 50.5},
		{"spread", []QoESample{s(40), {Objective: 1000}, s(60)}, 40, 60},
	} {
		if lo, hi := objectiveRange(tt.ss); lo != tt.lo || hi != tt.hi {
			t.Errorf("%s: %v..%v, want %v..%v", tt.name, lo, hi, tt.lo, tt.hi)
		}
	}
}

// TestQoEView: who plans each region's viewers now, and why nobody does.
func TestQoEView(t *testing.T) {
	h := newQoEHistory(qoeEvery, qoeWindow)
	h.observe(planned(7, "wuhu", "hefei", "bozhou"), secs(0), nil)
	st := planned(9, "wuhu")
	st.Instances = append(st.Instances,
		&pb.Instance{Id: "hefei-1", Role: "regional", Region: "hefei", Qoe: &pb.QoEPlan{Idle: true}},
		&pb.Instance{Id: "center-1", Role: "central", Planning: []*pb.QoEPlan{{Region: "bengbu", Sessions: 4, Planned: 4, Objective: 3, AtDesired: 1}}})
	cities := []City{{Name: "wuhu", Route: "announced"}, {Name: "hefei", Route: "announced"}, {Name: "bozhou", Route: "drilled"}, {Name: "bengbu", Route: "center"}}
	var got []string
	for _, v := range h.view(st, secs(5), cities) {
		got = append(got, fmt.Sprintf("%s: %s plan=%t samples=%d obj=%q", v.Region, v.Who, v.Plan, len(v.History), v.ObjectivePath))
	}
	want := []string{
		`bengbu: center-1 plan=true samples=0 obj=""`, // planned now, not sampled yet
		`bozhou: ` + statusview.NoCenterPlan + ` plan=false samples=1 obj="M158.7,16.0 h0.1"`,
		`hefei: no plan (its schedulers saw no STB lately) plan=false samples=1 obj="M158.7,16.0 h0.1"`,
		`wuhu: wuhu-1 plan=true samples=1 obj="M158.7,16.0 h0.1"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("view:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestKbps(t *testing.T) {
	for k, want := range map[float64]string{0: "-", 850: "850 kb/s", 12500: "12.5 Mb/s", 3.2e6: "3.20 Gb/s"} {
		if got := kbps(k); got != want {
			t.Errorf("%v: %s, want %s", k, got, want)
		}
	}
}
