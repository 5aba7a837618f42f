package qoe

import (
	"context"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/anysched/anysched/internal/stb/geo"
)

// greedy runs users in order; pick returns the chosen option among those
// that fit (or -1 for fallback).
func greedy(in *Instance, order []int, pick func(st *state, v int, fit []int32) int32) *Result {
	o := buildOptions(in)
	sel := make([]int32, len(in.Users))
	for i := range sel {
		sel[i] = -1
	}
	st := newState(in, o, sel)
	var fit []int32
	for _, v := range order {
		fit = fit[:0]
		for j := o.start[v]; j < o.start[v+1]; j++ {
			if st.fitsAfter(-1, j) {
				fit = append(fit, j)
			}
		}
		if len(fit) == 0 {
			continue
		}
		if j := pick(st, v, fit); j >= 0 {
			st.move(v, j)
		}
	}
	return &Result{Assign: o.toChoices(in, st.sel), Objective: st.objective(), Bound: math.NaN()}
}

func identity(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

// Nearest assigns each user (in input order) to the nearest covering server
// on which some bitrate fits, at the highest bitrate that fits.
type Nearest struct{}

func (Nearest) Name() string { return "nearest" }
func (Nearest) Solve(_ context.Context, in *Instance) (*Result, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	return greedy(in, identity(len(in.Users)), func(st *state, v int, fit []int32) int32 {
		u := &in.Users[v]
		best, bd := int32(-1), math.Inf(1)
		for _, j := range fit {
			s := &in.Servers[st.o.srv[j]]
			d := geo.DistanceM(u.Lat, u.Lon, s.Lat, s.Lon)
			if d < bd-1e-9 || (math.Abs(d-bd) <= 1e-9 && st.o.srv[j] == st.o.srv[best] && st.o.rung[j] > st.o.rung[best]) {
				best, bd = j, d
			}
		}
		return best
	}), nil
}

// Random assigns each user to a uniformly random covering server on which
// something fits, at the highest bitrate that fits there.
type Random struct{ Seed uint64 }

func (Random) Name() string { return "random" }
func (r Random) Solve(_ context.Context, in *Instance) (*Result, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(r.Seed, 0x5eed))
	return greedy(in, identity(len(in.Users)), func(st *state, v int, fit []int32) int32 {
		m := st.o.srv[fit[rng.IntN(len(fit))]]
		best := int32(-1)
		for _, j := range fit {
			if st.o.srv[j] == m && (best < 0 || st.o.rung[j] > st.o.rung[best]) {
				best = j
			}
		}
		return best
	}), nil
}

// LowestLatency picks, per user, the fitting (server, bitrate) with the
// lowest latency L(v,m,r).
type LowestLatency struct{}

func (LowestLatency) Name() string { return "lowest-latency" }
func (LowestLatency) Solve(_ context.Context, in *Instance) (*Result, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	return greedy(in, identity(len(in.Users)), func(st *state, v int, fit []int32) int32 {
		best, bl := int32(-1), math.Inf(1)
		for _, j := range fit {
			if l := in.Latency(v, int(st.o.srv[j]), int(st.o.rung[j])); l < bl {
				best, bl = j, l
			}
		}
		return best
	}), nil
}

// HighestBitrate gives each user the highest bitrate any covering server can
// still fit, on the server with the most bandwidth left.
type HighestBitrate struct{}

func (HighestBitrate) Name() string { return "highest-bitrate" }
func (HighestBitrate) Solve(_ context.Context, in *Instance) (*Result, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	return greedy(in, identity(len(in.Users)), func(st *state, v int, fit []int32) int32 {
		best := int32(-1)
		bestLeft := math.Inf(-1)
		for _, j := range fit {
			m := st.o.srv[j]
			left := st.bwCap[m] - st.bw[m]
			if best < 0 || st.o.rung[j] > st.o.rung[best] || (st.o.rung[j] == st.o.rung[best] && left > bestLeft) {
				best, bestLeft = j, left
			}
		}
		return best
	}), nil
}

// LaiGreedy follows the greedy of Lai et al. (ICSOC 2018, "Optimal edge
// user allocation"): maximise the number of allocated users while using as
// few servers as possible. Users with the fewest candidate servers go first;
// a user goes to an already-active server if one fits (the one with the
// most bandwidth left), otherwise it activates the covering server with the
// most bandwidth left. Each user asks for its desired bitrate (the highest
// rung <= Rhat) and, if that fits nowhere, the next lower rung.
type LaiGreedy struct{}

func (LaiGreedy) Name() string { return "lai-greedy" }
func (LaiGreedy) Solve(_ context.Context, in *Instance) (*Result, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	cand := in.Candidates()
	order := identity(len(in.Users))
	sort.SliceStable(order, func(a, b int) bool { return len(cand[order[a]]) < len(cand[order[b]]) })
	active := make([]bool, len(in.Servers))
	return greedy(in, order, func(st *state, v int, fit []int32) int32 {
		want := 0
		for k, r := range in.Ladder {
			if r <= in.Users[v].Profile.DesiredKbps {
				want = k
			}
		}
		for k := want; k >= 0; k-- {
			for _, act := range []bool{true, false} {
				best, bl := int32(-1), math.Inf(-1)
				for _, j := range fit {
					m := st.o.srv[j]
					if int(st.o.rung[j]) != k || active[m] != act {
						continue
					}
					if left := st.bwCap[m] - st.bw[m]; left > bl {
						best, bl = j, left
					}
				}
				if best >= 0 {
					active[st.o.srv[best]] = true
					return best
				}
			}
		}
		// only rungs above the desired one fit: take the lowest of them
		best := fit[0]
		for _, j := range fit {
			if st.o.rung[j] < st.o.rung[best] {
				best = j
			}
		}
		active[st.o.srv[best]] = true
		return best
	}), nil
}

// Baselines returns the baseline solvers.
func Baselines(seed uint64) []Solver {
	return []Solver{Nearest{}, Random{Seed: seed}, LowestLatency{}, HighestBitrate{}, LaiGreedy{}}
}
