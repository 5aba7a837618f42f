package etcdhousekeep

import "time"

// sample is the store's revision at a moment.
type sample struct {
	at  time.Time
	rev int64
}

// history remembers the revision at each round, so that a time bound
// becomes a revision: etcd compacts by revision only.
type history struct {
	samples []sample // oldest first
}

// record adds rev at now and forgets the samples no bound needs: those
// older than the newest one at or before now-keep.
func (h *history) record(now time.Time, rev int64, keep time.Duration) {
	if n := len(h.samples); n > 0 && rev < h.samples[n-1].rev {
		// A restored or replaced store: the old revisions mean nothing.
		h.samples = h.samples[:0]
	}
	h.samples = append(h.samples, sample{now, rev})
	cut := 0
	for i, s := range h.samples {
		if s.at.After(now.Add(-keep)) {
			break
		}
		cut = i
	}
	h.samples = h.samples[cut:]
}

// at is the revision at the latest sample no later than t.
func (h *history) at(t time.Time) (int64, bool) {
	rev, ok := int64(0), false
	for _, s := range h.samples {
		if s.at.After(t) {
			break
		}
		rev, ok = s.rev, true
	}
	return rev, ok
}

// target is the revision to compact to at now with the store at rev, or
// 0 for none: keep at most c.KeepRevisions revisions and c.MaxHistory of
// history, but always c.MinHistory (unknown until this housekeeper has
// watched that long: then nothing is compacted).
func (h *history) target(c Config, now time.Time, rev int64) int64 {
	t := rev - c.KeepRevisions
	if old, ok := h.at(now.Add(-c.MaxHistory)); ok {
		t = max(t, old)
	}
	floor, ok := h.at(now.Add(-c.MinHistory))
	if !ok {
		return 0
	}
	return max(min(t, floor), 0)
}
