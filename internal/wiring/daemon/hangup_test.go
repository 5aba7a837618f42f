package daemon_test

import (
	"context"
	"errors"
	"log/slog"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/anysched/anysched/internal/wiring/daemon"
)

// A SIGHUP reloads every registered thing, a failing one is logged and
// does not stop the others, and the daemon keeps running.
func TestHangupsReload(t *testing.T) {
	signal.Ignore(syscall.SIGHUP) // as SignalContext does: a hangup before Notify must not kill the test
	var reopened, reloaded atomic.Int32
	rec := logtest.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Hangups(rec.Logger(),
			daemon.Reload{What: "certificates", Do: func() error { reloaded.Add(1); return errors.New("bad key") }},
			daemon.Reload{What: "access log", Do: func() error { reopened.Add(1); return nil }},
		)(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for reopened.Load() == 0 && time.Now().Before(deadline) {
		// Until Hangups has called Notify, the signal is ignored: send again.
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if reopened.Load() == 0 || reloaded.Load() == 0 {
		t.Fatalf("after SIGHUP: access log reopened %d times, certificates reloaded %d times", reopened.Load(), reloaded.Load())
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Hangups returned %v", err)
	}
	failed := rec.Containing(slog.LevelError, "reload on SIGHUP failed")
	if len(failed) == 0 || failed[0].Attrs["what"] != "certificates" || !strings.Contains(failed[0].Attrs["err"], "bad key") {
		t.Fatalf("failure logged as %v", failed)
	}
	if ok := rec.Containing(slog.LevelInfo, "reloaded on SIGHUP"); len(ok) == 0 || ok[0].Attrs["what"] != "access log" {
		t.Fatalf("success logged as %v", ok)
	}
}
