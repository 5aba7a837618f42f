package steer

import (
	"slices"
	"time"

	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/balance"
)

// Builder builds a scheduler's successive engines. It keeps what an engine
// carries over to the next (the balance tables, when each server came back
// into service) and what the last engine was built from, so that a caller
// asking on every snapshot, health and operator-state change builds only
// when an input changed or a load-following policy needs a fresh engine.
// One caller at a time.
type Builder struct {
	snap      *topology.Snapshot
	avail     *avail.Availability
	balance   balance.Config
	over      Overflow
	table     *Balances // the balance tables in service, lent to the next build
	rampUntil time.Time // rebuild until then: a server ramps up (slow start)
	err       string    // the last build's error

	back map[string]time.Time // server name -> when it came back into service
	prev map[string]bool      // server name -> available at the last call
}

// Build dates the servers that came back into service since the last call
// (in.Back, for slow start), lends the last engine's balance tables
// (in.Prev), and builds the engine for snap with Build. It returns nil when
// the last engine still holds: same snapshot, availability, balance policy
// and overflow state, no balance tables (policies that follow load, swrr's
// adaptive weights and p2c, are rebuilt on every call, about once a second)
// and no server ramping up. err is Build's error when it differs from the
// last build's, so that a caller logging it says each problem once.
func (b *Builder) Build(snap *topology.Snapshot, in Inputs) (eng *Engine, err error) {
	in.Back = b.comebacks(snap, in.Avail, in.Now)
	if b.table == nil && snap == b.snap && sameAvailability(in.Avail, b.avail) && in.Balance.Equal(b.balance) &&
		in.Overflow == b.over && !in.Now.Before(b.rampUntil) {
		return nil, nil
	}
	in.Prev = b.table
	eng, err = Build(snap, in)
	last := b.err
	b.err = ""
	if err != nil {
		b.err = err.Error()
		if b.err == last {
			err = nil
		}
	}
	b.snap, b.avail, b.balance, b.over = snap, in.Avail, in.Balance, in.Overflow
	b.table, b.rampUntil = eng.Balance(), eng.RampingUntil()
	return eng, err
}

// sameAvailability compares what an engine reads of the merged health.
func sameAvailability(a, b *avail.Availability) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Available, b.Available) && slices.Equal(a.Why, b.Why) && slices.Equal(a.Figures, b.Figures) &&
		sameFamilies(a.FamilyDown, b.FamilyDown)
}

// sameFamilies compares per-family health (nil: no family down alone).
func sameFamilies(a, b *[2][]bool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a[0], b[0]) && slices.Equal(a[1], b[1])
}

// comebacks is when each server of snap came back into service (zero:
// not seen coming back), as seen from one call to the next: a server
// unavailable at the last call and available now came back now.
func (b *Builder) comebacks(snap *topology.Snapshot, av *avail.Availability, now time.Time) []time.Time {
	if b.back == nil {
		b.back = map[string]time.Time{}
	}
	cur := make(map[string]bool, len(snap.Servers))
	back := make([]time.Time, len(snap.Servers))
	for i, sv := range snap.Servers {
		up := av == nil || av.Available[i]
		cur[sv.Name] = up
		if was, known := b.prev[sv.Name]; known && !was && up {
			b.back[sv.Name] = now
		}
		back[i] = b.back[sv.Name]
	}
	for name, t := range b.back {
		if now.Sub(t) > time.Hour { // long past any slow-start window
			delete(b.back, name)
		}
	}
	b.prev = cur
	return back
}
