package qoe

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// pool runs a function over the fixed chunks of [0, n) on up to GOMAXPROCS
// goroutines. The chunks do not depend on the number of workers, so a
// caller that keeps one result per chunk and combines them in chunk order
// (or combines integers) gets the same answer with one core or many.
// Workers take chunks from an atomic counter: a slow or descheduled worker
// (the machine is shared) costs its chunk, not an equal share of the work.
// After start, the workers are goroutines that wait for run (until stop),
// and run allocates nothing; without it each run starts them anew (one
// small allocation each).
type pool struct {
	workers int
	n       int // items
	chunk   int // items per chunk
	fn      func(worker, chunk, lo, hi int)
	next    atomic.Int64
	wg      sync.WaitGroup
	wake    []chan struct{} // per worker but the caller, after start
}

// newPool splits n items into chunks of chunk items; workers <= 0 means
// GOMAXPROCS.
func newPool(n, chunk, workers int) *pool {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if chunk < 1 {
		chunk = 1
	}
	p := &pool{workers: workers, n: n, chunk: chunk}
	if nc := p.chunks(); p.workers > nc {
		p.workers = max(1, nc)
	}
	return p
}

// chunks is the number of chunks.
func (p *pool) chunks() int { return (p.n + p.chunk - 1) / p.chunk }

// run calls fn(worker, c, lo, hi) for every chunk c = [lo, hi), worker being
// in [0, workers): per-worker scratch needs no lock.
func (p *pool) run(fn func(worker, chunk, lo, hi int)) {
	p.fn = fn
	p.next.Store(0)
	if p.workers == 1 {
		poolWork(p, 0)
		return
	}
	p.wg.Add(p.workers - 1)
	for w := 1; w < p.workers; w++ {
		if p.wake != nil {
			p.wake[w] <- struct{}{}
		} else {
			go poolWorker(p, w)
		}
	}
	poolWork(p, 0)
	p.wg.Wait()
}

func poolWorker(p *pool, w int) {
	poolWork(p, w)
	p.wg.Done()
}

// start keeps the workers waiting for run until stop.
func (p *pool) start() {
	if p.workers == 1 || p.wake != nil {
		return
	}
	p.wake = make([]chan struct{}, p.workers)
	for w := 1; w < p.workers; w++ {
		p.wake[w] = make(chan struct{})
		go func(w int, wake chan struct{}) {
			for range wake {
				poolWorker(p, w)
			}
		}(w, p.wake[w])
	}
}

// stop ends the workers of start.
func (p *pool) stop() {
	for _, c := range p.wake {
		if c != nil {
			close(c)
		}
	}
	p.wake = nil
}

func poolWork(p *pool, w int) {
	nc := int64(p.chunks())
	for {
		c := p.next.Add(1) - 1
		if c >= nc {
			return
		}
		lo := int(c) * p.chunk
		p.fn(w, int(c), lo, min(lo+p.chunk, p.n))
	}
}
