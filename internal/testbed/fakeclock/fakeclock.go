// Package fakeclock is a clock that moves only when the test says so, for
// code that takes its time and timers from an injected clock (the health
// checker's CheckerOptions.Clock). A test then counts probes, intervals and
// refreshes exactly instead of sleeping and counting what happened meanwhile.
//
// The usual step: wait until every goroutine under test has armed its timer
// (Armed), then AdvanceToNext: time jumps to the earliest deadline and the
// timers due then fire. Firing only sends on the timer's channel; the
// goroutine's reaction runs concurrently, which is why the next step waits
// for Armed again.
package fakeclock

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/wait"
)

// Clock is a fake clock. Its methods are safe for concurrent use.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	armed map[*Timer]struct{}
}

// New returns a clock reading start.
func New(start time.Time) *Clock {
	return &Clock{now: start, armed: map[*Timer]struct{}{}}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires once the clock has advanced by d (at
// once on the next Advance when d <= 0).
func (c *Clock) NewTimer(d time.Duration) *Timer {
	t := &Timer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// Armed is how many timers are waiting to fire.
func (c *Clock) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.armed)
}

// Next is the earliest deadline of an armed timer; false when none is armed.
func (c *Clock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nextLocked()
}

func (c *Clock) nextLocked() (time.Time, bool) {
	var next time.Time
	found := false
	for t := range c.armed {
		if !found || t.when.Before(next) {
			next, found = t.when, true
		}
	}
	return next, found
}

// Advance moves the clock forward by d, firing every timer due by then.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.now.Add(d))
}

// AdvanceToNext moves the clock to the earliest deadline of an armed timer
// (not backwards: an overdue timer fires at the current time) and fires the
// timers due then. It returns the new time; with no timer armed it does
// nothing.
func (c *Clock) AdvanceToNext() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if next, ok := c.nextLocked(); ok && next.After(c.now) {
		c.setLocked(next)
	} else {
		c.setLocked(c.now)
	}
	return c.now
}

func (c *Clock) setLocked(now time.Time) {
	c.now = now
	for t := range c.armed {
		if !t.when.After(now) {
			delete(c.armed, t)
			select {
			case t.ch <- now:
			default: // a value not received yet: a time.Timer drops it too
			}
		}
	}
}

// Step waits until n timers are armed (every goroutine under test waits on
// its timer: what the last step set off is done), then AdvanceToNext.
func (c *Clock) Step(t testing.TB, n int) time.Time {
	t.Helper()
	wait.For(t, fmt.Sprintf("%d timers armed", n), wait.DefaultTimeout, func() bool { return c.Armed() == n })
	return c.AdvanceToNext()
}

// Timer is a fake clock's timer, with time.Timer's semantics since Go 1.23:
// after Reset or Stop, no value from before is received.
type Timer struct {
	c    *Clock
	ch   chan time.Time
	when time.Time
}

// C is the channel the timer fires on.
func (t *Timer) C() <-chan time.Time { return t.ch }

// Reset (re)arms the timer to fire d after the clock's current time.
func (t *Timer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.drainLocked()
	t.when = t.c.now.Add(d)
	t.c.armed[t] = struct{}{}
}

// Stop disarms the timer.
func (t *Timer) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.drainLocked()
	delete(t.c.armed, t)
}

func (t *Timer) drainLocked() {
	select {
	case <-t.ch:
	default:
	}
}
