// Package drillwatch follows a failover drill through the admin API's
// Status, for schedctl, which prints what it finds, and the console, which
// renders it: when each of the target's schedulers withdrew its route and
// announced again, when the centers took the city's STBs over and gave
// them back, and the QoE of the city's viewers before, during and after.
// One follower, so that the two tell a drill alike.
package drillwatch

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/admin/statusview"
	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// Timing of a watch.
const (
	// Poll is how often a follower reads the province's state.
	Poll = 250 * time.Millisecond
	// Grace is how long past its end a drill is followed at most: an
	// instance not back by then is reported as not back.
	Grace = 60 * time.Second
	// Quiet: the city is back when no center has answered its STBs for
	// this long (more than the 2 s between two registrations).
	Quiet = 2500 * time.Millisecond
	// answersMax: how long after the return the centers' answers are
	// waited for to stop, at most.
	answersMax = 15 * time.Second
)

// Event is one line of what a watch saw.
type Event struct {
	At   time.Time // zero: a note outside the timeline
	Text string
}

// Watch follows one failover drill. It is fed Status answers in turn and
// is not safe for concurrent use.
type Watch struct {
	target    opstate.DrillTarget
	start     time.Time
	until     time.Time
	instances []string // the target's instances, as given or learnt
	learn     bool     // none given: learnt from the first Status
	ids       []string // the instances whose return is awaited
	withdrawn map[string]time.Time
	back      map[string]time.Time
	allBack   time.Time
	centers   *Centers
	qoe       *statusview.QoEWatch // nil for a drill of the center
}

// New is a watch of a drill of target that started at start and ends at
// until, of instances (nil: learnt from the first Status), with pre the
// province's status before it (nil: unknown). An instance pre shows not
// announcing is not waited for: nothing says it will announce after the
// drill. The events are the notes saying so.
func New(target opstate.DrillTarget, start, until time.Time, instances []string, pre *pb.StatusResponse) (*Watch, []Event) {
	w := &Watch{target: target, start: start, until: until, instances: slices.Clone(instances), learn: instances == nil,
		withdrawn: map[string]time.Time{}, back: map[string]time.Time{}}
	if !target.Center {
		w.qoe = statusview.NewQoEWatch(target.Region)
	}
	var base map[string]*pb.RegionTraffic
	if pre != nil && !target.Center {
		base = statusview.CenterTraffic(pre, target.Region)
	}
	w.centers = NewCenters(target.Region, start, base)
	var notes []Event
	if pre != nil {
		if w.qoe != nil {
			w.qoe.Observe(pre, start) // before: as it stood when the drill was started
		}
	}
	for _, id := range instances {
		if why, ok := notAnnouncing(pre, id); ok {
			notes = append(notes, Event{Text: fmt.Sprintf("%s did not announce a route before the drill (%s): not waited for", id, why)})
			continue
		}
		w.ids = append(w.ids, id)
	}
	return w, notes
}

// notAnnouncing reports whether the status taken before the drill shows
// instance id not announcing its route, and why.
func notAnnouncing(pre *pb.StatusResponse, id string) (why string, ok bool) {
	for _, in := range pre.GetInstances() {
		if in.GetId() == id && !in.GetAnnounced() {
			return cmp.Or(in.GetAnnounceReason(), "no reason given"), true
		}
	}
	return "", false
}

// Targets reports whether the drill's target covers an instance of role in
// region: every center for the center, the region's schedulers for a city.
func Targets(t opstate.DrillTarget, role instance.Role, region string) bool {
	if t.Center {
		return role == instance.Central
	}
	return region == t.Region
}

// learnFrom, for a drill first seen running: the instances of the target, and
// which of them are awaited (those that announce routes themselves).
func (w *Watch) learnFrom(st *pb.StatusResponse) {
	w.learn = false
	for _, in := range st.GetInstances() {
		if !Targets(w.target, instance.Role(in.GetRole()), in.GetRegion()) {
			continue
		}
		w.instances = append(w.instances, in.GetId())
		if in.GetAnnounceReason() != store.NotAnnouncedModeNone {
			w.ids = append(w.ids, in.GetId())
		}
	}
}

// Observe takes the province's status at now and returns what it shows
// that is new, in the order seen.
func (w *Watch) Observe(st *pb.StatusResponse, now time.Time) []Event {
	if w.learn {
		w.learnFrom(st)
	}
	var out []Event
	if !w.target.Center {
		out = w.centers.observe(st, now, out)
	}
	out = w.observeRoutes(st, now, out)
	if w.allBack.IsZero() && len(w.ids) > 0 && len(w.NotBack()) == 0 {
		w.allBack = now
	}
	if w.allBack.IsZero() && len(w.ids) == 0 && !now.Before(w.until) {
		w.allBack = now // nothing to await: the drill is over when its time is
	}
	return w.observeQoE(st, now, out)
}

func (w *Watch) observeRoutes(st *pb.StatusResponse, now time.Time, out []Event) []Event {
	for _, in := range st.GetInstances() {
		id := in.GetId()
		if !slices.Contains(w.ids, id) || in.GetUpdatedAt().AsTime().Before(w.start) {
			continue // not awaited, or a record from before the drill started
		}
		if in.GetAnnounceReason() == store.NotAnnouncedModeNone {
			// Without a status from before the drill this is the first
			// sight of it: it will never announce.
			w.ids = slices.DeleteFunc(w.ids, func(s string) bool { return s == id })
			out = append(out, Event{Text: fmt.Sprintf("%s announces nothing itself (%s): not waited for", id, store.NotAnnouncedModeNone)})
			continue
		}
		_, out0 := w.withdrawn[id]
		if !out0 && !in.GetAnnounced() {
			w.withdrawn[id] = now
			out = append(out, Event{At: now, Text: fmt.Sprintf("%s withdrew its route (%s)", id, in.GetAnnounceReason())})
			continue
		}
		if _, back := w.back[id]; out0 && !back && in.GetAnnounced() {
			w.back[id] = now
			out = append(out, Event{At: now, Text: id + " announces again"})
		}
	}
	return out
}

// observeQoE hands a sample to the QoE watch, after the withdrawal and the
// return it shows: a change of the viewers' planners is an event.
func (w *Watch) observeQoE(st *pb.StatusResponse, now time.Time, out []Event) []Event {
	if w.qoe == nil {
		return out
	}
	if len(w.withdrawn) > 0 {
		w.qoe.Withdrawn(minTime(w.withdrawn))
	}
	if len(w.ids) > 0 && !w.allBack.IsZero() {
		w.qoe.Back(w.allBack)
	}
	if line := w.qoe.Observe(st, now); line != "" {
		out = append(out, Event{At: now, Text: line})
	}
	return out
}

func minTime(m map[string]time.Time) time.Time {
	var t time.Time
	for _, v := range m {
		if t.IsZero() || v.Before(t) {
			t = v
		}
	}
	return t
}

// Settled reports whether the watch is over at now: every awaited instance
// announces again, no center has answered the city's STBs for Quiet (or
// they went on 15 s past the return), and the city's first plan since its
// return has been seen (or statusview.AfterWait has passed).
func (w *Watch) Settled(now time.Time) bool {
	if w.allBack.IsZero() || len(w.NotBack()) > 0 || !w.centers.settled(now, w.allBack) {
		return false
	}
	return w.qoe == nil || !w.qoe.Awaiting(now)
}

// Instances is the target's instances, as given or learnt.
func (w *Watch) Instances() []string { return w.instances }

// Awaited is the instances whose return is awaited.
func (w *Watch) Awaited() []string { return w.ids }

// NotBack is the awaited instances that have not announced again.
func (w *Watch) NotBack() []string {
	var ids []string
	for _, id := range w.ids {
		if _, ok := w.back[id]; !ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// QoE is the watch of the city's viewers' QoE; nil for a drill of the
// center.
func (w *Watch) QoE() *statusview.QoEWatch { return w.qoe }

// Takeover is what the centers answered the city's STBs since the drill
// started.
func (w *Watch) Takeover() Takeover { return w.centers.Takeover() }
