package announce

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
	"github.com/prometheus/client_golang/prometheus"
)

// ControllerOptions tune when the route follows readiness.
type ControllerOptions struct {
	// Prefix is the /32 (regional) or the aggregate (center); when unset,
	// PrefixFunc gives it (it comes with the topology, which may change it).
	Prefix     netip.Prefix
	PrefixFunc func() (netip.Prefix, bool)
	Attrs      Attrs
	// Timing is the announce section's check_interval, rise, fall,
	// hold_down and drain (a zero check interval is 200ms, a rise or fall
	// below one is one).
	announcecfg.Timing
}

// ReadyFunc says whether the scheduler can take STBs; the error says why not.
type ReadyFunc func() error

// Controller announces Prefix while Ready holds, with hysteresis, and stops
// gracefully. A drill can force a withdrawal for a while.
type Controller struct {
	Speaker Speaker
	Options ControllerOptions
	Ready   ReadyFunc
	Logger  *slog.Logger
	// OnChange, if set, is called after the route was announced or withdrawn.
	OnChange func()
	// Drilled, if set, says whether a failover drill withdraws the route
	// now; asked at every check, so that a drill that ends early (its key
	// deleted) or is capped ends here too.
	Drilled func(now time.Time) bool

	mu        sync.Mutex
	announced bool
	current   netip.Prefix // what is announced
	fast      bool         // stop without the graceful sequence (a component failed)
	changedAt time.Time
	why       string // why the route is withdrawn ("" when announced)
	state     prometheus.Gauge
	changes   *prometheus.CounterVec
}

// Register adds the controller's metrics.
func (c *Controller) Register(reg prometheus.Registerer) {
	c.state = prometheus.NewGauge(prometheus.GaugeOpts{Name: "anysched_announce_state", Help: "1 while the Anycast route is announced, 0 while withdrawn."})
	c.changes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anysched_announce_changes_total", Help: "Route announcements and withdrawals, by reason: ready, prefix_changed (announced); not_ready, drill, stopping (withdrawn)."}, []string{"reason"})
	for _, r := range []string{reasonReady, reasonPrefix, reasonNotReady, reasonDrill, reasonStopping} {
		c.changes.WithLabelValues(r)
	}
	reg.MustRegister(c.state, c.changes)
}

// State reports whether the route is announced, and why not.
func (c *Controller) State() (announced bool, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.announced, c.why
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
		prefix, known := c.prefix()
		err := c.Ready()
		if err == nil && !known {
			err = errNoPrefix
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
		announced, since := c.announced, time.Since(c.changedAt)
		c.mu.Unlock()
		held := !c.changedAtZero() && since < o.HoldDown && !forced
		c.mu.Lock()
		moved := announced && known && prefix != c.current
		c.mu.Unlock()
		switch {
		case moved: // the topology changed the Anycast prefix
			c.set(ctx, true, o.Attrs, "", reasonPrefix)
		case !announced && okRun >= o.Rise && !held:
			c.set(ctx, true, o.Attrs, "", reasonReady)
		case announced && (badRun >= o.Fall || forced) && !held:
			reason := reasonNotReady
			if forced {
				reason = reasonDrill
			}
			c.set(ctx, false, o.Attrs, err.Error(), reason)
		case !announced && err != nil:
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

func (c *Controller) prefix() (netip.Prefix, bool) {
	if c.Options.Prefix.IsValid() {
		return c.Options.Prefix, true
	}
	if c.Options.PrefixFunc != nil {
		return c.Options.PrefixFunc()
	}
	return netip.Prefix{}, false
}

// StopFast makes the coming stop withdraw at once, without the graceful
// wait and drain (the scheduler is failing, not being stopped by an operator).
func (c *Controller) StopFast() {
	c.mu.Lock()
	c.fast = true
	c.mu.Unlock()
}

func (c *Controller) changedAtZero() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changedAt.IsZero()
}

func (c *Controller) set(ctx context.Context, announce bool, attrs Attrs, why, reason string) {
	routes := map[netip.Prefix]Attrs{}
	prefix, known := c.prefix()
	if announce && known {
		routes[prefix] = attrs
	}
	if err := c.Speaker.Set(ctx, routes); err != nil {
		c.Logger.Error("changing the announcement failed; will retry", "component", "announce", "announce", announce, "err", err)
		return
	}
	c.mu.Lock()
	c.announced, c.changedAt, c.why = announce && known, time.Now(), why
	if announce {
		c.current = prefix
	}
	c.mu.Unlock()
	if announce {
		c.Logger.Info("route announced", "component", "announce", "prefix", prefix, "reason", reason)
	} else {
		c.Logger.Warn("route withdrawn", "component", "announce", "prefix", prefix, "reason", reason, "why", why)
	}
	if c.state != nil {
		c.state.Set(boolFloat(announce))
		c.changes.WithLabelValues(reason).Inc()
	}
	if c.OnChange != nil {
		c.OnChange()
	}
}

// gracefulStop runs after the daemon was asked to stop: routers are told to
// prefer other paths (RFC 8326), then the route is withdrawn, then the
// scheduler keeps answering for the drain period while routers converge.
func (c *Controller) gracefulStop(o ControllerOptions) {
	ctx, cancel := context.WithTimeout(context.Background(), o.Drain.PreWithdraw+o.Drain.Linger+10*time.Second)
	defer cancel()
	announced, _ := c.State()
	c.mu.Lock()
	if c.fast {
		o.Drain = announcecfg.Drain{}
	}
	prefix := c.current
	c.mu.Unlock()
	if announced && o.Drain.PreWithdraw > 0 {
		c.Logger.Info("stopping: announcing with GRACEFUL_SHUTDOWN", "component", "announce", "wait", o.Drain.PreWithdraw)
		if err := c.Speaker.Set(ctx, map[netip.Prefix]Attrs{prefix: o.Attrs.With(GracefulShutdown)}); err == nil {
			time.Sleep(o.Drain.PreWithdraw)
		}
	}
	c.set(ctx, false, o.Attrs, "stopping", reasonStopping)
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
