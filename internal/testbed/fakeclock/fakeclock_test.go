package fakeclock_test

import (
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/fakeclock"
	"github.com/anysched/anysched/internal/testbed/wait"
)

func fired(tm *fakeclock.Timer) (time.Time, bool) {
	select {
	case at := <-tm.C():
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestTimersFireWhenTheClockReachesThem(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	c := fakeclock.New(t0)
	a, b := c.NewTimer(3*time.Second), c.NewTimer(time.Second)
	if c.Armed() != 2 {
		t.Fatalf("%d armed", c.Armed())
	}
	if next, ok := c.Next(); !ok || !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("next %v %v", next, ok)
	}
	c.Advance(999 * time.Millisecond)
	if _, ok := fired(b); ok {
		t.Fatal("fired early")
	}
	if at := c.AdvanceToNext(); !at.Equal(t0.Add(time.Second)) || !c.Now().Equal(at) {
		t.Fatalf("AdvanceToNext: %v, now %v", at, c.Now())
	}
	if at, ok := fired(b); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("b: %v %v", at, ok)
	}
	if _, ok := fired(a); ok || c.Armed() != 1 {
		t.Fatalf("a fired with b, or %d armed", c.Armed())
	}

	// Reset re-arms from now and forgets a value not received; Stop disarms.
	b.Reset(time.Second)
	c.Advance(5 * time.Second)
	b.Reset(time.Second)
	if _, ok := fired(b); ok {
		t.Fatal("a stale value after Reset")
	}
	if _, ok := fired(a); !ok {
		t.Fatal("a did not fire")
	}
	b.Stop()
	if c.Armed() != 0 {
		t.Fatalf("%d armed after Stop", c.Armed())
	}
	if at := c.AdvanceToNext(); !at.Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("AdvanceToNext with nothing armed moved the clock to %v", at)
	}
	if _, ok := fired(b); ok {
		t.Fatal("a stopped timer fired")
	}
}

// TestStepWaitsForTheGoroutine: a goroutine re-arming its timer after each
// tick is stepped exactly once per interval.
func TestStepWaitsForTheGoroutine(t *testing.T) {
	c := fakeclock.New(time.Unix(0, 0))
	ticks := make(chan time.Time, 100)
	done := make(chan struct{})
	go func() {
		tm := c.NewTimer(time.Second)
		defer tm.Stop()
		for {
			select {
			case at := <-tm.C():
				ticks <- at
				tm.Reset(time.Second)
			case <-done:
				return
			}
		}
	}()
	for i := 1; i <= 10; i++ {
		if at := c.Step(t, 1); at.Unix() != int64(i) {
			t.Fatalf("step %d at %v", i, at)
		}
	}
	wait.For(t, "the 10th tick handled", wait.DefaultTimeout, func() bool { return c.Armed() == 1 })
	close(done)
	if len(ticks) != 10 {
		t.Fatalf("%d ticks for 10 steps", len(ticks))
	}
}
