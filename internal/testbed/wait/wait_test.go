package wait_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
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

// fatalTB records a Fatalf and ends its goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestForFailsAtTheDeadline(t *testing.T) {
	for name, run := range map[string]func(testing.TB){
		"For": func(tb testing.TB) { wait.For(tb, "never", 30*time.Millisecond, func() bool { return false }) },
		"ForEvery": func(tb testing.TB) {
			wait.ForEvery(tb, "never", 30*time.Millisecond, time.Millisecond, func() bool { return false })
		},
		"ForErr": func(tb testing.TB) {
			wait.ForErr(tb, "never", 30*time.Millisecond, func() error { return errors.New("still not") })
		},
	} {
		f := &fatalTB{TB: t}
		done := make(chan struct{})
		start := time.Now()
		go func() { defer close(done); run(f); f.msg = "returned" }()
		<-done
		if el := time.Since(start); el < 30*time.Millisecond || !strings.HasPrefix(f.msg, "never: not within 30ms") {
			t.Errorf("%s: %q after %s", name, f.msg, el)
		}
		if name == "ForErr" && !strings.HasSuffix(f.msg, "still not") {
			t.Errorf("ForErr does not say why: %q", f.msg)
		}
	}
}
