package health

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/province/health/avail"
)

// tri is a three-valued state.
type tri int8

const (
	unknown tri = iota
	yes         // up / overloaded
	no          // down / not overloaded
)

// tracker is one target's verdict state; only its loop goroutine touches it.
type tracker struct {
	o *CheckerOptions

	reach           tri // yes: reachable (up), no: down
	okRun, failRun  int
	lastFail        string
	over            tri // yes: over a threshold (bandwidth or the target's policy)
	overRun, clrRun int
	overWhy         string  // Reason of the last overloaded answer
	overMask        figures // figures over their thresholds in that answer

	verdict tri // yes: up, no: down
	since   time.Time

	rtt     time.Duration
	load    avail.Load
	hasLoad bool

	window []bool // true: failed
	wi, wn int
	fails  int

	emitted      *Report
	emittedCause int  // cause() when it was emitted
	hadLoad      bool // load present in the emitted report
	emittedAt    time.Time
}

// cause is why the verdict is what it is: 0 up, 1 unreachable, else
// overloaded, with the figures over their thresholds (so that a change of
// figure, cpu to memory say, is reported).
func (tr *tracker) cause() int {
	switch {
	case tr.reach == no:
		return 1
	case tr.over == yes:
		return 2 + int(tr.overMask)
	}
	return 0
}

// figures is a set of load figures, by bit.
type figures uint8

const (
	figBandwidth figures = 1 << iota
	figCPU
	figMemory
	figConnections
	figLoad
)

// overload checks an answer's load against the thresholds: the bandwidth
// share of capacity (the checker's BandwidthThreshold) and the target's
// policy. It returns the figures over their thresholds (none: not
// overloaded) and the Reason naming them. Each comparison is strict: a
// figure at its threshold is not over it.
func overload(l avail.Load, t *Target, bwShare float64) (figures, string) {
	var m figures
	var parts []string
	if t.CapacityMbps > 0 && bwShare > 0 && l.BandwidthMbps > bwShare*t.CapacityMbps {
		m |= figBandwidth
		parts = append(parts, fmt.Sprintf("bandwidth %.0f%% of capacity", 100*l.BandwidthMbps/t.CapacityMbps))
	}
	p := &t.Policy
	if p.MaxCPU > 0 && l.CPU > p.MaxCPU {
		m |= figCPU
		parts = append(parts, "cpu "+pair(l.CPU, p.MaxCPU, "max_cpu"))
	}
	if p.MaxMemory > 0 && l.Memory > p.MaxMemory {
		m |= figMemory
		parts = append(parts, "memory "+pair(l.Memory, p.MaxMemory, "max_memory"))
	}
	if p.MaxConnections > 0 && l.Connections > p.MaxConnections {
		m |= figConnections
		parts = append(parts, fmt.Sprintf("connections %d > max_connections %d", l.Connections, p.MaxConnections))
	}
	if p.MaxLoad > 0 && l.LoadAvg > p.MaxLoad {
		m |= figLoad
		parts = append(parts, "load "+pair(l.LoadAvg, p.MaxLoad, "max_load"))
	}
	switch {
	case m == 0:
		return 0, ""
	case m == figBandwidth:
		return m, parts[0] // the bandwidth reason as it always was
	}
	return m, "overloaded: " + strings.Join(parts, ", ")
}

// pair formats "v > name limit" with two decimals, or as many more as it
// takes for v to read larger than limit (0.901 > 0.9 is not "0.90 > 0.90").
func pair(v, limit float64, name string) string {
	for prec := 2; ; prec++ {
		a, b := strconv.FormatFloat(v, 'f', prec, 64), strconv.FormatFloat(limit, 'f', prec, 64)
		if a != b || prec >= 6 {
			return a + " > " + name + " " + b
		}
	}
}

func newTracker(o *CheckerOptions) *tracker {
	return &tracker{o: o, window: make([]bool, o.LossWindow)}
}

// update feeds one probe result; it returns the target's report and whether
// the report rule says to emit it.
func (tr *tracker) update(res Result, t Target, now time.Time) (Report, bool) {
	// Loss window.
	failed := !res.OK
	if tr.wn == len(tr.window) {
		if tr.window[tr.wi] {
			tr.fails--
		}
	} else {
		tr.wn++
	}
	tr.window[tr.wi] = failed
	if failed {
		tr.fails++
	}
	tr.wi = (tr.wi + 1) % len(tr.window)

	if res.OK {
		tr.okRun++
		tr.failRun = 0
		if tr.reach == unknown || (tr.reach == no && tr.okRun >= tr.o.Rise) {
			tr.reach = yes
		}
		if tr.rtt == 0 {
			tr.rtt = res.RTT
		} else {
			tr.rtt = time.Duration(rttAlpha*float64(res.RTT) + (1-rttAlpha)*float64(tr.rtt))
		}
		tr.load, tr.hasLoad = avail.Load{}, res.HasLoad
		if res.HasLoad {
			tr.load = res.Load
		}
		var mask figures
		var why string
		if res.HasLoad {
			mask, why = overload(res.Load, &t, tr.o.BandwidthThreshold)
		}
		if mask != 0 {
			tr.overWhy, tr.overMask = why, mask
			tr.overRun++
			tr.clrRun = 0
			if tr.over == unknown || (tr.over == no && tr.overRun >= tr.o.Fall) {
				tr.over = yes
			}
		} else {
			tr.clrRun++
			tr.overRun = 0
			if tr.over == unknown || (tr.over == yes && tr.clrRun >= tr.o.Rise) {
				tr.over = no
			}
		}
	} else {
		tr.failRun++
		tr.okRun = 0
		tr.lastFail = res.Err
		if tr.reach != no && tr.failRun >= tr.o.Fall {
			tr.reach = no
		}
	}

	v := unknown
	switch {
	case tr.reach == no || (tr.reach == yes && tr.over == yes):
		v = no
	case tr.reach == yes:
		v = yes
	}
	if v != tr.verdict {
		tr.verdict, tr.since = v, now
	}
	if v == unknown {
		return Report{}, false
	}

	r := Report{
		Server: t.Server,
		Up:     v == yes,
		RTT:    tr.rtt,
		Loss:   float64(tr.fails) / float64(tr.wn),
		Load:   tr.load,
		Since:  tr.since,
		At:     now,
	}
	switch {
	case tr.reach == no:
		r.Reason = tr.lastFail
		if r.Reason == "" {
			r.Reason = "probe failed"
		}
	case tr.over == yes:
		r.Reason = tr.overWhy
	}
	if !tr.meaningful(r) {
		return r, false
	}
	tr.emitted, tr.emittedCause, tr.hadLoad, tr.emittedAt = &r, tr.cause(), tr.hasLoad, now
	return r, true
}

// pending reports whether a verdict change is under way (FastInterval).
func (tr *tracker) pending() bool {
	return (tr.reach != no && tr.failRun > 0) ||
		(tr.reach == no && tr.okRun > 0) ||
		(tr.reach == yes && tr.over == no && tr.overRun > 0) ||
		(tr.reach == yes && tr.over == yes && tr.clrRun > 0)
}

// meaningful applies the report rule to r against the last emitted report.
func (tr *tracker) meaningful(r Report) bool {
	e := tr.emitted
	if e == nil || e.Up != r.Up || tr.cause() != tr.emittedCause || r.At.Sub(tr.emittedAt) >= tr.o.RefreshInterval {
		return true
	}
	if d := absDur(r.RTT - e.RTT); d > tr.o.RTTMinChange && float64(d) > reportRTTChange*float64(e.RTT) {
		return true
	}
	if math.Abs(r.Loss-e.Loss) > reportLossChange+1e-9 {
		return true
	}
	if tr.hasLoad != tr.hadLoad {
		return true
	}
	return changed(e.Load.CPU, r.Load.CPU, 0.1) ||
		changed(e.Load.Memory, r.Load.Memory, 0.1) ||
		changed(e.Load.LoadAvg, r.Load.LoadAvg, 1) ||
		changed(e.Load.BandwidthMbps, r.Load.BandwidthMbps, 10) ||
		changed(float64(e.Load.Connections), float64(r.Load.Connections), 10)
}

func changed(old, cur, floor float64) bool {
	return math.Abs(cur-old) > reportLoadChange*math.Max(math.Abs(old), floor)
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
