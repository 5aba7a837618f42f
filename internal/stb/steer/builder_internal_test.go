package steer

import (
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

func allUp(n int) *avail.Availability {
	av := &avail.Availability{Figures: make([]avail.Figures, n), Available: make([]bool, n), Why: make([]string, n)}
	for i := range av.Available {
		av.Available[i] = true
	}
	return av
}

// TestBuilderDatesComebacks: a server seen coming back is dated for slow
// start, and only then.
func TestBuilderDatesComebacks(t *testing.T) {
	snap := fixture.Compile(t, fixture.Shaped(t, topogen.Options{NodesPerRegion: 1, ServersPerNode: 4, ZonesPerRegion: 1, NetworksPerZone: 1}, fixture.Cities(1)...))
	var b Builder
	t0 := time.Unix(1_800_000_000, 0)
	for i, back := range b.comebacks(snap, allUp(len(snap.Servers)), t0) {
		if !back.IsZero() {
			t.Fatalf("server %d dated %v on the first build (nothing came back)", i, back)
		}
	}
	down := allUp(len(snap.Servers))
	down.Available[1] = false
	b.comebacks(snap, down, t0.Add(time.Second))
	back := b.comebacks(snap, allUp(len(snap.Servers)), t0.Add(2*time.Second))
	if !back[1].Equal(t0.Add(2*time.Second)) || !back[0].IsZero() {
		t.Errorf("back times %v: want server 1 at +2s only", back)
	}
}
