package balance

import (
	"testing"
	"time"
)

// FuzzCHashCounterWord: whatever word and tick, counting a request keeps
// the word's value within one request above its decayed value, never
// below one request, and the word reads back as that value.
func FuzzCHashCounterWord(f *testing.F) {
	f.Add(uint64(0), int64(0), uint16(0))
	f.Add(packWord(5, 3, 40*unit), int64(5), uint16(64))
	f.Add(packWord(stampMask, countMask, valueMask), int64(1<<40), uint16(1))
	f.Add(packWord(10, 0, 7*unit), int64(8), uint16(0)) // stamped ahead of the picker
	f.Fuzz(func(t *testing.T, w uint64, tick int64, later uint16) {
		stamp, n, v := unpackWord(w)
		before := decayed(v, ticksSince(stamp, tick))
		next, gotN, demand := bump(w, tick)
		_, _, nv := unpackWord(next)
		if nv < min(unit, valueMask) || nv > min(before+unit, valueMask) {
			t.Fatalf("word %x at tick %d: value %d -> %d (decayed %d)", w, tick, v, nv, before)
		}
		if demand != float64(nv)/unit || counterAt(next, tick) != demand {
			t.Fatalf("word %x: demand %v, reads %v, value %d", w, demand, counterAt(next, tick), nv)
		}
		if gotN > n {
			t.Fatalf("word %x: count %d reported as %d", w, n, gotN)
		}
		if _, vv := bumpValue(w, tick); vv != nv {
			t.Fatalf("word %x: bumpValue %d, bump %d", w, vv, nv)
		}
		// Later, it only fades.
		if got := counterAt(next, tick+int64(later)); got > demand {
			t.Fatalf("word %x: %v requests %d ticks later, %v now", next, got, later, demand)
		}
	})
}

// FuzzCHashPick drives a small bounded node with requests for a few keys
// from a few clients at fuzzed times: every pick is an eligible server, and
// Explain, asked just before, names it.
func FuzzCHashPick(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 1, 1, 2, 2, 40})
	f.Add([]byte{7, 3, 0, 7, 3, 0, 7, 3, 0, 7, 3, 0, 7, 3, 200})
	f.Fuzz(func(t *testing.T, ops []byte) {
		ss := servers(100, 50, 200, 0, 100)
		now := t0
		c := fakeClock(mustCHash(t, ss, nil, CHashOptions{Epsilon: 0.1, HalfLife: time.Second, MinLoad: 3, Now: now}), &now)
		for i := 0; i+2 < len(ops); i += 3 {
			key, client := HashKey(string(rune('a'+ops[i]%16))), mix(uint64(ops[i+1]))
			now = now.Add(time.Duration(ops[i+2]) * time.Millisecond)
			x := c.Explain(key, client)
			got := c.Pick(key, client)
			if got < 0 || got >= int32(len(ss)) || ss[got].Weight == 0 {
				t.Fatalf("op %d: picked %d", i/3, got)
			}
			if x.Pick != got {
				t.Fatalf("op %d: explain said %d, pick gave %d: %+v", i/3, x.Pick, got, x)
			}
		}
	})
}
