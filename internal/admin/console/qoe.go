package console

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/admin/statusview"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// The QoE page's history: a sample per region at most every qoeEvery,
// taken whenever the console reads Status (any page's poll, a drill being
// followed), kept for qoeWindow.
const (
	qoeEvery  = 5 * time.Second
	qoeWindow = 10 * time.Minute
)

// The sparklines' drawing box (SVG user units).
const (
	sparkW   = 160
	sparkH   = 32
	sparkPad = 3
)

// QoESample is the QoE of a region's viewers at one time.
type QoESample struct {
	At        int64   `json:"at"`   // unix ms
	Plan      bool    `json:"plan"` // false: nobody planned them
	Sessions  int64   `json:"sessions"`
	Objective float64 `json:"objective"`
	AtDesired float64 `json:"at_desired"`
}

// qoeRing is one region's latest samples, the oldest overwritten first.
type qoeRing struct {
	buf      []QoESample
	next, n  int
	lastPlan time.Time // the latest sample with a plan
}

func (r *qoeRing) add(s QoESample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	r.n = min(r.n+1, len(r.buf))
}

func (r *qoeRing) last() (QoESample, bool) {
	if r.n == 0 {
		return QoESample{}, false
	}
	return r.buf[(r.next-1+len(r.buf))%len(r.buf)], true
}

// since is the samples at or after from (unix ms), oldest first.
func (r *qoeRing) since(from int64) []QoESample {
	out := make([]QoESample, 0, r.n)
	for i := range r.n {
		s := r.buf[(r.next-r.n+i+len(r.buf))%len(r.buf)]
		if s.At >= from {
			out = append(out, s)
		}
	}
	return out
}

// qoeHistory keeps each region's ring; safe for concurrent use.
type qoeHistory struct {
	mu      sync.Mutex
	every   time.Duration
	window  time.Duration
	keep    int
	regions map[string]*qoeRing
}

// newQoEHistory keeps twice the window's worth of samples a region: a
// plan appearing or going is sampled at once.
func newQoEHistory(every, window time.Duration) *qoeHistory {
	return &qoeHistory{every: every, window: window, keep: max(2, int(2*window/every)), regions: map[string]*qoeRing{}}
}

// observe samples st, taken at now: each region with a plan, and each
// region sampled before without one now (a gap in its lines). A region
// nobody planned for a window is forgotten unless known (the topology has
// it: its viewers were planned and are no longer).
func (h *qoeHistory) observe(st *pb.StatusResponse, now time.Time, known func(string) bool) {
	plans := statusview.PlansByRegion(st, now)
	h.mu.Lock()
	defer h.mu.Unlock()
	for region, ps := range plans {
		s := statusview.StateOf(ps)
		h.add(region, now, QoESample{At: now.UnixMilli(), Plan: true, Sessions: s.Sessions, Objective: s.Objective, AtDesired: s.AtDesired})
	}
	for region, r := range h.regions {
		if _, ok := plans[region]; ok {
			continue
		}
		if now.Sub(r.lastPlan) > h.window && (known == nil || !known(region)) {
			delete(h.regions, region)
			continue
		}
		h.add(region, now, QoESample{At: now.UnixMilli()})
	}
}

// add keeps s unless the region was sampled less than every ago with a
// plan as it has now (a plan appearing or going is kept at once).
func (h *qoeHistory) add(region string, now time.Time, s QoESample) {
	r := h.regions[region]
	if r == nil {
		r = &qoeRing{buf: make([]QoESample, h.keep)}
		h.regions[region] = r
	}
	if l, ok := r.last(); ok && l.Plan == s.Plan && now.Sub(time.UnixMilli(l.At)) < h.every {
		return
	}
	r.add(s)
	if s.Plan {
		r.lastPlan = now
	}
}

// samples is region's samples within the window before now, oldest first.
func (h *qoeHistory) samples(region string, now time.Time) []QoESample {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.regions[region]
	if r == nil {
		return nil
	}
	return r.since(now.Add(-h.window).UnixMilli())
}

// RegionQoE is the QoE of one region's viewers now, and over the window
// as sparklines.
type RegionQoE struct {
	Region string `json:"region"`
	// Who plans the viewers now: the schedulers planning them, or why
	// nobody does (statusview.NoCenterPlan while a center answers them).
	Who   string              `json:"who"`
	Plan  bool                `json:"plan"`
	State statusview.QoEState `json:"state"`
	// History is the samples of the last ten minutes, oldest first.
	History []QoESample `json:"history"`
	// The sparklines: SVG paths in a sparkW × sparkH box spanning the
	// window up to now; the objective between ObjectiveMin and
	// ObjectiveMax, the share at the desired bitrate between 0 and 1. A
	// stretch without a plan is a gap.
	ObjectivePath string  `json:"objective_path"`
	AtDesiredPath string  `json:"at_desired_path"`
	ObjectiveMin  float64 `json:"objective_min"`
	ObjectiveMax  float64 `json:"objective_max"`
	WindowS       float64 `json:"window_s"`
}

// view is every region with a plan now or a history, by name.
func (h *qoeHistory) view(st *pb.StatusResponse, now time.Time, cities []City) []RegionQoE {
	plans := statusview.PlansByRegion(st, now)
	h.mu.Lock()
	names := make([]string, 0, len(h.regions))
	for region := range h.regions {
		names = append(names, region)
	}
	h.mu.Unlock()
	for region := range plans {
		if !slices.Contains(names, region) {
			names = append(names, region)
		}
	}
	slices.Sort(names)
	out := make([]RegionQoE, 0, len(names))
	for _, region := range names {
		ps := plans[region]
		v := RegionQoE{Region: region, Plan: len(ps) > 0, State: statusview.StateOf(ps), History: h.samples(region, now), WindowS: h.window.Seconds()}
		v.Who = strings.Join(v.State.Planners, ", ")
		if !v.Plan {
			v.Who = nobodyPlans(region, cities)
		}
		v.ObjectiveMin, v.ObjectiveMax = objectiveRange(v.History)
		v.ObjectivePath = sparkPath(v.History, now, h.window, h.every, v.ObjectiveMin, v.ObjectiveMax, func(s QoESample) float64 { return s.Objective })
		v.AtDesiredPath = sparkPath(v.History, now, h.window, h.every, 0, 1, func(s QoESample) float64 { return s.AtDesired })
		out = append(out, v)
	}
	return out
}

// nobodyPlans says why nobody plans a region's viewers: its own
// schedulers take its STBs but saw none lately, or a center answers them
// without a plan.
func nobodyPlans(region string, cities []City) string {
	for _, c := range cities {
		if c.Name == region && (c.Route == "announced" || c.Route == "routed") {
			return "no plan (its schedulers saw no STB lately)"
		}
	}
	return statusview.NoCenterPlan
}

// objectiveRange is the least and the greatest objective of the samples
// with a plan, apart by at least 1 (a flat line is drawn mid-height).
func objectiveRange(ss []QoESample) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		if s.Plan {
			lo, hi = min(lo, s.Objective), max(hi, s.Objective)
		}
	}
	if math.IsInf(lo, 1) {
		return 0, 1
	}
	if hi-lo < 1 {
		mid := (lo + hi) / 2
		return mid - 0.5, mid + 0.5
	}
	return lo, hi
}

// sparkPath draws value over the samples with a plan as an SVG path: x is
// the time within the window ending at now, y value between lo and hi. A
// sample without a plan, or no sample for three periods (nobody had the
// console open), breaks the line; a lone point is a dot.
func sparkPath(ss []QoESample, now time.Time, window, every time.Duration, lo, hi float64, value func(QoESample) float64) string {
	var b strings.Builder
	var prev int64 // the last point drawn, unix ms; 0: the line is broken
	start := now.Add(-window).UnixMilli()
	for _, s := range ss {
		if !s.Plan || s.At < start {
			prev = 0
			continue
		}
		x := sparkW * float64(s.At-start) / float64(window.Milliseconds())
		v := (value(s) - lo) / (hi - lo)
		if math.IsNaN(v) {
			prev = 0
			continue
		}
		y := sparkPad + (sparkH-2*sparkPad)*(1-min(1, max(0, v)))
		cmd := "L"
		if prev == 0 || s.At-prev > 3*every.Milliseconds() {
			cmd = "M"
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(cmd + coord(x) + "," + coord(y))
		if cmd == "M" {
			b.WriteString(" h0.1") // a dot until the next point joins it
		}
		prev = s.At
	}
	return b.String()
}

func coord(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
