package console

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/authz"
	"github.com/anysched/anysched/internal/opstate"
	"github.com/anysched/anysched/internal/statusview"
	"github.com/anysched/anysched/internal/store"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// Following a drill: as schedctl drill failover does, through Status.
const (
	drillPoll = 250 * time.Millisecond
	// drillQuiet: the city is back when no center has answered its STBs
	// for this long (more than the 2 s between two registrations).
	drillQuiet = 2500 * time.Millisecond
	// drillGrace: how long past its end a drill is followed at most.
	drillGrace = 60 * time.Second
	keepDrills = 20
)

// DrillRun is one failover drill the console follows: its timeline, as
// the instances' route state and the centers' answers show it.
type DrillRun struct {
	Target    string      `json:"target"`
	By        string      `json:"by"` // who started it ("" when not from this console)
	Started   int64       `json:"started"`
	Until     int64       `json:"until"`
	Instances []string    `json:"instances"`
	State     string      `json:"state"` // running, returning, done, incomplete
	Events    []DrillStep `json:"events"`
	Report    string      `json:"report,omitempty"`
	// QoE is the QoE of the city's viewers before, during and after (once
	// a plan of them was seen); QoENote says why there is none.
	QoE     []statusview.QoEPhase `json:"qoe,omitempty"`
	QoENote string                `json:"qoe_note,omitempty"`

	start, until time.Time
	qoe          *statusview.QoEWatch // nil for a drill of the center
	firstOut     time.Time            // the first withdrawal seen
	waitFor      []string             // instances that announced before: their return is awaited
	withdrawn    map[string]bool
	back         map[string]bool
	base         map[string]uint64 // centers' answers to the city's STBs at the start
	answered     uint64
	failed       uint64
	tookOver     time.Time
	lastMoved    time.Time // when a center's count last moved
	lastCount    uint64
	lastAnswer   time.Time
	allBack      time.Time
	caller       authz.Caller
}

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
		Instances: instances, State: "running", withdrawn: map[string]bool{}, back: map[string]bool{}, base: map[string]uint64{}, caller: c}
	if r.start.IsZero() {
		r.start, r.Started = time.Now(), time.Now().UnixMilli()
	}
	if !dr.Target.Center {
		r.qoe = statusview.NewQoEWatch(dr.Target.Region)
	}
	who := "by " + by
	if by == "" {
		who = "(not from this console)"
	}
	r.step(r.start, fmt.Sprintf("drill of %s started %s, until %s", r.Target, who, dr.Until.Local().Format(time.TimeOnly)))
	if pre != nil {
		r.waitFor = []string{}
		for id, t := range statusview.CenterTraffic(pre, dr.Target.Region) {
			r.base[id] = t.GetAnswered()
		}
		for _, id := range instances {
			for _, in := range pre.GetInstances() {
				if in.GetId() == id && in.GetAnnounced() {
					r.waitFor = append(r.waitFor, id)
				}
			}
		}
		if r.qoe != nil {
			r.qoe.Observe(pre, r.start) // before: as it stood when the drill was started
		}
	} // else: learnt from the first status
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
// until every instance that announced before announces again and the
// centers have stopped answering the city, or drillGrace after its end.
func (d *drills) follow(ctx context.Context, r *DrillRun) {
	tick := time.NewTicker(drillPoll)
	defer tick.Stop()
	first := true
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
			if first && r.waitFor == nil {
				r.learn(st)
			}
			first = false
			r.observe(st, now)
		}
		over := r.settled(now)
		if !over && now.After(r.until.Add(drillGrace)) && len(r.notBack()) > 0 {
			r.State = "incomplete"
			r.Report = "not every instance announced again within 60 s of the drill's end: " + fmt.Sprint(r.notBack())
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

// learn, for a drill first seen running: the instances of the target, and
// which of them are out because of it.
func (r *DrillRun) learn(st *pb.StatusResponse) {
	target, _ := opstate.ParseDrillTarget(r.Target)
	for _, in := range st.GetInstances() {
		if (target.Center && in.GetRole() == "central") || (!target.Center && in.GetRegion() == target.Region) {
			if !slices.Contains(r.Instances, in.GetId()) {
				r.Instances = append(r.Instances, in.GetId())
			}
			if in.GetAnnounceReason() != store.NotAnnouncedModeNone {
				r.waitFor = append(r.waitFor, in.GetId())
			}
		}
	}
	if r.waitFor == nil {
		r.waitFor = []string{}
	}
}

func (r *DrillRun) observe(st *pb.StatusResponse, now time.Time) {
	for _, in := range st.GetInstances() {
		id := in.GetId()
		if !slices.Contains(r.waitFor, id) || in.GetUpdatedAt().AsTime().Before(r.start) {
			continue
		}
		switch {
		case !r.withdrawn[id] && !in.GetAnnounced():
			r.withdrawn[id] = true
			r.step(now, fmt.Sprintf("%s withdrew its route (%s)", id, in.GetAnnounceReason()))
			if r.firstOut.IsZero() {
				r.firstOut = now
			}
		case r.withdrawn[id] && !r.back[id] && in.GetAnnounced():
			r.back[id] = true
			r.step(now, id+" announces again")
		}
	}
	if now.After(r.until) && r.State == "running" {
		r.State = "returning"
		r.step(r.until, "the drill's time is up: the city's schedulers may announce again")
	}
	target, _ := opstate.ParseDrillTarget(r.Target)
	if target.Center {
		return
	}
	r.observeQoE(st, now)
	var answered, failed uint64
	var last time.Time
	for id, t := range statusview.CenterTraffic(st, target.Region) {
		if t.GetAnswered() <= r.base[id] {
			continue
		}
		answered += t.GetAnswered() - r.base[id]
		failed += t.GetFailed()
		took := t.GetRunStart().AsTime()
		if took.Before(r.start) {
			took = r.start
		}
		if r.tookOver.IsZero() || took.Before(r.tookOver) {
			if r.tookOver.IsZero() {
				r.step(took, fmt.Sprintf("the center (%s) answered its first %s STB: it took the city over", id, target.Region))
			}
			r.tookOver = took
		}
		if l := t.GetLast().AsTime(); l.After(last) {
			last = l
		}
	}
	if answered != r.lastCount {
		r.lastCount, r.lastMoved = answered, now
	}
	r.answered, r.failed = answered, failed
	if last.After(r.lastAnswer) {
		r.lastAnswer = last
	}
}

// observeQoE hands a sample to the QoE watch, after the withdrawal and the
// return it shows: a change of the viewers' planners is a step.
func (r *DrillRun) observeQoE(st *pb.StatusResponse, now time.Time) {
	if r.qoe == nil {
		return
	}
	if !r.firstOut.IsZero() {
		r.qoe.Withdrawn(r.firstOut)
	}
	if len(r.waitFor) > 0 && len(r.notBack()) == 0 {
		r.qoe.Back(now)
	}
	if line := r.qoe.Observe(st, now); line != "" {
		r.step(now, line)
	}
	if r.qoe.Planned() {
		r.QoE = r.qoe.Phases() // a new slice: copies made by list stay as they were
	}
}

func (r *DrillRun) notBack() []string {
	var out []string
	for _, id := range r.waitFor {
		if !r.back[id] {
			out = append(out, id)
		}
	}
	return out
}

// settled: the drill is over, every awaited instance announces again, and
// no center has answered the city for drillQuiet; then the report is made.
func (r *DrillRun) settled(now time.Time) bool {
	if now.Before(r.until) || len(r.notBack()) > 0 {
		return false
	}
	if r.allBack.IsZero() {
		r.allBack = now
	}
	if r.answered > 0 && now.Sub(r.lastMoved) < drillQuiet && now.Sub(r.allBack) < 15*time.Second {
		return false
	}
	if r.answered == 0 && now.Sub(r.allBack) < drillQuiet {
		return false
	}
	if r.qoe != nil && r.qoe.Awaiting(now) {
		return false // the city's first plan since its return is on its way
	}
	r.State = "done"
	if r.qoe != nil && !r.qoe.Planned() {
		r.QoENote = "no plan of " + r.Target + "'s viewers seen (no selection: qoe service there, or its schedulers report none)"
	}
	switch {
	case len(r.waitFor) == 0:
		r.Report = "none of the target's schedulers announced a route before the drill: nothing was withdrawn"
	case r.answered == 0:
		r.Report = fmt.Sprintf("%s announced again; no center answered any STB of %s: there was no traffic from the city", joinIDs(r.waitFor), r.Target)
	default:
		r.step(r.lastAnswer, "the last answer of a center to a "+r.Target+" STB: the city took its traffic back")
		r.Report = fmt.Sprintf("the center answered %d requests of %s's STBs from +%.1fs to +%.1fs, %d of them with an error; %s announced again",
			r.answered, r.Target, r.tookOver.Sub(r.start).Seconds(), r.lastAnswer.Sub(r.start).Seconds(), r.failed, joinIDs(r.waitFor))
	}
	r.step(now, "drill done")
	return true
}

func joinIDs(ids []string) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		s += id
	}
	return s
}
