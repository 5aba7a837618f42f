package accesslog

import "sync/atomic"

// limiter is a lock-free token bucket in its GCRA form: one atomic
// "theoretical arrival time" instead of a token count and a refill time, so
// allow is a load and a compare-and-swap, without allocating.
type limiter struct {
	interval  int64 // ns per token: 1s / rate
	tolerance int64 // how far ahead of now tat may run: (burst-1) * interval
	tat       atomic.Int64
}

func newLimiter(perSecond int) *limiter {
	iv := int64(1e9) / int64(perSecond)
	return &limiter{interval: iv, tolerance: int64(perSecond-1) * iv}
}

// allow takes a token at now (Unix ns), reporting whether one was left.
// Callers' clocks may disagree slightly; an earlier now only makes the
// bucket stricter for that call.
func (l *limiter) allow(now int64) bool {
	for {
		tat := l.tat.Load()
		t := max(tat, now)
		if t-now > l.tolerance {
			return false
		}
		if l.tat.CompareAndSwap(tat, t+l.interval) {
			return true
		}
	}
}
