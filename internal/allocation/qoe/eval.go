package qoe

import "runtime"

// evaluator computes the Lagrangian subproblem, every user's best option at
// given prices, on every core. Its scratch is allocated once per solve, so
// an iteration allocates nothing. Results do not depend on the number of
// workers: loads are summed as integer counts per (server, rung) and the
// dual as one partial sum per fixed chunk, added in chunk order.
type evaluator struct {
	in    *Instance
	o     *options
	p     *pool
	cost  []float64 // per (server, use class): the option's priced use
	count [][]int32 // per worker, per (server, use class): users choosing it
	part  []float64 // per chunk: sum of the users' reduced values
	sel   []int32   // output of the current eval
	fn    func(w, c, lo, hi int)
	org   *originScratch // with an origin cost: the per-channel subproblems' scratch
}

// largeOptions: above this many options an instance is large: the dual
// reads float32 values and the primal step runs greedies only (primal).
const largeOptions = 1 << 20

// evalChunk is the number of users per chunk: small enough to balance two
// cores on a shared machine, large enough that a chunk's overhead is noise.
const evalChunk = 2048

// newEvaluator builds the evaluator, its workers waiting for eval until
// close.
func newEvaluator(in *Instance, o *options) *evaluator {
	n, ns, nu := len(in.Users), len(in.Servers), o.nu
	e := &evaluator{in: in, o: o, p: newPool(n, evalChunk, runtime.GOMAXPROCS(0)), cost: make([]float64, ns*nu)}
	e.fn = e.chunk64
	if o.val32 != nil {
		e.fn = e.chunk32
	}
	if o.org != nil {
		// the subproblem is per channel: chunks of whole channels
		e.p = newPool(len(o.org.groups)-1, 1, runtime.GOMAXPROCS(0))
		e.org = newOriginScratch(in, o, o.org)
		e.fn = e.chunkOrigin
	}
	e.count = make([][]int32, e.p.workers)
	for w := range e.count {
		e.count[w] = make([]int32, ns*nu)
	}
	e.part = make([]float64, e.p.chunks())
	e.p.start()
	return e
}

// close ends the evaluator's workers.
func (e *evaluator) close() { e.p.stop() }

// eval sets sel[v] to user v's best option at prices pb, pc (per kbps, per
// compute unit; -1 = fallback), the loads the choice puts on every server
// into useB and useC, and returns sum_v of the best reduced values (the
// dual value without the capacities' term). With an origin cost the choice
// and the value are the per-channel subproblems' (chunkOrigin).
func (e *evaluator) eval(pb, pc []float64, sel []int32, useB, useC []float64) float64 {
	in, o, nu := e.in, e.o, e.o.nu
	costAt(o, pb, pc, e.cost)
	for _, c := range e.count {
		clear(c)
	}
	e.sel = sel
	e.p.run(e.fn)
	dual := 0.0
	for _, x := range e.part {
		dual += x
	}
	for m := range in.Servers {
		useB[m], useC[m] = 0, 0
		for u := 0; u < nu; u++ {
			c := 0
			for _, cw := range e.count {
				c += int(cw[m*nu+u])
			}
			useB[m] += float64(c) * o.ubw[u]
			useC[m] += float64(c) * o.ucpu[u]
		}
	}
	return dual
}

// chunk64 and chunk32 evaluate the users [lo, hi) of chunk c (one of
// them is e.fn) over the option values in float64 or float32.
func (e *evaluator) chunk64(w, c, lo, hi int) { e.part[c] = bestOptions(e, e.o.val, w, lo, hi) }
func (e *evaluator) chunk32(w, c, lo, hi int) { e.part[c] = bestOptions(e, e.o.val32, w, lo, hi) }

// bestOptions picks each user's best option at the current costs (-1: the
// fallback is better), counts the picks per option in worker w's counts
// and returns the users' values summed. One body for both widths: the
// compiler makes one copy per width, so neither pays for the other.
func bestOptions[T float32 | float64](e *evaluator, val []T, w, lo, hi int) float64 {
	o, cost, cnt, sel := e.o, e.cost, e.count[w], e.sel
	start, cix := o.start, o.cix
	sum := 0.0
	for v := lo; v < hi; v++ {
		bv, bi := o.fb[v], int32(-1)
		a, b := start[v], start[v+1]
		for i := a; i < b; i++ {
			if rv := float64(val[i]) - cost[cix[i]]; rv > bv {
				bv, bi = rv, i
			}
		}
		sel[v] = bi
		sum += bv
		if bi >= 0 {
			cnt[cix[bi]]++
		}
	}
	return sum
}

// costAt sets cost[m*nu+u] to what use class u on server m costs at prices
// pb, pc (per kbps, per compute unit).
func costAt(o *options, pb, pc, cost []float64) {
	nu := o.nu
	for m := range pb {
		for u := 0; u < nu; u++ {
			cost[m*nu+u] = pb[m]*o.ubw[u] + pc[m]*o.ucpu[u]
		}
	}
}
