package announce_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/routing/announce"
	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// recorder is a Speaker that keeps the history of desired states; the
// controller's logic is tested with it, the BGP path below with real GoBGP.
type recorder struct {
	mu      sync.Mutex
	history []bool // announced or not, per Set
}

func (r *recorder) Set(_ context.Context, routes map[netip.Prefix]announce.Attrs) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.history = append(r.history, len(routes) > 0)
	return nil
}
func (r *recorder) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (r *recorder) changes() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.history)
}

var vip = netip.MustParsePrefix("198.18.0.1/32")

func run(t *testing.T, c *announce.Controller) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func TestHysteresisHoldsAgainstFlapping(t *testing.T) {
	// Readiness is scripted per check, so the test does not depend on timing.
	var mode atomic.Int32 // 0 down, 1 up, 2 flapping
	var calls atomic.Int64
	rec := &recorder{}
	c := &announce.Controller{Speaker: rec, Logger: quiet, Ready: func() error {
		n := calls.Add(1)
		switch mode.Load() {
		case 1:
			return nil
		case 2:
			if n%2 == 0 {
				return nil
			}
		}
		return errors.New("no snapshot")
	}, Options: announce.ControllerOptions{Prefix: vip, Timing: announcecfg.Timing{CheckInterval: 5 * time.Millisecond, Rise: 3, Fall: 3, HoldDown: 300 * time.Millisecond}}}
	run(t, c)
	wait.For(t, "checks running", wait.DefaultTimeout, func() bool { return calls.Load() > 10 })
	if len(rec.changes()) != 0 {
		t.Fatalf("announced while not ready: %v", rec.changes())
	}
	if ok, why := c.State(); ok || why != "no snapshot" {
		t.Fatalf("state %v %q", ok, why)
	}
	mode.Store(1)
	wait.For(t, "announced after rise", wait.DefaultTimeout, func() bool { ok, _ := c.State(); return ok })
	// Flapping on every check: never 3 bad checks in a row, the route stays.
	mode.Store(2)
	start := calls.Load()
	wait.For(t, "many flapping checks", wait.DefaultTimeout, func() bool { return calls.Load() > start+60 })
	if got := rec.changes(); !slices.Equal(got, []bool{true}) {
		t.Fatalf("a flapping check changed the route: %v", got)
	}
	// Really down: withdrawn after Fall checks, with the reason.
	mode.Store(0)
	wait.For(t, "withdrawn", wait.DefaultTimeout, func() bool { ok, _ := c.State(); return !ok })
	withdrawnAt := time.Now()
	// Back up at once: the hold-down keeps it withdrawn for 300 ms.
	mode.Store(1)
	wait.For(t, "announced again", wait.DefaultTimeout, func() bool { ok, _ := c.State(); return ok })
	if held := time.Since(withdrawnAt); held < 250*time.Millisecond {
		t.Fatalf("re-announced after %s, inside the 300ms hold-down", held)
	}
}

func TestDrillWithdrawsForAWhile(t *testing.T) {
	rec := &recorder{}
	var until atomic.Int64
	c := &announce.Controller{Speaker: rec, Logger: quiet, Ready: func() error { return nil },
		Drilled: func(now time.Time) bool { return now.UnixNano() < until.Load() },
		Options: announce.ControllerOptions{Prefix: vip, Timing: announcecfg.Timing{CheckInterval: 10 * time.Millisecond, Rise: 1, Fall: 3}}}
	run(t, c)
	wait.For(t, "announced", wait.DefaultTimeout, func() bool { ok, _ := c.State(); return ok })
	until.Store(time.Now().Add(300 * time.Millisecond).UnixNano())
	wait.For(t, "withdrawn by the drill", wait.DefaultTimeout, func() bool { ok, why := c.State(); return !ok && why == "withdrawn by a failover drill" })
	wait.For(t, "back after the drill", wait.DefaultTimeout, func() bool { ok, _ := c.State(); return ok })
}

// TestGracefulStop: on stop the router first sees GRACEFUL_SHUTDOWN, then the
// withdrawal, and Run returns only after the drain period.
func TestGracefulStop(t *testing.T) {
	r := newRouter(t, 65000, 65101, "")
	sp := announce.NewBGP(announcecfg.BGP{ASN: 65101, RouterID: netip.MustParseAddr("10.1.0.1"), Peers: []announcecfg.BGPPeer{
		{Address: netip.MustParseAddr("127.0.0.1"), Port: r.Port, ASN: 65000, HoldTime: 3 * time.Second},
	}}, quiet)
	sctx, scancel := context.WithCancel(context.Background())
	sdone := make(chan error, 1)
	go func() { sdone <- sp.Run(sctx) }()
	t.Cleanup(func() { scancel(); <-sdone })

	c := &announce.Controller{Speaker: sp, Logger: quiet, Ready: func() error { return nil },
		Options: announce.ControllerOptions{Prefix: vip, Timing: announcecfg.Timing{CheckInterval: 20 * time.Millisecond, Rise: 1, Fall: 1,
			Drain: announcecfg.Drain{PreWithdraw: 700 * time.Millisecond, Linger: 500 * time.Millisecond}}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	wait.For(t, "route learned", wait.DefaultTimeout, func() bool { return len(r.Routes(t)) == 1 })

	stopAt := time.Now()
	cancel()
	wait.For(t, "GRACEFUL_SHUTDOWN seen", wait.DefaultTimeout, func() bool {
		rs := r.Routes(t)
		return len(rs) == 1 && slices.Contains(rs[0].Communities, announce.GracefulShutdown)
	})
	wait.For(t, "withdrawn", wait.DefaultTimeout, func() bool { return len(r.Routes(t)) == 0 })
	withdrawnAfter := time.Since(stopAt)
	if withdrawnAfter < 600*time.Millisecond {
		t.Fatalf("withdrawn %s after stop, before the graceful wait", withdrawnAfter)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if total := time.Since(stopAt); total < 1200*time.Millisecond {
		t.Fatalf("Run returned %s after stop, before the drain ended", total)
	}
}
