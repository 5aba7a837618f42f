package overflow

import (
	"sync/atomic"

	"github.com/anysched/anysched/internal/province/topology"
)

// SnapshotCounters keeps one set of Counters for the current snapshot: the
// counters are by snapshot index, so a new snapshot starts a new set.
type SnapshotCounters struct {
	cur atomic.Pointer[snapCounters]
}

type snapCounters struct {
	snap *topology.Snapshot
	c    *Counters
}

// For returns the counters of snap, new ones when the snapshot changed.
// Engine builds and the evaluation ask concurrently: the compare-and-swap
// keeps them on one set.
func (s *SnapshotCounters) For(snap *topology.Snapshot) *Counters {
	for {
		cur := s.cur.Load()
		if cur != nil && cur.snap == snap {
			return cur.c
		}
		next := &snapCounters{snap: snap, c: NewCounters(len(snap.Services), len(snap.Nodes))}
		if s.cur.CompareAndSwap(cur, next) {
			return next.c
		}
	}
}
