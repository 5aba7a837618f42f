package sdwatch_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/sdwatch"
	"github.com/anysched/anysched/internal/testbed/wait"
)

func send(t *testing.T, w *sdwatch.Watch, state string) {
	t.Helper()
	path := strings.TrimPrefix(w.Env()[0], "NOTIFY_SOCKET=")
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		t.Fatal(err)
	}
}

func start(t *testing.T, timeout time.Duration) (*sdwatch.Watch, chan time.Time, chan struct{}) {
	t.Helper()
	w, err := sdwatch.Listen(filepath.Join(t.TempDir(), "d.notify"), timeout)
	if err != nil {
		t.Fatal(err)
	}
	fired, ended := make(chan time.Time, 1), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { w.Run(ctx, func() { fired <- time.Now() }); close(ended) }()
	return w, fired, ended
}

// TestFiresAfterSilence: armed by READY, kept by WATCHDOG, it fires a
// timeout after the last WATCHDOG=1, not before.
func TestFiresAfterSilence(t *testing.T) {
	w, fired, ended := start(t, time.Second)
	if env := w.Env(); env[1] != "WATCHDOG_USEC=1000000" {
		t.Errorf("environment: %v", env)
	}
	time.Sleep(1500 * time.Millisecond) // not armed before READY
	select {
	case <-fired:
		t.Fatal("fired before READY=1")
	default:
	}
	send(t, w, "READY=1")
	for range 5 { // notifications well inside the timeout
		time.Sleep(100 * time.Millisecond)
		send(t, w, "WATCHDOG=1")
	}
	last := time.Now()
	select {
	case at := <-fired:
		if d := at.Sub(last); d < 900*time.Millisecond {
			t.Errorf("fired %s after the last notification, timeout 1s", d)
		}
	case <-time.After(wait.DefaultTimeout):
		t.Fatal("did not fire after the notifications stopped")
	}
	<-ended
	if w.Fired().IsZero() {
		t.Errorf("Fired %v after firing", w.Fired())
	}
}

// TestStoppingEndsTheWatch: STOPPING=1 (a graceful stop) never fires.
func TestStoppingEndsTheWatch(t *testing.T) {
	w, fired, ended := start(t, 200*time.Millisecond)
	send(t, w, "READY=1\nWATCHDOG=1")
	send(t, w, "STOPPING=1")
	<-ended
	select {
	case <-fired:
		t.Fatal("fired after STOPPING=1")
	default:
	}
}
