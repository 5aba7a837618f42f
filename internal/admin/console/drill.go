package console

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/admin/drillwatch"
	"github.com/anysched/anysched/internal/admin/statusview"
	"github.com/anysched/anysched/internal/province/opstate"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// keepDrills is how many drills the console keeps, newest last.
const keepDrills = 20

// DrillRun is one failover drill the console follows: its timeline, as
// the instances' route state and the centers' answers show it.
type DrillRun struct {
	Target    string      `json:"target"`
	By        string      `json:"by"` // who started it ("" when not from this console)
	Started   int64       `json:"started"`
	Until     int64       `json:"until"`
	Instances []string    `json:"instances"`
	State     RunState    `json:"state"`
	Events    []DrillStep `json:"events"`
	Report    string      `json:"report,omitempty"`
	// QoE is the QoE of the city's viewers before, during and after (once
	// a plan of them was seen); QoENote says why there is none.
	QoE     []statusview.QoEPhase `json:"qoe,omitempty"`
	QoENote string                `json:"qoe_note,omitempty"`

	start, until time.Time
	watch        *drillwatch.Watch
	caller       authz.Caller
}

// RunState is where a followed drill stands.
type RunState string

// The states of a followed drill.
const (
	Running    RunState = "running"    // the route is withdrawn
	Returning  RunState = "returning"  // its time is up: the instances announce again
	Done       RunState = "done"       // every awaited instance is back; the report is made
	Incomplete RunState = "incomplete" // not every instance was back drillwatch.Grace after its end
)

// DrillStep is one line of a drill's timeline.
type DrillStep struct {
	AtS  float64 `json:"at_s"` // seconds since the start
	Text string  `json:"text"`
}

type drills struct {
	con  *Console
	mu   sync.Mutex
	runs []*DrillRun
	kick chan *DrillRun
}

func newDrills(con *Console) *drills {
	return &drills{con: con, kick: make(chan *DrillRun, keepDrills)}
}

// run follows each drill handed to it until ctx ends.
func (d *drills) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-d.kick:
			wg.Go(func() { d.follow(ctx, r) })
		}
	}
}

// track starts following a drill unless it is followed already; pre is the
// province's status before it (nil: as first seen).
func (d *drills) track(dr opstate.Drill, by string, instances []string, pre *pb.StatusResponse, c authz.Caller) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.runs {
		if r.Target == dr.Target.String() && (r.start.Equal(dr.Started) || (by == "" && r.until.Equal(dr.Until))) {
			return
		}
	}
	r := newDrillRun(dr, by, instances, pre, c)
	d.runs = append(d.runs, r)
	if len(d.runs) > keepDrills {
		d.runs = d.runs[len(d.runs)-keepDrills:]
	}
	select {
	case d.kick <- r:
	default: // the follower is behind: the run shows as started
	}
}

// newDrillRun is a drill to follow, as started (pre: the status before).
func newDrillRun(dr opstate.Drill, by string, instances []string, pre *pb.StatusResponse, c authz.Caller) *DrillRun {
	r := &DrillRun{Target: dr.Target.String(), By: by, start: dr.Started, until: dr.Until, Started: dr.Started.UnixMilli(), Until: dr.Until.UnixMilli(),
		Instances: instances, State: Running, caller: c}
	if r.start.IsZero() {
		r.start, r.Started = time.Now(), time.Now().UnixMilli()
	}
	who := "by " + by
	if by == "" {
		who = "(not from this console)"
	}
	r.step(r.start, fmt.Sprintf("drill of %s started %s, until %s", r.Target, who, dr.Until.Local().Format(time.TimeOnly)))
	r.watch, _ = drillwatch.New(dr.Target, r.start, dr.Until, instances, pre) // the timeline leaves out who is not waited for
	return r
}

func (r *DrillRun) step(at time.Time, text string) {
	r.Events = append(r.Events, DrillStep{AtS: at.Sub(r.start).Seconds(), Text: text})
}

// list is a copy of the runs, newest first.
func (d *drills) list() []DrillRun {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]DrillRun, 0, len(d.runs))
	for _, r := range d.runs {
		c := *r
		c.Events = slices.Clone(r.Events)
		sort.SliceStable(c.Events, func(i, j int) bool { return c.Events[i].AtS < c.Events[j].AtS })
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started > out[j].Started })
	return out
}

// follow polls Status as the caller who started (or first saw) the drill
// until the watch settles (every instance that announced before announces
// again and the centers have stopped answering the city), or
// drillwatch.Grace after its end.
func (d *drills) follow(ctx context.Context, r *DrillRun) {
	tick := time.NewTicker(drillwatch.Poll)
	defer tick.Stop()
	for {
		var st *pb.StatusResponse
		err := d.con.call(ctx, r.caller, pb.Admin_Status_FullMethodName, func(ctx context.Context) (err error) {
			st, err = d.con.c.Service.Status(ctx, &pb.StatusRequest{})
			return err
		})
		now := time.Now()
		if err == nil {
			d.con.qoe.observe(st, now, d.con.knownRegion)
		}
		d.mu.Lock()
		if err == nil {
			r.observe(st, now)
		}
		over := r.settled(now)
		if notBack := r.watch.NotBack(); !over && now.After(r.until.Add(drillwatch.Grace)) && len(notBack) > 0 {
			r.State = Incomplete
			r.Report = "not every instance announced again within 60 s of the drill's end: " + fmt.Sprint(notBack)
			over = true
		}
		d.mu.Unlock()
		if over {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// observe takes the province's status at now into the timeline.
func (r *DrillRun) observe(st *pb.StatusResponse, now time.Time) {
	for _, ev := range r.watch.Observe(st, now) {
		if !ev.At.IsZero() { // notes (who is not waited for) stay out of the timeline
			r.step(ev.At, ev.Text)
		}
	}
	if r.Instances == nil {
		r.Instances = r.watch.Instances() // learnt from the first status
	}
	if now.After(r.until) && r.State == Running {
		r.State = Returning
		r.step(r.until, "the drill's time is up: the city's schedulers may announce again")
	}
	if q := r.watch.QoE(); q != nil && q.Planned() {
		r.QoE = q.Phases() // a new slice: copies made by list stay as they were
	}
}

// settled: the drill is over and its watch settled; then the report is
// made.
func (r *DrillRun) settled(now time.Time) bool {
	if now.Before(r.until) || !r.watch.Settled(now) {
		return false
	}
	r.State = Done
	if q := r.watch.QoE(); q != nil && !q.Planned() {
		r.QoENote = "no plan of " + r.Target + "'s viewers seen (no selection: qoe service there, or its schedulers report none)"
	}
	awaited, t := r.watch.Awaited(), r.watch.Takeover()
	switch {
	case len(awaited) == 0:
		r.Report = "none of the target's schedulers announced a route before the drill: nothing was withdrawn"
	case t.Answered == 0:
		r.Report = fmt.Sprintf("%s announced again; no center answered any STB of %s: there was no traffic from the city", strings.Join(awaited, ", "), r.Target)
	default:
		gb := t.GaveBack()
		r.step(gb.At, gb.Text)
		r.Report = fmt.Sprintf("the center answered %d requests of %s's STBs from +%.1fs to +%.1fs, %d of them with an error; %s announced again",
			t.Answered, r.Target, t.From.Sub(r.start).Seconds(), t.Last.Sub(r.start).Seconds(), t.Failed, strings.Join(awaited, ", "))
	}
	r.step(now, "drill done")
	return true
}
