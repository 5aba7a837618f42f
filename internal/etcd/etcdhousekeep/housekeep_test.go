package etcdhousekeep_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/anysched/anysched/internal/etcd/etcdhousekeep"
	"github.com/anysched/anysched/internal/etcd/etcdserver"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/internal/wiring/obs"
)

const quota = 16 << 20

// defragTimeout bounds a wait that includes defragmenting a full 16 MiB
// member: under -race on a loaded machine that alone has taken most of
// wait.DefaultTimeout.
const defragTimeout = time.Minute

// bigStore leaves a test that fills, compacts or defragments megabytes
// of etcd to the plain run: under -race the embedded member is
// instrumented too, and on a loaded CI machine a defragmentation then
// took longer than a minute. TestOnlyTheLeaderMaintains races the
// housekeeper's own concurrency.
func bigStore(t *testing.T) {
	if testing.Short() {
		t.Skip("megabytes through an embedded etcd: make test runs it plain, not under -race")
	}
}

// fast is the defaults at a test's pace: a round every 20 ms, no floor.
func fast() etcdhousekeep.Config {
	c := etcdhousekeep.DefaultConfig()
	c.Interval, c.CompactInterval, c.MinHistory = 20*time.Millisecond, 20*time.Millisecond, 0
	return c
}

type running struct {
	*etcdhousekeep.Housekeeper
	reg *prometheus.Registry
	log *logtest.Recorder
}

func (r running) counter(t *testing.T, name, label string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s}", name, label)
	return 0
}

// run runs a housekeeper until the test ends (or stop is called).
func run(t *testing.T, cli *clientv3.Client, c etcdhousekeep.Config, o etcdhousekeep.Options) (running, func()) {
	t.Helper()
	r := running{reg: prometheus.NewRegistry(), log: logtest.New()}
	r.Housekeeper = etcdhousekeep.New(cli, c, o, r.reg, r.log.Logger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return r, stop
}

func put(cli *clientv3.Client, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := cli.Put(ctx, key, "v")
	return err
}

func hasAlarm(s etcdhousekeep.Status, alarm string) bool {
	return slices.ContainsFunc(s.Alarms, func(a etcdhousekeep.Alarm) bool { return a.Type == alarm })
}

// TestNoSpaceRecovered: history fills the quota and etcd refuses every
// write with NOSPACE. A housekeeper that only watches reports it (status,
// gauges) and changes nothing; one that maintains compacts, defragments,
// disarms, and writes succeed again.
func TestNoSpaceRecovered(t *testing.T) {
	bigStore(t)
	e := etcdtest.StartWith(t, etcdserver.EmbeddedOptions{QuotaBackendBytes: quota})
	cli := e.Client()
	written := etcdtest.FillToNoSpace(t, cli, e.Prefix, 4)
	if err := put(cli, e.Prefix+"after"); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("a write after the quota: %v, want NOSPACE", err)
	}

	watch := fast()
	watch.Maintain = false
	w, stop := run(t, cli, watch, etcdhousekeep.Options{})
	wait.For(t, "the watcher's first reading", wait.DefaultTimeout, func() bool { return !w.Status().At.IsZero() })
	st := w.Status()
	if !hasAlarm(st, etcdhousekeep.AlarmNoSpace) || len(st.Members) != 1 {
		t.Fatalf("status %+v: want one member and NOSPACE", st)
	}
	m := st.Members[0]
	if m.Quota != quota || m.DBSize < quota*9/10 || m.Err != "" {
		t.Errorf("member %+v: want the 16 MiB quota, a db near it", m)
	}
	if g := w.counter(t, "anysched_etcd_alarm_active_bool", etcdhousekeep.AlarmNoSpace); g != 1 {
		t.Errorf("NOSPACE gauge %v, want 1", g)
	}
	if g := w.counter(t, "anysched_etcd_alarm_active_bool", etcdhousekeep.AlarmCorrupt); g != 0 {
		t.Errorf("CORRUPT gauge %v, want 0", g)
	}
	if problems := obs.LintMetrics(w.reg); len(problems) > 0 {
		t.Errorf("metric lint:\n%s", strings.Join(problems, "\n"))
	}
	stop()
	if n := w.counter(t, "anysched_etcd_compactions_total", "ok") + w.counter(t, "anysched_etcd_defragmentations_total", "ok"); n != 0 {
		t.Errorf("a watching housekeeper compacted or defragmented %v times", n)
	}
	if err := put(cli, e.Prefix+"after"); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("after a watching housekeeper: %v, want NOSPACE still", err)
	}

	h, _ := run(t, cli, fast(), etcdhousekeep.Options{})
	took := wait.ForErr(t, "NOSPACE cleared", defragTimeout, func() error {
		if s := h.Status(); s.At.IsZero() || hasAlarm(s, etcdhousekeep.AlarmNoSpace) {
			return fmt.Errorf("alarms %v", s.Alarms)
		}
		return put(cli, e.Prefix+"after")
	})
	after := h.Status()
	t.Logf("%d MiB written into a 16 MiB quota; recovered in %s: db %d -> %d bytes (in use %d)",
		written>>20, took.Round(time.Millisecond), m.DBSize, after.Members[0].DBSize, after.Members[0].DBSizeInUse)
	for _, c := range []struct{ name, label string }{
		{"anysched_etcd_compactions_total", "ok"}, {"anysched_etcd_defragmentations_total", "ok"}, {"anysched_etcd_nospace_recoveries_total", "disarmed"},
	} {
		if v := h.counter(t, c.name, c.label); v < 1 {
			t.Errorf("%s{%s} = %v, want at least 1", c.name, c.label, v)
		}
	}
	if after.Members[0].DBSize >= m.DBSize/2 {
		t.Errorf("db %d bytes after the recovery, was %d: not defragmented", after.Members[0].DBSize, m.DBSize)
	}
	if after.Compacted == 0 || len(after.Problems) != 0 {
		t.Errorf("after the recovery: compacted %d, problems %v", after.Compacted, after.Problems)
	}
	if len(h.log.Containing(slog.LevelWarn, "NOSPACE cleared")) != 1 {
		t.Errorf("the recovery is not logged once at WARN: %v", h.log.Records(slog.LevelInfo))
	}
	if g := h.counter(t, "anysched_etcd_alarm_active_bool", etcdhousekeep.AlarmNoSpace); g != 0 {
		t.Errorf("NOSPACE gauge %v after the recovery, want 0", g)
	}
}

// TestNoSpaceOfLiveData: live data fills the quota; compaction cannot
// make room, so the housekeeper says so once, loudly, and leaves the
// alarm; once the operator deletes data, it clears the alarm.
func TestNoSpaceOfLiveData(t *testing.T) {
	bigStore(t)
	e := etcdtest.StartWith(t, etcdserver.EmbeddedOptions{QuotaBackendBytes: quota})
	cli := e.Client()
	etcdtest.FillToNoSpace(t, cli, e.Prefix, 1<<30)
	h, _ := run(t, cli, fast(), etcdhousekeep.Options{})
	wait.ForErr(t, "three rounds finding no room", defragTimeout, func() error {
		if n := h.counter(t, "anysched_etcd_nospace_recoveries_total", "no_room"); n < 3 {
			return fmt.Errorf("%v rounds; recovery errors %v, defragmentations %v ok %v failed; status %+v; logged %v", n,
				h.counter(t, "anysched_etcd_nospace_recoveries_total", "error"),
				h.counter(t, "anysched_etcd_defragmentations_total", "ok"), h.counter(t, "anysched_etcd_defragmentations_total", "error"),
				h.Status(), h.log.Records(slog.LevelWarn))
		}
		return nil
	})
	st := h.Status()
	if !hasAlarm(st, etcdhousekeep.AlarmNoSpace) || len(st.Problems) != 1 || !strings.Contains(st.Problems[0], "live data") {
		t.Errorf("status %+v: want NOSPACE and the live-data problem", st)
	}
	if errs := h.log.Records(slog.LevelError); len(errs) != 1 || !strings.Contains(errs[0].Message, "live data") {
		t.Errorf("logged at ERROR %v, want the live-data problem once", errs)
	}
	// One defragmentation tells the room there is; it is not repeated.
	if d := h.counter(t, "anysched_etcd_defragmentations_total", "ok"); d != 1 {
		t.Errorf("defragmented %v times with no room to gain, want once", d)
	}
	if err := put(cli, e.Prefix+"after"); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("write: %v, want NOSPACE still", err)
	}
	// The operator deletes data (deletes pass under NOSPACE).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, e.Prefix+"fill/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	wait.ForErr(t, "NOSPACE cleared after the deletion", defragTimeout, func() error {
		if s := h.Status(); hasAlarm(s, etcdhousekeep.AlarmNoSpace) || len(s.Problems) > 0 {
			return fmt.Errorf("alarms %v, problems %v", s.Alarms, s.Problems)
		}
		return put(cli, e.Prefix+"after")
	})
}

// compactedRevision is etcd's own compaction revision, read off a watch
// from revision 1 (0: nothing compacted yet).
func compactedRevision(cli *clientv3.Client) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	for wr := range cli.Watch(ctx, "/compaction-probe", clientv3.WithRev(1)) {
		if wr.CompactRevision != 0 {
			return wr.CompactRevision
		}
	}
	return 0
}

func revision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, "/revision-probe")
	if err != nil {
		t.Fatal(err)
	}
	return r.Header.Revision
}

// writer overwrites a few keys until the test ends; it counts its writes.
func writer(t *testing.T, cli *clientv3.Client, prefix string) *atomic.Int64 {
	n := new(atomic.Int64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := cli.Put(ctx, fmt.Sprintf("%sw/%d", prefix, i%10), "v"); err == nil {
				n.Add(1)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return n
}

// TestHistoryBounded: while a writer keeps writing, the history stays
// bounded: by revisions (keep_revisions), and by time (max_history) when
// that is the tighter bound; and never shorter than keep_revisions.
func TestHistoryBounded(t *testing.T) {
	bigStore(t)
	for _, tc := range []struct {
		name string
		keep int64
		age  time.Duration
	}{
		{"by revisions", 300, time.Hour},
		{"by time", 1 << 40, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := etcdtest.Start(t)
			cli := e.Client()
			n := writer(t, cli, e.Prefix)
			c := fast()
			c.KeepRevisions, c.MaxHistory = tc.keep, tc.age
			h, _ := run(t, cli, c, etcdhousekeep.Options{})
			began := time.Now()
			var longest int64
			for round := 0; round < 5; round++ {
				rev := revision(t, cli)
				// Everything older than the bound as of rev goes: by
				// revisions at once, by time once rev is tc.age old.
				want := rev - tc.keep
				if tc.keep > rev {
					want = rev
				}
				wait.For(t, fmt.Sprintf("compaction past %d", want), wait.DefaultTimeout, func() bool { return compactedRevision(cli) >= want })
				got, now := compactedRevision(cli), revision(t, cli)
				if tc.keep < now && now-got < tc.keep {
					t.Errorf("compacted to %d at revision %d: fewer than keep_revisions %d kept", got, now, tc.keep)
				}
				longest = max(longest, now-got)
			}
			secs := time.Since(began).Seconds()
			t.Logf("%d writes in %.1fs (%.0f/s); longest history seen %d revisions; %v compactions", n.Load(), secs, float64(n.Load())/secs,
				longest, h.counter(t, "anysched_etcd_compactions_total", "ok"))
			if h.Status().Compacted == 0 {
				t.Error("the status does not say what was compacted")
			}
		})
	}
}

// TestOnlyTheLeaderMaintains: a center that does not lead only watches.
func TestOnlyTheLeaderMaintains(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client()
	writer(t, cli, e.Prefix)
	c := fast()
	c.KeepRevisions = 10
	var lead atomic.Bool
	h, _ := run(t, cli, c, etcdhousekeep.Options{Lead: func(context.Context) (bool, error) { return lead.Load(), nil }})
	// Ten rounds by the status's own clock, over more history than
	// keep_revisions: a leader would have compacted by then. Counted in
	// rounds, not writes, so a slow machine only makes the test longer.
	var rounds int
	var last time.Time
	wait.For(t, "ten rounds", wait.DefaultTimeout, func() bool {
		if at := h.Status().At; !at.Equal(last) {
			rounds, last = rounds+1, at
		}
		return rounds > 10 && revision(t, cli) > 2*c.KeepRevisions
	})
	if got := compactedRevision(cli); got != 0 || h.Status().Leading {
		t.Fatalf("a center not leading compacted to %d (leading %v)", got, h.Status().Leading)
	}
	lead.Store(true)
	wait.For(t, "the leader compacting", wait.DefaultTimeout, func() bool { return compactedRevision(cli) > 0 && h.Status().Leading })
	if len(h.log.Containing(slog.LevelInfo, "this center keeps etcd's house")) != 1 {
		t.Error("taking the lead is not logged")
	}
}

// TestDefragmentsFreeSpace: once compaction has freed more than
// defrag_free_ratio of the quota, the member is defragmented and its
// file shrinks; a round later nothing is left to do.
func TestDefragmentsFreeSpace(t *testing.T) {
	bigStore(t)
	e := etcdtest.StartWith(t, etcdserver.EmbeddedOptions{QuotaBackendBytes: 4 * quota})
	cli := e.Client()
	val := strings.Repeat("x", 256<<10)
	for i := range 60 { // 15 MiB of history over 4 keys
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.Put(ctx, fmt.Sprintf("%sbig/%d", e.Prefix, i%4), val)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	big := revision(t, cli)
	writer(t, cli, e.Prefix) // commits keep etcd's figure of what is in use current
	// The first compaction then frees every big value at once: one
	// defragmentation, not one per step of a compaction catching up (a
	// slow run, under the race detector, saw two).
	wait.For(t, "the big values out of the last 100 revisions", wait.DefaultTimeout, func() bool { return revision(t, cli) > big+200 })
	c := fast()
	c.KeepRevisions, c.DefragMinInterval = 100, time.Millisecond
	h, _ := run(t, cli, c, etcdhousekeep.Options{})
	wait.For(t, "a defragmentation", defragTimeout, func() bool {
		return h.counter(t, "anysched_etcd_defragmentations_total", "ok") >= 1
	})
	var before, after int64
	for _, r := range h.log.Containing(slog.LevelInfo, "defragmented an etcd member") {
		before, _ = strconv.ParseInt(r.Attrs["db_size_bytes_before"], 10, 64)
	}
	wait.For(t, "the status after it", wait.DefaultTimeout, func() bool {
		s := h.Status()
		after = s.Members[0].DBSize
		return !s.LastDefrag.IsZero() && s.At.After(s.LastDefrag)
	})
	t.Logf("db %d -> %d bytes", before, after)
	if after > before/2 {
		t.Errorf("db %d bytes after defragmenting, %d before", after, before)
	}
	n := h.counter(t, "anysched_etcd_defragmentations_total", "ok")
	rounds := h.Status().At
	wait.For(t, "more rounds", wait.DefaultTimeout, func() bool { return h.Status().At.After(rounds.Add(5 * c.Interval)) })
	if again := h.counter(t, "anysched_etcd_defragmentations_total", "ok"); again != n {
		t.Errorf("defragmented again (%v -> %v) with nothing freed", n, again)
	}
}
