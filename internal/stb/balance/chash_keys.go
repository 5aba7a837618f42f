package balance

import (
	"math/bits"
	"sync/atomic"
)

// keyDemand counts each content key's recent requests (chash_decay.go) in a
// fixed table of counter words indexed by the low bits of the key's ring
// hash: no map, no allocation, no lock. Keys that share a slot add up, so a
// cold key that lands in a hot key's slot is taken for hot and spread; with
// at least 16 slots per server that is a few cold keys out of thousands,
// and only the hot keys' slots matter. The table holds no server positions,
// so successive builds of a node's policy share it.
type keyDemand struct {
	slots  []atomic.Uint64
	mask   uint64
	tickNs int64 // the tick length its stamps count in
}

// keySlots sizes the table for a node: 16 per server, between 1,024 (8 KiB)
// and 16,384.
func keySlots(servers int) int {
	return 1 << min(14, max(10, bits.Len(uint(16*servers-1))))
}

func newKeyDemand(servers int, tickNs int64) *keyDemand {
	n := keySlots(max(1, servers))
	return &keyDemand{slots: make([]atomic.Uint64, n), mask: uint64(n - 1), tickNs: tickNs}
}

func (k *keyDemand) slot(h uint64) *atomic.Uint64 { return &k.slots[h&k.mask] }

// inherit copies prev's counters, re-stamped for k's tick length when the
// half-life changed (values decayed to now, stamped with k's tick).
func (k *keyDemand) inherit(prev *keyDemand, prevTick, tick int64) {
	if len(prev.slots) != len(k.slots) {
		return // a different table size: keys land elsewhere; start afresh
	}
	for i := range k.slots {
		w := prev.slots[i].Load()
		if w == 0 {
			continue
		}
		v := uint64(counterAt(w, prevTick) * unit)
		if v > 0 {
			k.slots[i].Store(packWord(uint32(tick), 0, v))
		}
	}
}
