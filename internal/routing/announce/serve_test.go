package announce_test

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/routing/announce"
	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// timed is a Speaker that dates the route's last withdrawal.
type timed struct {
	mu        sync.Mutex
	announced bool
	withdrawn time.Time
}

func (s *timed) Set(_ context.Context, routes map[netip.Prefix]announce.Attrs) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.announced = len(routes) > 0
	if !s.announced {
		s.withdrawn = time.Now()
	}
	return nil
}
func (s *timed) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (s *timed) state() (bool, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.announced, s.withdrawn
}

func route(sp *timed, drain time.Duration) *announce.Route {
	return &announce.Route{Speaker: sp, Logger: quiet, Controller: &announce.Controller{Speaker: sp, Logger: quiet, Ready: func() error { return nil },
		Options: announce.ControllerOptions{Prefix: vip, Timing: announcecfg.Timing{CheckInterval: 5 * time.Millisecond, Rise: 1, Fall: 1, Drain: announcecfg.Drain{Linger: drain}}}}}
}

// TestServeStopsInOrder: on stop the route is withdrawn, the components
// keep answering for the drain, and only then are they stopped.
func TestServeStopsInOrder(t *testing.T) {
	sp := &timed{}
	const drain = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	var stopped time.Time
	done := make(chan error, 1)
	go func() {
		done <- route(sp, drain).Serve(ctx, func(ctx context.Context) error {
			<-ctx.Done()
			stopped = time.Now()
			return nil
		})
	}()
	wait.For(t, "announced", wait.DefaultTimeout, func() bool { a, _ := sp.state(); return a })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	announced, withdrawn := sp.state()
	if announced || withdrawn.IsZero() {
		t.Fatal("stopped without withdrawing the route")
	}
	if d := stopped.Sub(withdrawn); d < drain {
		t.Errorf("components stopped %v after the withdrawal, before the %v drain was over", d, drain)
	}
}

// TestServeHandsOnBeforeWithdrawing: BeforeWithdraw runs when the stop
// begins, while the route is still announced, and the withdrawal waits
// for it.
func TestServeHandsOnBeforeWithdrawing(t *testing.T) {
	sp := &timed{}
	r := route(sp, 10*time.Millisecond)
	const handing = 200 * time.Millisecond
	var ran, announcedThen bool
	var handed time.Time
	r.BeforeWithdraw = func() {
		announcedThen, _ = sp.state()
		time.Sleep(handing) // the withdrawal must wait for this
		ran, handed = true, time.Now()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx, func(ctx context.Context) error { <-ctx.Done(); return nil }) }()
	wait.For(t, "announced", wait.DefaultTimeout, func() bool { a, _ := sp.state(); return a })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	_, withdrawn := sp.state()
	if !ran || !announcedThen {
		t.Fatalf("BeforeWithdraw ran %v, with the route announced %v", ran, announcedThen)
	}
	if withdrawn.Before(handed) {
		t.Errorf("withdrawn %v before BeforeWithdraw returned", handed.Sub(withdrawn))
	}
}

// TestServeFailingComponentWithdrawsAtOnce: a component's failure
// withdraws the route without the drain and ends Serve with the failure.
func TestServeFailingComponentWithdrawsAtOnce(t *testing.T) {
	sp := &timed{}
	broken := errors.New("front end broke")
	fail := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- route(sp, time.Minute).Serve(context.Background(), func(ctx context.Context) error {
			<-fail
			return broken
		})
	}()
	wait.For(t, "announced", wait.DefaultTimeout, func() bool { a, _ := sp.state(); return a })
	close(fail)
	select {
	case err := <-done:
		if !errors.Is(err, broken) {
			t.Fatalf("Serve: %v, want the component's failure", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still draining after a component failed")
	}
	if a, w := sp.state(); a || w.IsZero() {
		t.Error("the route was not withdrawn")
	}
}
