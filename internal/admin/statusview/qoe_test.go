package statusview

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
)

var t0 = time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)

// at is t0 + s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// plan is one plan in a test's Status: made at made (seconds after t0),
// seen at the sample's time; region "" is wuhu.
type plan struct {
	by      string // "center-…" plans as a center, anything else as wuhu's scheduler
	region  string
	made    float64
	idle    bool
	sess    int64
	desired float64
	obj     float64
	sw, dr  int64
	fb, st  int64
}

// status is a Status taken at now (seconds) holding plans.
func status(now float64, plans ...plan) *pb.StatusResponse {
	st := &pb.StatusResponse{}
	ins := map[string]*pb.Instance{}
	for _, p := range plans {
		region := p.region
		if region == "" {
			region = "wuhu"
		}
		q := &pb.QoEPlan{Sessions: p.sess, Planned: p.sess - p.fb, Fallback: p.fb, Starved: p.st, Objective: p.obj,
			AtDesired: p.desired, Switches: p.sw, Drops: p.dr, Idle: p.idle, AgeSeconds: now - p.made}
		in := ins[p.by]
		if in == nil {
			in = &pb.Instance{Id: p.by, Role: "regional", Region: region}
			if strings.HasPrefix(p.by, "center") {
				in.Role, in.Region = "central", ""
			}
			ins[p.by] = in
			st.Instances = append(st.Instances, in)
		}
		if in.Role == "central" {
			q.Region = region
			in.Planning = append(in.Planning, q)
		} else {
			in.Qoe = q
		}
	}
	return st
}

func TestPlansByRegion(t *testing.T) {
	st := status(10,
		plan{by: "wuhu-1", made: 9, sess: 40},
		plan{by: "wuhu-2", made: 8, idle: true}, // holds nobody
		plan{by: "hefei-1", region: "hefei", made: 7.5, sess: 5},
		plan{by: "center-1", region: "bozhou", made: 9.5, sess: 7},
		plan{by: "center-1", region: "bengbu", made: 9.5, idle: true},
		plan{by: "center-2", region: "wuhu", made: 9.75, sess: 3},
	)
	st.Instances = append(st.Instances,
		&pb.Instance{Id: "wuhu-3", Role: "regional", Region: "wuhu"},               // no QoE service
		&pb.Instance{Id: "center-3", Role: "central", Planning: []*pb.QoEPlan{{}}}) // a plan of no region
	got := map[string][]string{}
	for region, ps := range PlansByRegion(st, at(10)) {
		for _, p := range ps {
			got[region] = append(got[region], fmt.Sprintf("%s central=%t made=%.2f sessions=%d", p.Planner, p.Central, p.MadeAt.Sub(t0).Seconds(), p.QoE.GetSessions()))
		}
	}
	want := map[string][]string{
		"wuhu":   {"center-2 central=true made=9.75 sessions=3", "wuhu-1 central=false made=9.00 sessions=40"},
		"hefei":  {"hefei-1 central=false made=7.50 sessions=5"},
		"bozhou": {"center-1 central=true made=9.50 sessions=7"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("plans:\n%v\nwant:\n%v", got, want)
	}
	if n := len(RegionPlans(st, "bengbu", at(10))); n != 0 {
		t.Errorf("bengbu: %d plans, want none (its only plan is idle)", n)
	}
}

func TestStateOf(t *testing.T) {
	for _, tt := range []struct {
		name  string
		plans []plan
		want  QoEState
	}{
		{"nobody", nil, QoEState{}},
		{"one", []plan{{by: "wuhu-1", sess: 100, fb: 10, st: 4, desired: 0.9, obj: 500, sw: 7, dr: 2}},
			QoEState{Planners: []string{"wuhu-1"}, Sessions: 100, Planned: 90, Fallback: 10, Starved: 4, Objective: 500, AtDesired: 0.9, Switches: 7, Drops: 2}},
		{"two, weighted by planned sessions", []plan{{by: "wuhu-2", sess: 300, desired: 1, obj: 10}, {by: "center-1", sess: 100, desired: 0.6, obj: 2}},
			QoEState{Planners: []string{"center-1", "wuhu-2"}, Sessions: 400, Planned: 400, Objective: 12, AtDesired: 0.9}},
		{"nothing planned", []plan{{by: "wuhu-1", sess: 5, fb: 5, desired: 0.7}},
			QoEState{Planners: []string{"wuhu-1"}, Sessions: 5, Fallback: 5}},
	} {
		got := StateOf(RegionPlans(status(1, tt.plans...), "wuhu", at(1)))
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// step is one thing a drill's watch sees, at seconds after t0.
type step struct {
	at        float64
	withdrawn bool // marked before the sample
	back      bool
	plans     []plan
}

// phaseWant is a phase in brief: who, sessions, objective, share at the
// desired bitrate, switches/drops/plans, fallback/starved.
func phaseBrief(p QoEPhase) string {
	return fmt.Sprintf("%s: %s | %d obj=%.0f desired=%.2f | %d/%d/%d | %d/%d", p.Phase, p.Who, p.State.Sessions, p.State.Objective,
		p.State.AtDesired, p.Switches, p.Drops, p.Plans, p.State.Fallback, p.State.Starved)
}

func TestQoEWatch(t *testing.T) {
	city := func(made float64, sess int64, desired float64, sw, dr int64) plan {
		return plan{by: "wuhu-1", made: made, sess: sess, desired: desired, obj: float64(sess), sw: sw, dr: dr}
	}
	center := func(made float64, sess int64, desired float64, sw, dr int64) plan {
		return plan{by: "center-1", made: made, sess: sess, desired: desired, obj: float64(sess) / 2, sw: sw, dr: dr, fb: 5, st: 2}
	}
	for _, tt := range []struct {
		name      string
		steps     []step
		lines     []string // "+at line"
		phases    []string
		planned   bool
		awaitAt   float64 // Awaiting is asked at this time
		awaitWant bool
	}{
		{
			name: "the center plans the city meanwhile",
			steps: []step{
				{at: 0, plans: []plan{city(-10, 500, 0.9, 50, 20)}},
				{at: 0.5, plans: []plan{city(0, 400, 0.95, 3, 1)}}, // before is the last sample only
				{at: 1, withdrawn: true, plans: []plan{city(0, 400, 0.95, 3, 1)}},
				{at: 1.5, plans: []plan{center(1.4, 380, 0.7, 300, 120)}},
				{at: 2.5, plans: []plan{center(1.38, 380, 0.7, 300, 120)}}, // the same plan, its age reckoned later
				{at: 3.5, plans: []plan{center(3.4, 390, 0.75, 20, 5)}},
				{at: 4, back: true, plans: []plan{center(3.4, 390, 0.75, 20, 5)}},
				{at: 4.25, plans: []plan{center(3.4, 390, 0.75, 20, 5), city(4.1, 10, 1, 10, 0)}},
				{at: 5, plans: []plan{city(4.1, 10, 1, 10, 0)}},
				{at: 6.5, plans: []plan{city(6, 395, 0.93, 380, 4)}},
			},
			lines: []string{
				"+1.5 qoe: wuhu-1 stopped planning; center-1 plans wuhu (380 sessions)",
				"+4.25 qoe: wuhu-1 plans wuhu (10 sessions)",
				"+5 qoe: center-1 stopped planning",
			},
			phases: []string{
				"before: wuhu-1 | 400 obj=400 desired=0.95 | 3/1/1 | 0/0",
				"during: wuhu-1 → center-1 | 390 obj=195 desired=0.75 | 320/125/2 | 5/2",
				"after: center-1 → wuhu-1 | 395 obj=395 desired=0.93 | 390/4/2 | 0/0",
			},
			planned: true, awaitAt: 6.5, awaitWant: false,
		},
		{
			// Centers make no plan for a city yet: the city's scheduler
			// stops planning and nobody takes over; no new plan of the
			// city's own comes before the watch ends.
			name: "no center plan",
			steps: []step{
				{at: 0, plans: []plan{city(-1, 400, 0.95, 3, 1)}},
				{at: 1, withdrawn: true, plans: []plan{city(-1, 400, 0.95, 3, 1)}},
				{at: 1.25, plans: []plan{city(1.2, 200, 0.97, 0, 0)}}, // it still plans what its table holds
				{at: 2},
				{at: 3, back: true},
				{at: 3.5},
			},
			lines: []string{"+2 qoe: wuhu-1 stopped planning; " + NoCenterPlan},
			phases: []string{
				"before: wuhu-1 | 400 obj=400 desired=0.95 | 3/1/1 | 0/0",
				"during: wuhu-1 → " + NoCenterPlan + " | 0 obj=0 desired=0.00 | 0/0/1 | 0/0",
				"after: " + NoCenterPlan + "; no new plan of wuhu's schedulers since their return | 0 obj=0 desired=0.00 | 0/0/0 | 0/0",
			},
			planned: true, awaitAt: 3.5, awaitWant: true,
		},
		{
			name: "waits no longer than AfterWait",
			steps: []step{
				{at: 0, plans: []plan{city(-1, 400, 0.95, 3, 1)}},
				{at: 1, withdrawn: true},
				{at: 3, back: true},
			},
			lines: []string{"+1 qoe: wuhu-1 stopped planning; " + NoCenterPlan},
			phases: []string{
				"before: wuhu-1 | 400 obj=400 desired=0.95 | 3/1/1 | 0/0",
				"during: " + NoCenterPlan + " | 0 obj=0 desired=0.00 | 0/0/0 | 0/0",
				"after: " + NoCenterPlan + "; no new plan of wuhu's schedulers since their return | 0 obj=0 desired=0.00 | 0/0/0 | 0/0",
			},
			planned: true, awaitAt: 3 + AfterWait.Seconds(), awaitWant: false,
		},
		{
			// The city's scheduler keeps a plan through the drill: one
			// made before its return is not the after.
			name: "a plan from before the return",
			steps: []step{
				{at: 0, plans: []plan{city(-1, 400, 0.95, 3, 1)}},
				{at: 1, withdrawn: true, plans: []plan{city(-1, 400, 0.95, 3, 1)}},
				{at: 2.5, plans: []plan{city(2, 100, 0.99, 0, 0)}},
				{at: 3, back: true, plans: []plan{city(2, 100, 0.99, 0, 0)}},
				{at: 3.5, plans: []plan{city(2, 100, 0.99, 0, 0)}},
			},
			phases: []string{
				"before: wuhu-1 | 400 obj=400 desired=0.95 | 3/1/1 | 0/0",
				"during: wuhu-1 | 100 obj=100 desired=0.99 | 0/0/1 | 0/0",
				"after: wuhu-1 (no new plan of wuhu's schedulers since their return) | 100 obj=100 desired=0.99 | 0/0/0 | 0/0",
			},
			planned: true, awaitAt: 3.5, awaitWant: true,
		},
		{
			name: "never back",
			steps: []step{
				{at: 0, plans: []plan{city(-1, 400, 0.95, 3, 1)}},
				{at: 1, withdrawn: true, plans: []plan{center(0.9, 50, 1, 50, 0)}},
			},
			lines: []string{"+1 qoe: wuhu-1 stopped planning; center-1 plans wuhu (50 sessions)"},
			phases: []string{
				"before: wuhu-1 | 400 obj=400 desired=0.95 | 3/1/1 | 0/0",
				"during: center-1 | 50 obj=25 desired=1.00 | 0/0/0 | 5/2", // made before the withdrawal: not counted
				"after: - | 0 obj=0 desired=0.00 | 0/0/0 | 0/0",
			},
			planned: true, awaitAt: 100, awaitWant: false,
		},
		{
			name: "no QoE service",
			steps: []step{
				{at: 0}, {at: 1, withdrawn: true}, {at: 3, back: true}, {at: 3.5},
			},
			phases: []string{
				"before: no plan of wuhu's viewers | 0 obj=0 desired=0.00 | 0/0/0 | 0/0",
				"during: " + NoCenterPlan + " | 0 obj=0 desired=0.00 | 0/0/0 | 0/0",
				"after: " + NoCenterPlan + "; no new plan of wuhu's schedulers since their return | 0 obj=0 desired=0.00 | 0/0/0 | 0/0",
			},
			planned: false, awaitAt: 3.5, awaitWant: false,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := NewQoEWatch("wuhu")
			var lines []string
			for _, s := range tt.steps {
				if s.withdrawn {
					w.Withdrawn(at(s.at))
				}
				if s.back {
					w.Back(at(s.at))
				}
				if l := w.Observe(status(s.at, s.plans...), at(s.at)); l != "" {
					lines = append(lines, fmt.Sprintf("+%v %s", s.at, l))
				}
			}
			if !slices.Equal(lines, tt.lines) {
				t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(tt.lines, "\n"))
			}
			var phases []string
			for _, p := range w.Phases() {
				phases = append(phases, phaseBrief(p))
			}
			if !slices.Equal(phases, tt.phases) {
				t.Errorf("phases:\n%s\nwant:\n%s", strings.Join(phases, "\n"), strings.Join(tt.phases, "\n"))
			}
			if w.Planned() != tt.planned {
				t.Errorf("Planned %t, want %t", w.Planned(), tt.planned)
			}
			if got := w.Awaiting(at(tt.awaitAt)); got != tt.awaitWant {
				t.Errorf("Awaiting at +%vs: %t, want %t", tt.awaitAt, got, tt.awaitWant)
			}
		})
	}
}

// The withdrawal and the return count once: a second mark moves nothing.
func TestQoEWatchMarksOnce(t *testing.T) {
	w := NewQoEWatch("wuhu")
	w.Withdrawn(at(1))
	w.Withdrawn(at(5))
	w.Back(at(6))
	w.Back(at(9))
	w.Observe(status(2, plan{by: "wuhu-1", made: 1.5, sess: 1}), at(2))
	if p := w.Phases(); !p[PhaseDuring].Seen || p[PhaseBefore].Seen {
		t.Errorf("a sample at +2s after a withdrawal at +1s: %+v", p)
	}
	if !w.Awaiting(at(6 + AfterWait.Seconds() - 0.1)) {
		t.Error("not awaiting a new plan within AfterWait of the first return")
	}
	if math.IsNaN(w.Phases()[PhaseDuring].State.AtDesired) {
		t.Error("NaN share")
	}
}

// The center yields to the returning city a moment before the city's
// first plan: the during phase keeps the center's last plans, not that
// moment without any.
func TestQoEWatchDuringKeepsTheCentersLastPlans(t *testing.T) {
	w := NewQoEWatch("wuhu")
	w.Observe(status(0, plan{by: "wuhu-1", made: 0, sess: 400, obj: 400, desired: 0.95}), at(0))
	w.Withdrawn(at(1))
	w.Observe(status(2, plan{by: "center-1", made: 2, sess: 390, obj: 380, desired: 0.9, sw: 2}), at(2))
	w.Back(at(5))
	w.Observe(status(5.5), at(5.5)) // the center yielded; the city has no plan yet
	w.Observe(status(7, plan{by: "wuhu-1", made: 6.5, sess: 401, obj: 398, desired: 0.94}), at(7))
	ph := w.Phases()
	if d := ph[PhaseDuring]; d.NoPlan || d.State.Sessions != 390 || !slices.Contains(d.State.Planners, "center-1") || d.Switches != 2 {
		t.Fatalf("during: %+v", d)
	}
	if a := ph[PhaseAfter]; a.State.Sessions != 401 || a.Stale {
		t.Fatalf("after: %+v", a)
	}
}
