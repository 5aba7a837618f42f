package ctl

import (
	"context"
	"time"
)

// clock is time as the commands see it: the drills poll and time what they
// see, status shows ages. schedctl uses the wall clock; tests script one, so
// that a drill runs through in no time and its report is exact.
type clock interface {
	Now() time.Time
	// Sleep waits for d, or returns ctx's error when ctx ends first.
	Sleep(ctx context.Context, d time.Duration) error
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// since is how long ago t was, by c.
func since(c clock, t time.Time) time.Duration { return c.Now().Sub(t) }
