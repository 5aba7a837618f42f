package overflow_test

import (
	"sync"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/overflow"
)

// TestSnapshotCountersOneSetPerSnapshot: callers asking at once for one
// snapshot share one set of counters; a new snapshot starts a new set.
func TestSnapshotCountersOneSetPerSnapshot(t *testing.T) {
	var sc overflow.SnapshotCounters
	a := &topology.Snapshot{Services: make([]topology.ServiceView, 2), Nodes: make([]topology.NodeView, 3)}
	got := make([]*overflow.Counters, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i] = sc.For(a) })
	}
	wg.Wait()
	for _, c := range got[1:] {
		if c != got[0] {
			t.Fatal("two sets of counters for one snapshot")
		}
	}
	got[0].Add(1, 2)
	if sc.For(a).Load(1, 2) != 1 {
		t.Error("a count was lost")
	}
	b := &topology.Snapshot{Services: make([]topology.ServiceView, 2), Nodes: make([]topology.NodeView, 3)}
	if c := sc.For(b); c == got[0] || c.Load(1, 2) != 0 {
		t.Error("a new snapshot kept the old counters")
	}
}
