package announce

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
	"github.com/prometheus/client_golang/prometheus"
)

// ControllerOptions tune when the routes follow readiness.
type ControllerOptions struct {
	// Prefix is a fixed route (one family); when unset, Targets gives the
	// routes, one per family (they come with the topology, which may
	// change them).
	Prefix  netip.Prefix
	Targets func() []Target
	Attrs   Attrs
	// Timing is the announce section's check_interval, rise, fall,
	// hold_down and drain (a zero check interval is 200ms, a rise or fall
	// below one is one).
	announcecfg.Timing
}

// ReadyFunc says whether the scheduler can take STBs; the error says why not.
type ReadyFunc func() error

// Controller announces its routes (the service address's host route or
// the center's aggregate, one per address family) while Ready holds, with
// hysteresis, and stops gracefully. A drill can force a withdrawal for a
// while. The families are announced and withdrawn together; a family
// whose route cannot be announced (no prefix, refused, the speaker failed)
// is reported on its own and does not hold the others back.
type Controller struct {
	Speaker Speaker
	Options ControllerOptions
	Ready   ReadyFunc
	Logger  *slog.Logger
	// OnChange, if set, is called after a route was announced or withdrawn.
	OnChange func()
	// Drilled, if set, says whether a failover drill withdraws the routes
	// now; asked at every check, so that a drill that ends early (its key
	// deleted) or is capped ends here too.
	Drilled func(now time.Time) bool

	mu        sync.Mutex
	want      bool                   // the decision: announce
	applied   map[netip.Prefix]bool  // what the speaker announces
	desired   map[netip.Prefix]bool  // the routes of the last decision
	targets   []Target               // the last check's
	failed    map[netip.Prefix]error // the speaker's last failure per route
	fast      bool                   // stop without the graceful sequence (a component failed)
	changedAt time.Time
	why       string // why the routes are withdrawn ("" when announced)
	state     *prometheus.GaugeVec
	changes   *prometheus.CounterVec
	errs      *prometheus.CounterVec
}

// Register adds the controller's metrics.
func (c *Controller) Register(reg prometheus.Registerer) {
	c.state = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "anysched_announce_state", Help: "1 while the Anycast route of the family is announced, 0 while withdrawn."}, []string{"family"})
	c.changes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anysched_announce_changes_total", Help: "Route announcements and withdrawals, by family and reason: ready, prefix_changed (announced); not_ready, drill, stopping (withdrawn)."}, []string{"reason", "family"})
	c.errs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anysched_announce_errors_total", Help: "Failed announcements and withdrawals of the family's route (retried at the next check)."}, []string{"family"})
	reg.MustRegister(c.state, c.changes, c.errs)
}

// StateGauge, Changes and Errors are the metrics (after Register), for tests.
func (c *Controller) StateGauge() *prometheus.GaugeVec { return c.state }

// Changes is anysched_announce_changes_total.
func (c *Controller) Changes() *prometheus.CounterVec { return c.changes }

// Errors is anysched_announce_errors_total.
func (c *Controller) Errors() *prometheus.CounterVec { return c.errs }

// registerFamily makes the family's series exist from the first check.
func (c *Controller) registerFamily(f Family) {
	if c.state == nil {
		return
	}
	c.state.WithLabelValues(string(f))
	c.errs.WithLabelValues(string(f))
	for _, r := range []string{reasonReady, reasonPrefix, reasonNotReady, reasonDrill, reasonStopping} {
		c.changes.WithLabelValues(r, string(f))
	}
}

// State reports whether a route is announced, and why not.
func (c *Controller) State() (announced bool, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.applied) > 0, c.why
}

// Families reports each family's route: announced, or why not.
func (c *Controller) Families() []FamilyState {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []FamilyState
	seen := map[Family]bool{}
	for _, t := range c.targets {
		seen[t.Family] = true
		st := FamilyState{Family: t.Family, Prefix: t.Prefix, Announced: c.applied[t.Prefix] && t.Err == nil}
		switch {
		case t.Err != nil:
			st.Why = t.Err.Error()
		case st.Announced:
		case c.failed[t.Prefix] != nil:
			st.Why = c.failed[t.Prefix].Error()
		case c.why != "":
			st.Why = c.why
		default:
			st.Why = "not announced yet"
		}
		out = append(out, st)
	}
	// A route still announced that no target names any more (a family
	// left the province, its withdrawal failed).
	for p := range c.applied {
		if !seen[FamilyOf(p)] {
			out = append(out, FamilyState{Family: FamilyOf(p), Prefix: p, Announced: true})
		}
	}
	slices.SortFunc(out, func(a, b FamilyState) int { return strings.Compare(string(a.Family), string(b.Family)) })
	return out
}

// Run follows readiness until ctx ends, then performs the graceful stop:
// GRACEFUL_SHUTDOWN, wait, withdraw, wait for the drain. It returns when the
// drain is over; the caller stops the front ends after that.
func (c *Controller) Run(ctx context.Context) error {
	o := c.Options
	if o.CheckInterval <= 0 {
		o.CheckInterval = 200 * time.Millisecond
	}
	o.Rise, o.Fall = max(o.Rise, 1), max(o.Fall, 1)
	tick := time.NewTicker(o.CheckInterval)
	defer tick.Stop()
	okRun, badRun := 0, 0
	for {
		targets := c.currentTargets()
		routes := map[netip.Prefix]bool{}
		var noRoute error
		for _, t := range targets {
			if t.Err == nil {
				routes[t.Prefix] = true
			} else if noRoute == nil {
				noRoute = t.Err
			}
		}
		err := c.Ready()
		if err == nil && len(routes) == 0 {
			err = cmpErr(noRoute, errNoPrefix)
		}
		forced := c.Drilled != nil && c.Drilled(time.Now())
		if forced && err == nil {
			err = errDrill
		}
		if err == nil {
			okRun, badRun = okRun+1, 0
		} else {
			okRun, badRun = 0, badRun+1
		}
		c.mu.Lock()
		c.targets = targets
		want, since := c.want, time.Since(c.changedAt)
		held := !c.changedAt.IsZero() && since < o.HoldDown && !forced
		moved := want && len(routes) > 0 && !maps.Equal(routes, c.desired)
		pending := (!want && len(c.applied) > 0) || (want && !maps.Equal(c.applied, c.desired))
		c.mu.Unlock()
		switch {
		case want && (badRun >= o.Fall || forced) && !held:
			reason := reasonNotReady
			if forced {
				reason = reasonDrill
			}
			c.set(ctx, false, nil, o.Attrs, err.Error(), reason)
		case moved: // the topology changed a prefix, or a family came or went
			c.set(ctx, true, routes, o.Attrs, "", reasonPrefix)
		case !want && okRun >= o.Rise && !held:
			c.set(ctx, true, routes, o.Attrs, "", reasonReady)
		case pending: // a family's announcement or withdrawal failed: again
			c.retry(ctx, o.Attrs)
		case !want && err != nil:
			c.mu.Lock()
			c.why = err.Error()
			c.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			c.gracefulStop(o)
			return nil
		case <-tick.C:
		}
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Reasons of a route change, the label values of anysched_announce_changes_total.
const (
	reasonReady    = "ready"
	reasonPrefix   = "prefix_changed"
	reasonNotReady = "not_ready"
	reasonDrill    = "drill"
	reasonStopping = "stopping"
)

type drillError struct{}

func (drillError) Error() string { return "withdrawn by a failover drill" }

var errDrill error = drillError{}

var errNoPrefix = errors.New("no Anycast prefix yet (no topology)")

func (c *Controller) currentTargets() []Target {
	var ts []Target
	switch {
	case c.Options.Prefix.IsValid():
		ts = []Target{{Family: FamilyOf(c.Options.Prefix), Prefix: c.Options.Prefix}}
	case c.Options.Targets != nil:
		ts = c.Options.Targets()
	}
	for _, t := range ts {
		c.registerFamily(t.Family)
	}
	return ts
}

// StopFast makes the coming stop withdraw at once, without the graceful
// wait and drain (the scheduler is failing, not being stopped by an operator).
func (c *Controller) StopFast() {
	c.mu.Lock()
	c.fast = true
	c.mu.Unlock()
}

// set makes the decision: announce routes, or withdraw everything.
func (c *Controller) set(ctx context.Context, announce bool, routes map[netip.Prefix]bool, attrs Attrs, why, reason string) {
	if !announce {
		routes = nil
	}
	if !c.apply(ctx, routes, attrs, reason) {
		return
	}
	c.mu.Lock()
	c.want, c.desired, c.changedAt, c.why = announce, maps.Clone(routes), time.Now(), why
	c.mu.Unlock()
	if announce {
		c.Logger.Info("route announced", "component", "announce", "prefixes", sortedPrefixes(routes), "reason", reason)
	} else {
		c.Logger.Warn("route withdrawn", "component", "announce", "reason", reason, "why", why)
	}
}

// retry applies the last decision again after a failure.
func (c *Controller) retry(ctx context.Context, attrs Attrs) {
	c.mu.Lock()
	routes, reason := maps.Clone(c.desired), reasonReady
	if !c.want {
		reason = reasonStopping
	}
	c.mu.Unlock()
	c.apply(ctx, routes, attrs, reason)
}

// apply has the speaker announce exactly routes and records, per family,
// what it did; it reports false when nothing was changed (every route failed).
func (c *Controller) apply(ctx context.Context, routes map[netip.Prefix]bool, attrs Attrs, reason string) bool {
	set := map[netip.Prefix]Attrs{}
	for p := range routes {
		set[p] = attrs
	}
	err := c.Speaker.Set(ctx, set)
	failed, rest := failedRoutes(err)
	c.mu.Lock()
	before := maps.Clone(c.applied)
	if before == nil {
		before = map[netip.Prefix]bool{}
	}
	if rest != nil { // a failure that names no route: nothing is known to have changed
		c.mu.Unlock()
		c.Logger.Error("changing the announcement failed; will retry", "component", "announce", "err", err)
		c.countErrors(slices.Collect(maps.Keys(routes)), before)
		return false
	}
	after := map[netip.Prefix]bool{}
	for p := range routes {
		if failed[p] == nil {
			after[p] = true
		}
	}
	for p := range before {
		if failed[p] != nil && !routes[p] { // its withdrawal failed: still announced
			after[p] = true
		}
	}
	c.applied, c.failed = after, failed
	c.mu.Unlock()
	for p, e := range failed {
		c.Logger.Error("changing the announcement failed; will retry", "component", "announce", "family", FamilyOf(p), "prefix", p, "err", e)
		if c.errs != nil {
			c.errs.WithLabelValues(string(FamilyOf(p))).Inc()
		}
	}
	for _, p := range sortedPrefixes(mergeKeys(before, after)) {
		if before[p] == after[p] {
			continue
		}
		f := FamilyOf(p)
		if after[p] {
			c.Logger.Info("route announced", "component", "announce", "family", f, "prefix", p, "reason", reason)
		} else {
			c.Logger.Warn("route withdrawn", "component", "announce", "family", f, "prefix", p, "reason", reason)
		}
		if c.state != nil {
			c.changes.WithLabelValues(reason, string(f)).Inc()
		}
	}
	if c.state != nil {
		for _, f := range []Family{IPv4, IPv6} {
			on := slices.ContainsFunc(slices.Collect(maps.Keys(after)), func(p netip.Prefix) bool { return FamilyOf(p) == f })
			if on || c.hasFamily(f) {
				c.state.WithLabelValues(string(f)).Set(boolFloat(on))
			}
		}
	}
	if c.OnChange != nil && !maps.Equal(before, after) {
		c.OnChange()
	}
	return len(failed) == 0 || len(after) > 0 || len(routes) == 0
}

func (c *Controller) countErrors(routes []netip.Prefix, before map[netip.Prefix]bool) {
	if c.errs == nil {
		return
	}
	fams := map[Family]bool{}
	for _, p := range append(routes, slices.Collect(maps.Keys(before))...) {
		fams[FamilyOf(p)] = true
	}
	for f := range fams {
		c.errs.WithLabelValues(string(f)).Inc()
	}
}

// hasFamily reports whether the last targets name f.
func (c *Controller) hasFamily(f Family) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.targets, func(t Target) bool { return t.Family == f })
}

func sortedPrefixes(m map[netip.Prefix]bool) []netip.Prefix {
	return slices.SortedFunc(maps.Keys(m), func(a, b netip.Prefix) int { return cmp.Or(a.Addr().Compare(b.Addr()), a.Bits()-b.Bits()) })
}

func mergeKeys(a, b map[netip.Prefix]bool) map[netip.Prefix]bool {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// gracefulStop runs after the daemon was asked to stop: routers are told to
// prefer other paths (RFC 8326), then the routes are withdrawn, then the
// scheduler keeps answering for the drain period while routers converge.
func (c *Controller) gracefulStop(o ControllerOptions) {
	ctx, cancel := context.WithTimeout(context.Background(), o.Drain.PreWithdraw+o.Drain.Linger+10*time.Second)
	defer cancel()
	c.mu.Lock()
	if c.fast {
		o.Drain = announcecfg.Drain{}
	}
	applied := maps.Clone(c.applied)
	c.mu.Unlock()
	announced := len(applied) > 0
	if announced && o.Drain.PreWithdraw > 0 {
		c.Logger.Info("stopping: announcing with GRACEFUL_SHUTDOWN", "component", "announce", "wait", o.Drain.PreWithdraw)
		set := map[netip.Prefix]Attrs{}
		for p := range applied {
			set[p] = o.Attrs.With(GracefulShutdown)
		}
		if err := c.Speaker.Set(ctx, set); err == nil {
			time.Sleep(o.Drain.PreWithdraw)
		}
	}
	c.set(ctx, false, nil, o.Attrs, "stopping", reasonStopping)
	if announced && o.Drain.Linger > 0 {
		c.Logger.Info("stopping: route withdrawn, still answering while routers converge", "component", "announce", "drain", o.Drain.Linger)
		time.Sleep(o.Drain.Linger)
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
