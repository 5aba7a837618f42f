package balance

import (
	"math"
	"sync/atomic"
	"time"
)

// Bounded chash counts load as recent requests: every request adds 1 to its
// server's counter and to its key's demand counter, and a counter halves
// every half-life. Such a count is the request rate times half-life / ln 2
// in steady traffic, and it forgets a burst within a few half-lives, so a
// server's count approximates the STBs that recently started on it rather
// than every request since the start.
//
// Each counter is one 64-bit word, updated with a compare-and-swap and no
// lock, that carries the tick it was last updated at: decay is applied
// lazily by whoever next touches the word, so nothing ever sweeps the
// counters. Layout:
//
//	stamp (20 bits) | picks this tick (8 bits) | value (36 bits, 8 fractional)
//
// The stamp is the coarse clock's tick modulo 2^20; a tick is a 64th of a
// half-life, so stamps wrap after 16,384 half-lives, long after any value
// has decayed to zero. The value saturates at 2^28 requests (a key asked
// for three million times a second, at the default half-life).
const (
	ticksPerHalfLife = 64
	stampBits        = 20
	countBits        = 8
	valueBits        = 36
	fracBits         = 8
	unit             = 1 << fracBits // one request
	stampMask        = 1<<stampBits - 1
	countMask        = 1<<countBits - 1
	valueMask        = 1<<valueBits - 1
	// A value of at most 2^28 requests is below one unit after 36 halvings.
	decayHorizon = 36 * ticksPerHalfLife
	// aheadTicks is how far a stamp may be ahead of a picker's tick.
	aheadTicks = 64 * ticksPerHalfLife
)

// decayFrac[d] is 2^(-d/64): the fraction a counter keeps over d ticks of
// one half-life. It is computed once and never written.
var decayFrac = func() (f [ticksPerHalfLife]float64) {
	for d := range f {
		f[d] = math.Exp2(-float64(d) / ticksPerHalfLife)
	}
	return f
}()

func unpackWord(w uint64) (stamp, n uint32, v uint64) {
	return uint32(w >> (countBits + valueBits)), uint32(w>>valueBits) & countMask, w & valueMask
}

func packWord(stamp, n uint32, v uint64) uint64 {
	return uint64(stamp&stampMask)<<(countBits+valueBits) | uint64(n&countMask)<<valueBits | min(v, valueMask)
}

// ticksSince is how many ticks have passed from stamp to tick, 0 when the
// word was stamped at tick or a little later (a picker that refreshed the
// clock first may stamp a word with a tick this picker has not loaded yet).
func ticksSince(stamp uint32, tick int64) uint32 {
	d := (uint32(tick) - stamp) & stampMask
	if d > stampMask-aheadTicks {
		return 0
	}
	return d
}

// decayed is v after d ticks.
func decayed(v uint64, d uint32) uint64 {
	if d == 0 {
		return v
	}
	if d >= decayHorizon {
		return 0
	}
	return uint64(float64(v>>(d/ticksPerHalfLife)) * decayFrac[d%ticksPerHalfLife])
}

// counterAt reads a counter word as of tick: value in requests.
func counterAt(w uint64, tick int64) float64 {
	stamp, _, v := unpackWord(w)
	return float64(decayed(v, ticksSince(stamp, tick))) / unit
}

// bump returns w decayed to tick with one request added: the new word, the
// picks the word had already counted in this tick (0 for the first), and
// the new value in requests. The count saturates; a stamp newer than tick
// is kept.
func bump(w uint64, tick int64) (next uint64, n uint32, demand float64) {
	if sameTick(w, tick) { // the common case, kept small enough to inline
		n = uint32(w>>valueBits) & countMask
		next = w + unit
		if n < countMask {
			next += 1 << valueBits
		}
		return next, n, float64(next&valueMask) / unit
	}
	return bumpSlow(w, tick)
}

// sameTick reports whether w was stamped at tick and one more request fits.
func sameTick(w uint64, tick int64) bool {
	v := w & valueMask
	return uint32(w>>(countBits+valueBits)) == uint32(tick)&stampMask && v != 0 && v <= valueMask-unit
}

func bumpSlow(w uint64, tick int64) (next uint64, n uint32, demand float64) {
	stamp, n, v := unpackWord(w)
	d := ticksSince(stamp, tick)
	if d != 0 || v == 0 { // a zero value has nothing to decay: restamp it
		stamp, n = uint32(tick), 0
	}
	v = min(decayed(v, d)+unit, valueMask)
	next = packWord(stamp, min(n+1, countMask), v)
	return next, n, float64(v) / unit
}

// bumpValue is bump for a server's counter: the new word and value (in
// units), without the pick count.
func bumpValue(w uint64, tick int64) (next, v uint64) {
	if sameTick(w, tick) {
		next = w + unit
		return next, next & valueMask
	}
	next, _, _ = bumpSlow(w, tick)
	return next, next & valueMask
}

// clockGate says whether a pick that is about to leave its key's first
// server, and is the n-th pick of its key in this tick, should read the
// clock first. A stale clock only overstates loads and demand (decay not
// yet applied), so a pick that stays on the first server never needs the
// time; one that spreads reads it on its key's 1st, 2nd, 4th, 8th ... pick
// in a tick and, once the count saturates, on one pick in 64 (raw is the
// key's counter word after the pick: within a tick its value grows by one
// request a pick, so its low bits count picks). Without a time source a
// clock that stopped can only be noticed by picks: after a quiet spell, a
// key's requests see the demand it had before until its next gated pick
// (at most as many as it had in its last tick); table rebuilds, which
// start every build's clock at its build time, bound that in a scheduler.
func clockGate(n uint32, raw uint64) bool {
	if n < countMask {
		return n&(n+1) == 0
	}
	return (raw>>fracBits)&63 == 0
}

// totalGate says whether such a pick should also re-add the servers' loads
// into the total, which costs a load per server: from a key's 16th pick in
// a tick on, at the picks clockGate reads the clock at, and once the count
// saturates on one pick in every (mask+1), mask+1 >= servers, so that a
// burst within one tick is measured while it lasts at a cost that does not
// grow with the node.
func totalGate(n uint32, raw, mask uint64) bool {
	if n < countMask {
		return n >= 15 && n&(n+1) == 0
	}
	return (raw>>fracBits)&mask == 0
}

// coarseClock is the time bounded chash decays by, in ticks of a 64th of a
// half-life. Pick is not given the time and reading it costs more than a
// pick (hundreds of nanoseconds on some virtual machines), so the clock is
// read only when clockGate says so and the tick is kept in one atomic word
// that every pick loads.
type coarseClock struct {
	tick   atomic.Int64
	tickNs int64
	now    func() time.Time // time.Now; tests drive a fake clock
}

func newCoarseClock(halfLife time.Duration, start time.Time) *coarseClock {
	c := &coarseClock{tickNs: max(1, int64(halfLife)/ticksPerHalfLife), now: time.Now}
	c.tick.Store(c.tickOf(start))
	return c
}

func (c *coarseClock) tickOf(t time.Time) int64 { return t.UnixNano() / c.tickNs }

// peek is the tick refresh would move to, without moving it.
func (c *coarseClock) peek() int64 { return max(c.tick.Load(), c.tickOf(c.now())) }

// refresh reads the time and moves the tick forward (never back); it
// reports the tick and whether this call moved it.
func (c *coarseClock) refresh() (tick int64, advanced bool) {
	t := c.tickOf(c.now())
	for {
		old := c.tick.Load()
		if t <= old {
			return old, false
		}
		if c.tick.CompareAndSwap(old, t) {
			return t, true
		}
	}
}
