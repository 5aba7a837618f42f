package accesslog

import "time"

// maxWrite bounds one write: a batch larger than this goes out in several
// writes of whole lines, so the buffer stays small however long the queue.
const maxWrite = 256 << 10

// slice bounds how long a drain runs before it lets the serving
// goroutines in. Where the scheduler has one core (GOMAXPROCS 1) the
// serving loops wait in the runtime's network poller, which the Go
// scheduler consults only when nothing else is runnable: a drain of a few
// thousand lines (the queue wakes the writer at half full) would hold
// every answer for a millisecond or more, the tail of the answers'
// latency. Parking for a moment sends the scheduler to the poller, so
// what is ready is served first (runtime.Gosched would not: the writer
// would be the runnable goroutine it picks). When nothing is ready the
// park lasts until the next network event or 1 ms, the poller's
// resolution: an idle scheduler's drains are slower, its answers are not.
const slice = 100 * time.Microsecond

// writer is Run's state: the empty buffers it trades for full ones, and the
// line encoder.
type writer struct {
	q       *queue
	spare   [][]Entry // per shard: the buffer swapped in on the next drain
	batches []batch
	buf     []byte
	enc     encoder
	yield   func() // lets the serving goroutines run; see slice
}

// batch is one shard's swapped-out lines and how far the merge has got.
type batch struct {
	shard int
	lines []Entry
	next  int
}

func newWriter(q *queue) *writer {
	w := &writer{q: q, spare: make([][]Entry, len(q.shards)), buf: make([]byte, 0, maxWrite+4096),
		yield: func() { time.Sleep(time.Microsecond) }}
	for i := range w.spare {
		w.spare[i] = make([]Entry, 0, q.per)
	}
	return w
}

// drain takes every shard's lines, encodes them in decision-time order and
// writes them, one write per maxWrite bytes. It returns the number of
// failed writes and the first error; their lines are lost.
func (w *writer) drain(out *sink) (failed int, err error) {
	w.batches = w.q.swapAll(w.spare, w.batches[:0])
	flush := func() {
		if len(w.buf) == 0 {
			return
		}
		if werr := out.write(w.buf); werr != nil {
			failed++
			if err == nil {
				err = werr
			}
		}
		w.buf = w.buf[:0]
	}
	start := time.Now()
	for n := 1; ; n++ {
		e := w.nextLine()
		if e == nil {
			break
		}
		w.buf = w.enc.appendLine(w.buf, e)
		if len(w.buf) >= maxWrite {
			flush()
		}
		if n%32 == 0 && time.Since(start) > slice {
			w.yield()
			start = time.Now()
		}
	}
	flush()
	for _, b := range w.batches {
		clear(b.lines) // let go of the request's strings
		w.spare[b.shard] = b.lines[:0]
	}
	return failed, err
}

// nextLine is the earliest unwritten line of the batches (ties: the lower
// shard), or nil. Each shard keeps arrival order, so the lines of one
// caller, whose times increase, come out in its order whichever shards they
// went to.
func (w *writer) nextLine() *Entry {
	var best *batch
	for i := range w.batches {
		b := &w.batches[i]
		if b.next == len(b.lines) {
			continue
		}
		if best == nil || b.lines[b.next].Time.Before(best.lines[best.next].Time) {
			best = b
		}
	}
	if best == nil {
		return nil
	}
	best.next++
	return &best.lines[best.next-1]
}
