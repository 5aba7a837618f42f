package console

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/admin/statusview"
	"github.com/anysched/anysched/internal/province/opstate"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// wuhuAt is the province at +el seconds of a drill of wuhu (until +3 s):
// wuhu-1 is withdrawn from +1 s to +3 s; its plan (made at -2 s) until
// +1.5 s, then idle, and a new one from cityAgain (< 0: never); center-1
// plans wuhu from +1.5 s to +7 s when centerPlans.
func wuhuAt(el float64, centerPlans bool, cityAgain float64) *pb.StatusResponse {
	wuhu := &pb.Instance{Id: "wuhu-1", Role: "regional", Region: "wuhu", UpdatedAt: timestamppb.New(secs(el)), Announced: el < 1 || el >= 3}
	if !wuhu.Announced {
		wuhu.AnnounceReason = "drill"
	}
	switch {
	case el < 1.5:
		wuhu.Qoe = &pb.QoEPlan{Sessions: 400, Planned: 396, Fallback: 4, Starved: 1, Objective: 812.5, AtDesired: 0.95, Switches: 3, Drops: 1, AgeSeconds: el + 2}
	case cityAgain >= 0 && el >= cityAgain:
		wuhu.Qoe = &pb.QoEPlan{Sessions: 402, Planned: 400, Fallback: 2, Objective: 805, AtDesired: 0.94, Switches: 350, Drops: 12, AgeSeconds: el - cityAgain}
	default:
		wuhu.Qoe = &pb.QoEPlan{Idle: true}
	}
	center := &pb.Instance{Id: "center-1", Role: "central", UpdatedAt: timestamppb.New(secs(el))}
	if centerPlans && el >= 1.5 && el < 7 {
		center.Planning = []*pb.QoEPlan{{Region: "wuhu", Sessions: 380, Planned: 370, Fallback: 10, Starved: 6, Objective: 610.25, AtDesired: 0.71, Switches: 380, Drops: 150, AgeSeconds: el - 1.5}}
	}
	return &pb.StatusResponse{Instances: []*pb.Instance{wuhu, center}}
}

// TestDrillRunQoE: a drill's timeline tells who plans the city's viewers,
// its QoE table says how they fared before, during and after, and the
// drill is done once the city's first plan since its return is seen (or
// statusview.AfterWait has passed).
func TestDrillRunQoE(t *testing.T) {
	for _, tt := range []struct {
		name        string
		target      string
		centerPlans bool
		cityAgain   float64
		polls       []float64 // seconds after the start
		doneAt      float64   // the first poll settled at; < 0: never
		steps       []string  // the QoE steps, "+at text"
		phases      []string  // phase: who
		note        string
	}{
		{
			name: "the center plans the city", target: "wuhu", centerPlans: true, cityAgain: 6.5,
			polls: []float64{1, 1.5, 3.25, 6, 7, 7.5}, doneAt: 7,
			steps: []string{
				"+1.5 qoe: wuhu-1 stopped planning; center-1 plans wuhu (380 sessions)",
				"+7.0 qoe: center-1 stopped planning; wuhu-1 plans wuhu (402 sessions)",
			},
			phases: []string{"before: wuhu-1", "during: wuhu-1 → center-1", "after: wuhu-1"},
		},
		{
			name: "no center plan, no plan since the return", target: "wuhu", cityAgain: -1,
			polls: []float64{1, 1.5, 3.25, 6, 17.5, 18.5}, doneAt: 18.5,
			steps: []string{"+1.5 qoe: wuhu-1 stopped planning; " + statusview.NoCenterPlan},
			phases: []string{"before: wuhu-1", "during: wuhu-1 → " + statusview.NoCenterPlan,
				"after: " + statusview.NoCenterPlan + "; no new plan of wuhu's schedulers since their return"},
		},
		{
			name: "no QoE", target: "hefei", polls: []float64{1, 3.25, 6}, doneAt: 6,
			note: "no plan of hefei's viewers seen (no selection: qoe service there, or its schedulers report none)",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			target, err := opstate.ParseDrillTarget(tt.target)
			if err != nil {
				t.Fatal(err)
			}
			status := func(el float64) *pb.StatusResponse {
				st := wuhuAt(el, tt.centerPlans, tt.cityAgain)
				if tt.target == "hefei" { // the same drill, of a city without QoE
					for _, in := range st.Instances {
						in.Id, in.Qoe, in.Planning = strings.Replace(in.Id, "wuhu", "hefei", 1), nil, nil
						if in.Region != "" {
							in.Region = "hefei"
						}
					}
				}
				return st
			}
			r := newDrillRun(opstate.Drill{Target: target, Started: t0, Until: secs(3)}, "local", []string{tt.target + "-1"}, status(0), authz.Caller{})
			doneAt := -1.0
			for _, el := range tt.polls {
				r.observe(status(el), secs(el))
				if r.settled(secs(el)) {
					doneAt = el
					break
				}
			}
			if doneAt != tt.doneAt || (doneAt >= 0 && r.State != "done") {
				t.Errorf("done at +%vs (%s), want +%vs", doneAt, r.State, tt.doneAt)
			}
			var steps []string
			for _, e := range r.Events {
				if strings.HasPrefix(e.Text, "qoe:") {
					steps = append(steps, fmt.Sprintf("+%.1f %s", e.AtS, e.Text))
				}
			}
			if strings.Join(steps, "\n") != strings.Join(tt.steps, "\n") {
				t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(steps, "\n"), strings.Join(tt.steps, "\n"))
			}
			var phases []string
			for _, p := range r.QoE {
				phases = append(phases, p.Phase+": "+p.Who)
			}
			if strings.Join(phases, "\n") != strings.Join(tt.phases, "\n") {
				t.Errorf("phases:\n%s\nwant:\n%s", strings.Join(phases, "\n"), strings.Join(tt.phases, "\n"))
			}
			if r.QoENote != tt.note {
				t.Errorf("note %q, want %q", r.QoENote, tt.note)
			}
		})
	}
}

// A drill of the center follows no city's viewers.
func TestDrillRunCenterNoQoE(t *testing.T) {
	target, _ := opstate.ParseDrillTarget("center")
	r := newDrillRun(opstate.Drill{Target: target, Started: t0, Until: secs(1)}, "local", []string{"center-1"}, &pb.StatusResponse{}, authz.Caller{})
	r.observe(wuhuAt(1.5, true, -1), secs(1.5))
	if r.watch.QoE() != nil || r.QoE != nil || r.QoENote != "" {
		t.Errorf("a center drill has QoE: %v %q", r.QoE, r.QoENote)
	}
}

// TestDrillsPageQoE: the drills page shows a run's QoE table, "-" where a
// phase has nothing to say, and the note when nobody planned the city.
func TestDrillsPageQoE(t *testing.T) {
	con := newConsole(t, false)
	runs := []DrillRun{
		{Target: "wuhu", State: "done", QoE: []statusview.QoEPhase{
			{Phase: "before", Seen: true, Who: "wuhu-1", State: statusview.QoEState{Planners: []string{"wuhu-1"}, Sessions: 400, Planned: 396, Objective: 812.5, AtDesired: 0.95}, Switches: 3, Drops: 1, Plans: 1},
			{Phase: "during", Seen: true, NoPlan: true, Who: "wuhu-1 → " + statusview.NoCenterPlan},
			{Phase: "after", Who: "-"},
		}},
		{Target: "hefei", State: "done", QoENote: "no plan of hefei's viewers seen"},
	}
	var buf bytes.Buffer
	if err := con.pages.t["drills"].Execute(&buf, pageData{Page: "drills", Prefix: Prefix, Drills: runs}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		`<tr data-phase="before"><td>before</td><td>400</td><td>812.5</td><td>95.00%</td><td>0</td><td>0</td><td>3</td><td>1</td><td>1</td><td>wuhu-1</td></tr>`,
		`<tr data-phase="during"><td>during</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>0</td><td>wuhu-1 → center: no plan (viewers get their own rung)</td></tr>`,
		`<tr data-phase="after"><td>after</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td></tr>`,
		`<p class="muted qoe-note">qoe: no plan of hefei&#39;s viewers seen</p>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}
