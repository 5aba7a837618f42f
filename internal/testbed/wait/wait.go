// Package wait is the tests' one way to wait for something: poll a
// condition until it holds or a deadline passes, never sleep and hope.
package wait

import (
	"testing"
	"time"
)

// DefaultTimeout is long enough for an etcd round trip or a BGP session on
// a loaded CI machine; tests that wait for something slower say so.
const DefaultTimeout = 15 * time.Second

// Interval is how often conditions are polled.
const Interval = 10 * time.Millisecond

// For polls cond until it returns true and returns how long that took; it
// fails the test with what when timeout passes first.
func For(t testing.TB, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	return ForEvery(t, what, timeout, Interval, cond)
}

// ForEvery is For polling every interval instead of Interval: for a
// benchmark that times what it waits for (10 ms would be the measurement).
func ForEvery(t testing.TB, what string, timeout, interval time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(interval)
	}
	return time.Since(start)
}

// ForErr is For with a condition that says why it does not hold yet; the
// last reason is in the failure.
func ForErr(t testing.TB, what string, timeout time.Duration, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(Interval)
	}
}

// Until is For without a test: it reports whether cond held before timeout.
func Until(timeout time.Duration, cond func() bool) bool {
	return UntilEvery(timeout, Interval, cond)
}

// UntilEvery is Until polling every interval: for a condition that is
// costly to ask (one that runs a process).
func UntilEvery(timeout, interval time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(interval) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
