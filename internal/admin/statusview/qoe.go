package statusview

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/province/instance"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// NoCenterPlan is what a city's viewers get while a center answers them
// without a plan for the city: each the rung its own request asks for.
const NoCenterPlan = "center: no plan (viewers get their own rung)"

// SamePlan: two sightings of one planner's plan whose made times are
// closer than this are one plan. A made time is reckoned as the Status's
// arrival less the plan's age, and the age when the center answered, so
// one plan's made time wanders by the call's latency.
const SamePlan = 500 * time.Millisecond

// AfterWait is how long after a drilled city's return a watch waits for
// the city's first new plan: a plan period (10 s by default) and a
// registration (2 s) after the STBs came back.
const AfterWait = 15 * time.Second

// Plan is one plan of a region's viewers as a Status shows it.
type Plan struct {
	Planner string // the instance that made it
	// Central: a center's plan for a city whose schedulers are gone.
	Central bool
	// MadeAt is when it was made: the Status's time less the plan's age.
	MadeAt time.Time
	QoE    *pb.QoEPlan
}

// PlansByRegion is every plan of viewers in st, taken at now, by region:
// each city scheduler's own and each center's for a city, by planner. An
// idle plan (no STB of the region reached the instance lately: it holds
// no viewer) plans nobody and is left out.
func PlansByRegion(st *pb.StatusResponse, now time.Time) map[string][]Plan {
	out := map[string][]Plan{}
	add := func(region, id string, central bool, q *pb.QoEPlan) {
		if region == "" || q.GetIdle() {
			return
		}
		made := now.Add(-time.Duration(q.GetAgeSeconds() * float64(time.Second)))
		out[region] = append(out[region], Plan{Planner: id, Central: central, MadeAt: made, QoE: q})
	}
	for _, in := range st.GetInstances() {
		if instance.Role(in.GetRole()) == instance.Central {
			for _, q := range in.GetPlanning() {
				add(q.GetRegion(), in.GetId(), true, q)
			}
			continue
		}
		if q := in.GetQoe(); q != nil {
			add(in.GetRegion(), in.GetId(), false, q)
		}
	}
	for _, ps := range out {
		slices.SortFunc(ps, func(a, b Plan) int { return strings.Compare(a.Planner, b.Planner) })
	}
	return out
}

// RegionPlans is PlansByRegion's plans of one region.
func RegionPlans(st *pb.StatusResponse, region string, now time.Time) []Plan {
	return PlansByRegion(st, now)[region]
}

// QoEState is the QoE of a region's viewers as a set of plans shows it,
// summed over the schedulers planning them: a viewer still in two
// schedulers' tables (moments after its STB moved) counts in both.
type QoEState struct {
	Planners  []string `json:"planners"` // sorted; none: nobody plans the viewers
	Sessions  int64    `json:"sessions"`
	Planned   int64    `json:"planned"`
	Fallback  int64    `json:"fallback"`
	Starved   int64    `json:"starved"`
	Objective float64  `json:"objective"`
	// AtDesired is the share of the planned sessions at or above the
	// bitrate their viewer desires (each plan's share, weighted by its
	// planned sessions); meaningless without planned sessions.
	AtDesired float64 `json:"at_desired"`
	// Switches and Drops are the plans' own: sessions each moved to
	// another server, and to a lower bitrate, than before it.
	Switches int64 `json:"switches"`
	Drops    int64 `json:"drops"`
	SafeMode bool  `json:"safe_mode,omitempty"`
}

// StateOf sums plans.
func StateOf(plans []Plan) QoEState {
	var s QoEState
	var desired float64
	for _, p := range plans {
		q := p.QoE
		s.Planners = append(s.Planners, p.Planner)
		s.Sessions += q.GetSessions()
		s.Planned += q.GetPlanned()
		s.Fallback += q.GetFallback()
		s.Starved += q.GetStarved()
		s.Objective += q.GetObjective()
		s.Switches += q.GetSwitches()
		s.Drops += q.GetDrops()
		s.SafeMode = s.SafeMode || q.GetSafeMode()
		desired += q.GetAtDesired() * float64(q.GetPlanned())
	}
	if s.Planned > 0 {
		s.AtDesired = desired / float64(s.Planned)
	}
	slices.Sort(s.Planners)
	return s
}

// The phases of a failover drill, as its QoE is told.
const (
	PhaseBefore = iota // the last sample before the route was withdrawn
	PhaseDuring        // from the withdrawal to the city's first plan after its return
	PhaseAfter         // from that plan to the end of the watch
)

var phaseNames = [...]string{"before", "during", "after"}

// QoEPhase is the QoE of a drilled region's viewers over one phase.
type QoEPhase struct {
	Phase string `json:"phase"` // before, during, after
	// Seen: a sample fell in the phase (a drill that never returns has no
	// after).
	Seen bool `json:"seen"`
	// Who says who planned the viewers: those that planned earlier in the
	// phase, "→", those planning at its end; or that nobody did.
	Who string `json:"who"`
	// State is the phase's last sample's plans: sessions, objective, share
	// at the desired bitrate, fallback and starved sessions.
	State QoEState `json:"state"`
	// NoPlan: nobody planned the viewers at the phase's end.
	NoPlan bool `json:"no_plan"`
	// Switches and Drops are summed over the phase's plans, each counted
	// once, in the phase it was made in; Plans counts them. Before is the
	// last sample's plans.
	Switches int64 `json:"switches"`
	Drops    int64 `json:"drops"`
	Plans    int   `json:"plans"`
	// Stale (after only): no plan of the city's own was made since its
	// return before the watch ended; State is the watch's last sample.
	Stale bool `json:"stale,omitempty"`
}

// QoEWatch follows the QoE of one city's viewers through a failover drill
// from the Status samples of the drill's watch: who plans them (a timeline
// line when that changes) and their QoE before, during and after. The
// watch marks the withdrawal and the return as it sees them, before it
// hands over the sample it saw them in. Not safe for concurrent use.
type QoEWatch struct {
	region           string
	withdrawn, back  time.Time
	fresh            bool      // a plan of the city's own made since back was seen
	freshAt          time.Time // when the first such plan was made
	phases           [3]phaseSum
	prev             []string             // planners at the last sample
	sampled, planned bool                 // a sample was taken; one had a plan
	counted          map[string]time.Time // by planner: its last plan counted, by made time
	end              QoEState             // the last sample at or after back
	endSeen          bool
	endOrder         []string // planners seen since back
}

type phaseSum struct {
	seen            bool
	order           []string // planners, in the order first seen
	last            QoEState
	central         bool // a center planned in last
	switches, drops int64
	plans           int
}

// NewQoEWatch follows region's viewers.
func NewQoEWatch(region string) *QoEWatch {
	return &QoEWatch{region: region, counted: map[string]time.Time{}}
}

// Withdrawn marks the city's route withdrawn at t (the first call counts):
// samples from t on are no longer before.
func (w *QoEWatch) Withdrawn(t time.Time) {
	if w.withdrawn.IsZero() {
		w.withdrawn = t
	}
}

// Back marks every awaited scheduler of the city announcing again at t
// (the first call counts): the after phase begins with the first plan of
// the city's own made since.
func (w *QoEWatch) Back(t time.Time) {
	if w.back.IsZero() {
		w.back = t
	}
}

// Observe takes one Status sample, taken at now; it returns the timeline
// line when the region's planners changed since the last sample ("qoe:
// hefei-1 stopped planning; center-1 plans hefei (412 sessions)"), or "".
func (w *QoEWatch) Observe(st *pb.StatusResponse, now time.Time) string {
	plans := RegionPlans(st, w.region, now)
	ph := w.phaseAt(now, plans)
	state := StateOf(plans)
	sum := &w.phases[ph]
	if ph == PhaseBefore {
		*sum = phaseSum{} // before is the last sample only
	}
	sum.seen = true
	// During: the gap between the center yielding and the city's first
	// plan is not the phase's state: the center's last plans are.
	central := slices.ContainsFunc(plans, func(p Plan) bool { return p.Central })
	if ph != PhaseDuring || len(plans) > 0 || !sum.central {
		sum.last, sum.central = state, central
	}
	for _, p := range plans {
		if !slices.Contains(sum.order, p.Planner) {
			sum.order = append(sum.order, p.Planner)
		}
		if ph == PhaseBefore {
			sum.add(p.QoE)
		}
		if last, ok := w.counted[p.Planner]; ok && p.MadeAt.Sub(last).Abs() < SamePlan {
			continue
		}
		w.counted[p.Planner] = p.MadeAt
		if made := w.phaseMade(p.MadeAt); made != PhaseBefore {
			w.phases[made].add(p.QoE)
		}
	}
	if !w.back.IsZero() && !now.Before(w.back) {
		w.end, w.endSeen = state, true
		for _, id := range state.Planners {
			if !slices.Contains(w.endOrder, id) {
				w.endOrder = append(w.endOrder, id)
			}
		}
	}
	line := ""
	if w.sampled && !slices.Equal(state.Planners, w.prev) {
		line = w.change(ph, plans)
	}
	w.sampled, w.prev = true, state.Planners
	w.planned = w.planned || len(plans) > 0
	return line
}

func (s *phaseSum) add(q *pb.QoEPlan) {
	s.switches += q.GetSwitches()
	s.drops += q.GetDrops()
	s.plans++
}

// phaseAt is the phase a sample taken at now falls in; the city's first
// own plan made since its return begins the after phase.
func (w *QoEWatch) phaseAt(now time.Time, plans []Plan) int {
	switch {
	case w.withdrawn.IsZero() || now.Before(w.withdrawn):
		return PhaseBefore
	case w.fresh:
		return PhaseAfter
	case w.back.IsZero():
		return PhaseDuring
	}
	for _, p := range plans {
		if !p.Central && p.MadeAt.After(w.back) && (!w.fresh || p.MadeAt.Before(w.freshAt)) {
			w.fresh, w.freshAt = true, p.MadeAt
		}
	}
	if w.fresh {
		return PhaseAfter
	}
	return PhaseDuring
}

// phaseMade is the phase a plan made at t belongs to.
func (w *QoEWatch) phaseMade(t time.Time) int {
	switch {
	case w.withdrawn.IsZero() || t.Before(w.withdrawn):
		return PhaseBefore
	case w.fresh && !t.Before(w.freshAt):
		return PhaseAfter
	}
	return PhaseDuring
}

// change is the timeline line for a change of planners.
func (w *QoEWatch) change(ph int, plans []Plan) string {
	var parts []string
	now := StateOf(plans).Planners
	for _, id := range w.prev {
		if !slices.Contains(now, id) {
			parts = append(parts, id+" stopped planning")
		}
	}
	for _, p := range plans {
		if !slices.Contains(w.prev, p.Planner) {
			parts = append(parts, fmt.Sprintf("%s plans %s (%d sessions)", p.Planner, w.region, p.QoE.GetSessions()))
		}
	}
	if len(plans) == 0 {
		parts = append(parts, w.nobody(ph))
	}
	return "qoe: " + strings.Join(parts, "; ")
}

// nobody says that nobody plans the viewers: before the drill, that is
// all; once the center answers them, it makes no plan for them.
func (w *QoEWatch) nobody(ph int) string {
	if ph == PhaseBefore {
		return "no plan of " + w.region + "'s viewers"
	}
	return NoCenterPlan
}

// Planned reports whether any sample had a plan of the region's viewers
// (none: the region has no QoE service, or its schedulers report none).
func (w *QoEWatch) Planned() bool { return w.planned }

// Awaiting reports whether the watch should go on for the after phase: the
// city is back, its viewers were planned, and no plan of its own made
// since has been seen, for at most AfterWait after the return.
func (w *QoEWatch) Awaiting(now time.Time) bool {
	return w.planned && !w.back.IsZero() && !w.fresh && now.Sub(w.back) < AfterWait
}

// Phases is the QoE of the region's viewers before, during and after.
func (w *QoEWatch) Phases() []QoEPhase {
	out := make([]QoEPhase, len(phaseNames))
	for i, name := range phaseNames {
		s := w.phases[i]
		ph := QoEPhase{Phase: name, Seen: s.seen, State: s.last, NoPlan: s.seen && len(s.last.Planners) == 0,
			Switches: s.switches, Drops: s.drops, Plans: s.plans}
		order := s.order
		if i == PhaseAfter && !w.fresh && w.endSeen {
			// No plan of the city's own since its return: the end of the
			// watch, as it stood.
			ph.Seen, ph.Stale, ph.State, ph.NoPlan = true, true, w.end, len(w.end.Planners) == 0
			order = w.endOrder
		}
		ph.Who = w.who(i, ph, order)
		out[i] = ph
	}
	return out
}

// who words a phase's planners.
func (w *QoEWatch) who(i int, ph QoEPhase, order []string) string {
	if !ph.Seen {
		return "-"
	}
	end := strings.Join(ph.State.Planners, ", ")
	if ph.NoPlan {
		end = w.nobody(i)
	}
	var earlier []string
	for _, id := range order {
		if !slices.Contains(ph.State.Planners, id) {
			earlier = append(earlier, id)
		}
	}
	if len(earlier) > 0 {
		end = strings.Join(earlier, ", ") + " → " + end
	}
	switch {
	case ph.Stale && ph.NoPlan:
		end += "; no new plan of " + w.region + "'s schedulers since their return"
	case ph.Stale:
		end += " (no new plan of " + w.region + "'s schedulers since their return)"
	}
	return end
}
