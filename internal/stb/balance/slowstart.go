package balance

import (
	"math"
	"time"
)

// SlowStart ramps a server that returns to service from a minimum share to
// its full weight, so a cold cache (or a freshly restarted process) is not
// handed a full node's worth of STBs at once. The rule is Envoy's:
//
//	factor = max(MinShare, (max(elapsed, 1s) / Window) ^ (1 / Aggression))
//
// for elapsed < Window, and 1 afterwards. Aggression 1 ramps linearly;
// larger values front-load the ramp (2 gives a square-root curve), smaller
// ones hold the server low for longer.
type SlowStart struct {
	// Window is the length of the ramp; 0 disables slow start.
	Window time.Duration `yaml:"window" json:"window"`
	// Aggression shapes the curve; 0 means 1 (linear).
	Aggression float64 `yaml:"aggression" json:"aggression"`
	// MinShare is the share of its weight a server gets at the start of the
	// ramp; 0 means 0.1 (Envoy's min_weight_percent default of 10%).
	MinShare float64 `yaml:"min_share" json:"min_share"`
}

// Factor is the fraction (0..1] of its weight a server back in service since
// `since` gets at `now`. A zero since means long in service.
func (s SlowStart) Factor(since, now time.Time) float64 {
	if s.Window <= 0 || since.IsZero() {
		return 1
	}
	elapsed := now.Sub(since)
	if elapsed >= s.Window {
		return 1
	}
	aggr := s.Aggression
	if aggr <= 0 {
		aggr = 1
	}
	minShare := s.MinShare
	if minShare <= 0 {
		minShare = 0.1
	}
	// Envoy counts at least one second, so the first second is not zero.
	tf := max(elapsed.Seconds(), 1) / s.Window.Seconds()
	return min(1, max(minShare, math.Pow(tf, 1/aggr)))
}

// Ends is when a server back since `since` reaches its full weight, or the
// zero time when it is not ramping at now. Tables are immutable, so a ramp
// advances only when the table is rebuilt: a caller keeps rebuilding (once a
// second is plenty) until the latest Ends has passed.
func (s SlowStart) Ends(since, now time.Time) time.Time {
	if s.Window <= 0 || since.IsZero() {
		return time.Time{}
	}
	end := since.Add(s.Window)
	if !end.After(now) {
		return time.Time{}
	}
	return end
}

// rampTracker collects the latest ramp end among a table's servers.
type rampTracker struct{ until time.Time }

func (r *rampTracker) note(s SlowStart, since, now time.Time) float64 {
	if e := s.Ends(since, now); e.After(r.until) {
		r.until = e
	}
	return s.Factor(since, now)
}
