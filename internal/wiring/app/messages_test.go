package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/anysched/anysched/internal/wiring/app"
	"github.com/anysched/anysched/internal/wiring/app/center"
	"github.com/anysched/anysched/internal/wiring/daemon"
)

// TestCenterCleanStopLogsNoWarning: stopping the center (SIGTERM cancels
// its context) with its embedded etcd logs nothing at ERROR, and its etcd
// nothing at WARN (etcd logged "setting up serving from embedded etcd
// failed." at ERROR and its gRPC servers' "stopping/stopped insecure grpc
// server due to error" at WARN on every stop). The center's own warnings
// of its start (no trusted keys, here) may come at any moment.
func TestCenterCleanStopLogsNoWarning(t *testing.T) {
	cc := centerConfig(t)
	rec := logtest.New()
	_, stop := started(t, func(ctx context.Context, on daemon.Option) error { return center.Run(ctx, cc, rec.Logger(), on) })
	up := len(rec.Records(slog.LevelWarn)) // etcd's start is over: the center serves
	stop()
	for i, r := range rec.Records(slog.LevelWarn) {
		if r.Level >= slog.LevelError || (i >= up && r.Attrs["component"] == "etcd") {
			t.Errorf("a clean stop logged at %s: %s", r.Level, r)
		}
	}
}

// TestUnknownRegionWarned: a regional scheduler whose region is not in the
// topology says so at WARN, naming the regions there are and the nearest
// one, once per revision (a misspelt region used to say nothing).
func TestUnknownRegionWarned(t *testing.T) {
	cc := centerConfig(t)
	runCenter(t, &cc)
	waitUp(t, "center admin API", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })
	city := topogen.Cities(nil, 3)[0].Name
	typo := city[:len(city)-1] + "q" // one letter off
	rc := regionalConfig(t, cc, typo)
	rec := logtest.New()
	c := rc
	l, _ := started(t, func(ctx context.Context, on daemon.Option) error { return app.RunRegional(ctx, c, rec.Logger(), on) })

	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", writeTopology(t, 100)); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	want := fmt.Sprintf("region %q is not in topology revision ", typo)
	waitUp(t, "the WARN", func() bool { return len(rec.Containing(slog.LevelWarn, want)) > 0 })
	w := rec.Containing(slog.LevelWarn, want)[0]
	if !strings.Contains(w.Message, "(regions: "+city+", ") || !strings.Contains(w.Message, fmt.Sprintf("did you mean %q?", city)) {
		t.Errorf("the WARN should list the regions and suggest %q: %s", city, w.Message)
	}
	if si, err := info(l.Admin); err != nil || si.Ready || !strings.Contains(si.Why, typo) {
		t.Errorf("readiness: %+v, %v", si, err)
	}
	// A second revision: said again, once.
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", writeTopology(t, 200)); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	waitUp(t, "the WARN for the second revision", func() bool { return len(rec.Containing(slog.LevelWarn, want)) == 2 })
	time.Sleep(3 * rc.Snapshot.ConfirmInterval) // confirmations of the same revision say nothing more
	if n := len(rec.Containing(slog.LevelWarn, want)); n != 2 {
		t.Errorf("%d WARNs for two revisions, want 2", n)
	}
}
