package wait_test

import (
	"errors"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/wait"
)

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	wait.For(t, "third poll", time.Second, func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
	m := 0
	wait.ForErr(t, "second poll", time.Second, func() error {
		if m++; m < 2 {
			return errors.New("not yet")
		}
		return nil
	})
	if m != 2 {
		t.Fatalf("polled %d times, want 2", m)
	}
}

func TestUntilGivesUpAtTheDeadline(t *testing.T) {
	start := time.Now()
	if wait.Until(30*time.Millisecond, func() bool { return false }) {
		t.Fatal("Until reported a condition that never held")
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Fatalf("gave up after %s, before the 30ms deadline", el)
	}
	if !wait.Until(time.Second, func() bool { return true }) {
		t.Fatal("Until missed a condition that held at once")
	}
}
