package etcdhousekeep

import (
	"strings"
	"testing"
	"time"
)

// TestTarget: the compaction revision keeps at most KeepRevisions
// revisions and MaxHistory of history, and never less than MinHistory.
func TestTarget(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := Config{KeepRevisions: 1000, MaxHistory: 5 * time.Minute, MinHistory: time.Minute}
	var h history
	// A revision every 10 s, 100 revisions apart: 600 a minute.
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 10 * time.Second) }
	rev := func(i int) int64 { return 100 * int64(i) }
	for i := 0; i <= 5; i++ {
		h.record(at(i), rev(i), c.MaxHistory)
	}
	if got := h.target(c, at(5), rev(5)); got != 0 {
		t.Errorf("watched 50s of a 1m floor: target %d, want 0 (nothing is known to be a minute old)", got)
	}
	for i := 6; i <= 12; i++ {
		h.record(at(i), rev(i), c.MaxHistory)
	}
	// At 120 s the revision is 1200: 1000 revisions ago is 200, but the
	// floor (a minute ago: 600) does not bind.
	if got := h.target(c, at(12), rev(12)); got != 200 {
		t.Errorf("by revisions: target %d, want 200", got)
	}
	// Fast writes: 1000 revisions are less than the floor's minute.
	fast := Config{KeepRevisions: 50, MaxHistory: c.MaxHistory, MinHistory: c.MinHistory}
	if got := h.target(fast, at(12), rev(12)); got != rev(6) {
		t.Errorf("revisions faster than the floor: target %d, want the revision a minute ago %d", got, rev(6))
	}
	// Slow writes: 100,000 revisions would keep the whole past; five
	// minutes ago bounds it.
	for i := 13; i <= 60; i++ {
		h.record(at(i), rev(i), c.MaxHistory)
	}
	slow := Config{KeepRevisions: 100_000, MaxHistory: c.MaxHistory, MinHistory: c.MinHistory}
	if got := h.target(slow, at(60), rev(60)); got != rev(30) {
		t.Errorf("by time: target %d, want the revision five minutes ago %d", got, rev(30))
	}
	if n := len(h.samples); n > 32 {
		t.Errorf("%d samples kept for a 5m bound at 10s: the old ones are not forgotten", n)
	}
	// A store restored from a backup goes back in revisions: start over.
	h.record(at(61), 10, c.MaxHistory)
	if got := h.target(slow, at(61), 10); got != 0 {
		t.Errorf("after the revision went back: target %d, want 0", got)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate("etcd.housekeeping."); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := Config{Interval: time.Millisecond, CompactInterval: 2 * time.Hour, KeepRevisions: 10, MaxHistory: 48 * time.Hour,
		MinHistory: time.Second, DefragFreeRatio: 1, DefragMinInterval: time.Second, RecoverBelowRatio: 0}
	err := bad.Validate("etcd.housekeeping.")
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, key := range []string{"interval", "compact_interval", "keep_revisions", "max_history", "min_history", "defrag_free_ratio", "defrag_min_interval", "recover_below_ratio"} {
		if !strings.Contains(err.Error(), "etcd.housekeeping."+key+":") {
			t.Errorf("no problem reported for %s in:\n%v", key, err)
		}
	}
}
