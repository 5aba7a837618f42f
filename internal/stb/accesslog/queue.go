package accesslog

import (
	"math/rand/v2"
	"sync"
)

const (
	// maxShards: more would only make the writer's merge longer; with
	// shards picked at random, 16 keep collisions rare on any machine we run.
	maxShards = 16
	// maxProbes is how many shards a line tries before it is dropped, so a
	// line is not lost while a neighbouring shard has room, and an
	// overloaded queue costs a bounded number of locks per line.
	maxProbes = 4
)

// queue holds lines between Record and the writer: a few shards, each a
// mutex and a fixed-capacity buffer that the writer swaps for an empty one.
// A shard's lock is held for a copy of one Entry, and callers pick shards at
// random (a per-thread generator, no shared state), so many serving
// goroutines do not contend the way they would on one channel.
type queue struct {
	shards []shard
	// wake tells the writer a shard is half full (it also runs on a timer).
	wake chan struct{}
	per  int // each shard's capacity
	half int
}

type shard struct {
	mu  sync.Mutex
	buf []Entry // len: queued lines; cap: the shard's share of Options.Queue
	_   [64]byte
}

// newQueue splits capacity lines over up to procs shards (one per P, so
// concurrent callers rarely share one; no more shards than lines).
func newQueue(capacity, procs int) *queue {
	n := max(1, min(procs, maxShards, capacity))
	per := (capacity + n - 1) / n
	q := &queue{shards: make([]shard, n), wake: make(chan struct{}, 1), per: per, half: max(1, per/2)}
	for i := range q.shards {
		q.shards[i].buf = make([]Entry, 0, per)
	}
	return q
}

// push copies *e into a shard, reporting false when the shards it tried
// were full. It never blocks beyond a shard lock held for one copy.
func (q *queue) push(e *Entry) bool {
	n := uint32(len(q.shards))
	i := uint32(0)
	if n > 1 {
		i = uint32(uint64(rand.Uint32()) * uint64(n) >> 32)
	}
	for range min(n, maxProbes) {
		s := &q.shards[i]
		s.mu.Lock()
		if l := len(s.buf); l < cap(s.buf) {
			s.buf = s.buf[:l+1]
			s.buf[l] = *e
			s.mu.Unlock()
			if l+1 == q.half {
				select {
				case q.wake <- struct{}{}:
				default: // the writer is already due
				}
			}
			return true
		}
		s.mu.Unlock()
		if i++; i == n {
			i = 0
		}
	}
	return false
}

// swapAll appends every shard's queued lines to batches, in exchange for
// the empty buffers of the same capacity that spare holds (a shard's spare
// entry is nil once traded). The shards are all locked at once, so a drain is
// a cut across them: a caller's line is in it only if every earlier line of
// that caller is too. Taken one at a time, a line pushed into a shard not
// yet taken would be written before an earlier one pushed into a shard
// already taken. Callers hold one lock at a time, so taking them in order
// cannot deadlock; they wait for 16 lock handovers at most.
func (q *queue) swapAll(spare [][]Entry, batches []batch) []batch {
	for i := range q.shards {
		q.shards[i].mu.Lock()
	}
	for i := range q.shards {
		s := &q.shards[i]
		if len(s.buf) > 0 {
			full := s.buf
			s.buf = spare[i][:0]
			spare[i] = nil
			batches = append(batches, batch{shard: i, lines: full})
		}
	}
	for i := range q.shards {
		q.shards[i].mu.Unlock()
	}
	return batches
}

// queued is how many lines wait (for tests).
func (q *queue) queued() int {
	n := 0
	for i := range q.shards {
		s := &q.shards[i]
		s.mu.Lock()
		n += len(s.buf)
		s.mu.Unlock()
	}
	return n
}
