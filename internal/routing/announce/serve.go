package announce

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/anysched/anysched/netconfig"
	"golang.org/x/sync/errgroup"
)

// Route is a scheduler's announcement: the speaker, the controller that
// follows readiness, and the service address the host must accept.
type Route struct {
	Speaker    Speaker
	Controller *Controller
	// VIPs are the addresses to keep on the host while announcing, one per
	// family (BGP: the kernel must accept packets for them; OSPF: on lo, so
	// that a withdrawn address still accepts the STBs routed here until
	// OSPF converged); nil: the host's business.
	VIPs   func() ([]*netconfig.VIP, error)
	Logger *slog.Logger
	// BeforeWithdraw, if set, runs once when ctx ends, before the
	// controller withdraws: what must be handed on while the route still
	// brings the STBs here (a planner's last plan, which the next planner
	// starts from as soon as the STBs reach it). It should be bounded: the
	// withdrawal waits for it. Not run when a component fails.
	BeforeWithdraw func()
}

// Serve runs the scheduler's components (run) with the route until ctx
// ends, then stops in order: the controller withdraws (after
// GRACEFUL_SHUTDOWN in BGP mode) and drains while the components still
// answer, and only then are they stopped. The controller runs outside the
// components' context for that reason. A failing component withdraws at
// once.
func (r *Route) Serve(ctx context.Context, run func(context.Context) error) error {
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	g, gctx := errgroup.WithContext(serveCtx)
	g.Go(func() error { return run(gctx) })
	g.Go(func() error { return r.Speaker.Run(gctx) })
	g.Go(func() error {
		// The controller stops when ctx ends, after BeforeWithdraw.
		ctrlCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		go func() {
			select {
			case <-ctx.Done():
				// Both may be done: a failed component hands nothing on.
				if r.BeforeWithdraw != nil && gctx.Err() == nil {
					r.BeforeWithdraw()
				}
				cancel()
			case <-gctx.Done():
			}
		}()
		go func() {
			<-gctx.Done()
			r.Controller.StopFast()
			cancel()
		}()
		if r.VIPs != nil {
			go r.keepVIPs(ctrlCtx)
		}
		err := r.Controller.Run(ctrlCtx)
		if r.VIPs != nil {
			if vs, verr := r.VIPs(); verr == nil {
				for _, v := range vs {
					_ = v.Down(context.Background())
				}
			}
		}
		stopServing()
		return err
	})
	return g.Wait()
}

// keepVIPs keeps the service addresses on their interface, following
// topology changes.
func (r *Route) keepVIPs(ctx context.Context) {
	current := map[netip.Prefix]*netconfig.VIP{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if vs, err := r.VIPs(); err == nil {
			want := map[netip.Prefix]bool{}
			for _, v := range vs {
				want[v.Prefix()] = true
				if current[v.Prefix()] != nil {
					continue
				}
				if err := v.Up(ctx); err != nil {
					r.Logger.Error("putting the service address on the interface failed", "component", "announce", "address", v, "err", err)
					continue
				}
				current[v.Prefix()] = v
				r.Logger.Info("service address up", "component", "announce", "address", v)
			}
			for p, v := range current {
				if !want[p] && v.Down(ctx) == nil {
					delete(current, p)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
