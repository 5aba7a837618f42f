package main

import (
	"context"
	"time"

	"github.com/anysched/anysched/internal/province/health"
)

// simClock is the bench's time: it runs speed times as fast as the wall
// clock from its start. Every writer's intervals are in simulated time, so
// at speed 4 a 30 s publication interval is 7.5 s of wall time and the
// figures per simulated second are what the writers would do at speed 1,
// as long as etcd and the machine keep up (the report says when a writer
// fell behind). It implements health.Clock, so the real checker runs on it.
type simClock struct {
	start time.Time // simulated time at the wall start
	wall  time.Time // wall start (monotonic)
	speed float64
}

func newSimClock(speed float64) *simClock {
	now := time.Now()
	return &simClock{start: now.Round(0), wall: now, speed: speed}
}

// Now is the simulated time.
func (c *simClock) Now() time.Time {
	return c.start.Add(time.Duration(float64(time.Since(c.wall)) * c.speed))
}

// Elapsed is the simulated time since the start.
func (c *simClock) Elapsed() time.Duration { return c.Now().Sub(c.start) }

// Wall converts a simulated duration to wall time.
func (c *simClock) Wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.speed)
}

// NewTimer implements health.Clock.
func (c *simClock) NewTimer(d time.Duration) health.Timer {
	return &simTimer{c: c, t: time.NewTimer(c.Wall(d))}
}

type simTimer struct {
	c *simClock
	t *time.Timer
}

func (t *simTimer) C() <-chan time.Time   { return t.t.C }
func (t *simTimer) Reset(d time.Duration) { t.t.Reset(t.c.Wall(d)) }
func (t *simTimer) Stop()                 { t.t.Stop() }

// every calls fn every d of simulated time (first after phase) until ctx
// ends; a call that takes longer than d delays the next one (counted in
// late, so that the report can say a writer did not keep up).
func (c *simClock) every(ctx context.Context, d, phase time.Duration, late *lateCounter, fn func(ctx context.Context)) {
	next := c.Now().Add(phase)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.Wall(next.Sub(c.Now()))):
		}
		fn(ctx)
		next = next.Add(d)
		if now := c.Now(); now.After(next) {
			if late != nil {
				late.add(now.Sub(next))
			}
			next = now
		}
	}
}
