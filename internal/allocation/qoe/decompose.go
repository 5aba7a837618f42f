package qoe

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
)

// Component is one connected component of an instance's coverage graph,
// the bipartite graph of users and servers with an edge where a server
// covers a user (Instance.Candidates): its users share no server with any
// other component's, so it can be solved apart. The users without a
// candidate (all on the fallback) form one part of their own, with no
// Servers.
type Component struct {
	Users   []int // ascending
	Servers []int // ascending; empty for the part without servers
}

// Components splits in by the connected components of its coverage graph
// (union-find over the candidate lists). Components with servers come in
// the order of their smallest user, then the part of the users without a
// candidate, if any. A server that covers no user is in no component.
func Components(in *Instance) []Component {
	cand := in.Candidates()
	ns := len(in.Servers)
	parent := make([]int32, ns)
	for m := range parent {
		parent[m] = int32(m)
	}
	find := func(x int32) int32 {
		for parent[x] != x {
			parent[x] = parent[parent[x]] // path halving
			x = parent[x]
		}
		return x
	}
	for _, c := range cand {
		if len(c) == 0 {
			continue
		}
		a := find(c[0])
		for _, m := range c[1:] {
			if b := find(m); b != a {
				// the smaller root wins, so that a stays a root
				if b < a {
					a, b = b, a
				}
				parent[b] = a
			}
		}
	}
	at := make([]int32, ns) // per root: its component + 1, 0 for none yet
	var out []Component
	var none []int
	for v, c := range cand {
		if len(c) == 0 {
			none = append(none, v)
			continue
		}
		r := find(c[0])
		if at[r] == 0 {
			out = append(out, Component{})
			at[r] = int32(len(out))
		}
		k := at[r] - 1
		out[k].Users = append(out[k].Users, v)
	}
	for m := range ns {
		// a server in no list is its own root, never given a component
		if k := at[find(int32(m))]; k > 0 {
			out[k-1].Servers = append(out[k-1].Servers, m)
		}
	}
	if len(none) > 0 {
		out = append(out, Component{Users: none})
	}
	return out
}

// Decomposed solves an instance part by part, one part per connected
// component of its coverage graph (Components), each with Solver, up to
// Workers parts at a time (default GOMAXPROCS), and merges the results.
// The parts share no capacity and, with an origin cost, no pull (a pull is
// per server and channel, and each server is in one part), so the merged
// plan is feasible, its objective is the sum of the parts', and the sum of
// the parts' bounds is an upper bound on the optimum. Each part has its
// own prices and steps: one whose prices converged stops while another
// goes on. With one part the instance goes to Solver as it is.
//
// When Solver is a Lagrangian, its TimeLimit counts from the start of
// Decomposed.Solve, as the context's deadline does, and its LocalSearch
// budget is shared among the parts in proportion to their users. Under a
// deadline a part that starts may use twice its share of the time left,
// in proportion to its users among those not yet started (times Workers,
// as that many run at once): when time runs short every part still gets
// some, and the time a part saves by converging goes to the later ones.
// A Planner cannot be the Solver: it keeps one sequence's state and is not
// safe for concurrent use.
type Decomposed struct {
	Solver  Solver
	Workers int
}

// Name implements Solver.
func (d Decomposed) Name() string {
	if d.Solver == nil {
		return "components"
	}
	return d.Solver.Name() + "+components"
}

// Solve implements Solver.
func (d Decomposed) Solve(ctx context.Context, in *Instance) (*Result, error) {
	if d.Solver == nil {
		return nil, errors.New("qoe: Decomposed has no Solver")
	}
	if _, ok := d.Solver.(*Planner); ok {
		return nil, errors.New("qoe: Decomposed cannot run a Planner per part: it keeps one sequence's state")
	}
	start := time.Now()
	// Validate first: the parts remap server indices, which must be in range.
	if err := in.Validate(); err != nil {
		return nil, err
	}
	parts := Components(in)
	if len(parts) <= 1 {
		return d.Solver.Solve(ctx, in)
	}
	if lim, ok := timeLimit(d.Solver); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, start.Add(lim))
		defer cancel()
	}
	deadline, timed := ctx.Deadline()
	left := 0 // users of the parts with servers not yet started
	for _, c := range parts {
		if len(c.Servers) > 0 {
			left += len(c.Users)
		}
	}
	var mu sync.Mutex
	workers := d.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(parts))
	// Largest parts first, so that the last to finish is a small one; the
	// results do not depend on the order.
	order := make([]int, len(parts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(parts[b].Users) - len(parts[a].Users) })
	results := make([]*Result, len(parts))
	errs := make([]error, len(parts))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx := make([]int32, len(in.Servers)) // local index + 1 per server, 0: not in the part
			for p := range next {
				c := parts[p]
				pctx, cancel := ctx, context.CancelFunc(func() {})
				if timed && len(c.Servers) > 0 {
					// Each part may use twice its share of the time left
					// (the parts' costs are not known in advance: a
					// part cut at exactly its share leaves time unused
					// when later ones converge early), all of it when at
					// most twice as many parts as workers are left: the
					// last to start must not find the budget spent, and
					// the time a part saves by converging goes to the
					// later ones.
					mu.Lock()
					share := min(1, 2*float64(workers*len(c.Users))/float64(left))
					left -= len(c.Users)
					mu.Unlock()
					now := time.Now()
					pctx, cancel = context.WithDeadline(ctx, now.Add(time.Duration(share*float64(deadline.Sub(now)))))
				}
				results[p], errs[p] = d.solvePart(pctx, in, c, idx)
				cancel()
			}
		}()
	}
	for _, p := range order {
		next <- p
	}
	close(next)
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("qoe: part %d (%d users, %d servers): %w", p, len(parts[p].Users), len(parts[p].Servers), err)
		}
	}
	return merge(in, parts, results), nil
}

// timeLimit is the inner solver's overall time limit, when it has one.
func timeLimit(s Solver) (time.Duration, bool) {
	switch l := s.(type) {
	case Lagrangian:
		return l.defaults().TimeLimit, true
	case *Lagrangian:
		if l != nil {
			return l.defaults().TimeLimit, true
		}
	}
	return 0, false
}

// part is l for a part of nu of n users: its share of the local-search
// budget. LocalSearch is a budget for the whole solve; each part given all
// of it would make the search n/nu times as long (20 towns, 20 times),
// for no better plan (measured in BenchmarkDecomposed).
func (l Lagrangian) part(nu, n int) Lagrangian {
	l = l.defaults()
	l.LocalSearch = max(1, time.Duration(float64(l.LocalSearch)*float64(nu)/float64(n)))
	return l
}

// solvePart solves one part: the users without a candidate directly (the
// fallback is their only option, so the plan is optimal and its value is
// the bound), any other with the inner solver on the part's instance.
func (d Decomposed) solvePart(ctx context.Context, in *Instance, c Component, idx []int32) (*Result, error) {
	if len(c.Servers) == 0 {
		res := &Result{Assign: make([]Choice, len(c.Users))}
		for i, v := range c.Users {
			res.Assign[i] = Choice{Server: Fallback, Rung: in.Params.FallbackRung}
			res.Objective += in.Value(v, Fallback, in.Params.FallbackRung)
		}
		res.Bound = res.Objective
		return res, nil
	}
	sub := partInstance(in, c, idx)
	solver := d.Solver
	switch l := solver.(type) {
	case Lagrangian:
		solver = l.part(len(c.Users), len(in.Users))
	case *Lagrangian:
		solver = l.part(len(c.Users), len(in.Users))
	}
	res, err := solver.Solve(ctx, sub)
	if err != nil {
		return nil, err
	}
	if len(res.Assign) != len(c.Users) || (res.Prices != nil && len(res.Prices) < len(c.Servers)) {
		return nil, fmt.Errorf("solver %s returned %d choices and %d prices for %d users and %d servers",
			d.Solver.Name(), len(res.Assign), len(res.Prices), len(c.Users), len(c.Servers))
	}
	for i, ch := range res.Assign {
		if ch.Server != Fallback && (ch.Server < 0 || ch.Server >= len(c.Servers)) {
			return nil, fmt.Errorf("solver %s put user %d on server %d, not one of the part's %d", d.Solver.Name(), c.Users[i], ch.Server, len(c.Servers))
		}
	}
	return res, nil
}

// partInstance is the instance of component c: its users and servers, in
// the order of in, with Params and Ladder copied. A user's ingest or
// previous server outside the part (the broadcaster's edge in another
// town, a user who moved between towns) is kept as an excluded server of
// no capacity after the part's own, so that the backbone latency and the
// switch loss stay as in in; it is no user's candidate. The candidate
// lists are in's, renumbered (computing them again would cost as much as
// the first time). idx is scratch of len(in.Servers) zeros, left zero.
func partInstance(in *Instance, c Component, idx []int32) *Instance {
	servers := make([]Server, 0, len(c.Servers))
	global := make([]int, 0, len(c.Servers))
	for _, m := range c.Servers {
		servers = append(servers, in.Servers[m])
		global = append(global, m)
		idx[m] = int32(len(servers))
	}
	local := func(m int) int {
		if m < 0 {
			return m
		}
		if idx[m] == 0 {
			s := &in.Servers[m]
			servers = append(servers, Server{Lat: s.Lat, Lon: s.Lon, Excluded: true})
			global = append(global, m)
			idx[m] = int32(len(servers))
		}
		return int(idx[m] - 1)
	}
	users := make([]User, len(c.Users))
	for i, v := range c.Users {
		u := in.Users[v]
		u.Ingest, u.PrevServer = local(u.Ingest), local(u.PrevServer)
		users[i] = u
	}
	sub := &Instance{Params: in.Params, Ladder: slices.Clone(in.Ladder), Servers: servers, Users: users}
	total := 0
	for _, v := range c.Users {
		total += len(in.cand[v])
	}
	slab := make([]int32, 0, total)
	cand := make([][]int32, len(users))
	dist := make([][]float64, len(users))
	ing := make([][]float64, len(users))
	for i, v := range c.Users {
		a := len(slab)
		for _, m := range in.cand[v] {
			// local indices grow with global ones: the lists stay sorted
			slab = append(slab, idx[m]-1)
		}
		cand[i] = slab[a:len(slab):len(slab)]
		dist[i], ing[i] = in.candDist[v], in.candIng[v]
	}
	cos := make([]float64, len(servers))
	for m, g := range global {
		cos[m] = in.srvCos[g]
		idx[g] = 0
	}
	sub.cand, sub.candDist, sub.candIng, sub.srvCos = cand, dist, ing, cos
	sub.candKey = candKey{nu: len(users), ns: len(servers), users: &users[0], servers: &servers[0]}
	return sub
}

// merge puts the parts' results together: choices and prices back on
// in's users and servers (a server in no part has zero prices), objective
// and bound summed, iterations the most any part ran.
func merge(in *Instance, parts []Component, results []*Result) *Result {
	out := &Result{Assign: make([]Choice, len(in.Users))}
	for p, c := range parts {
		res := results[p]
		for i, v := range c.Users {
			ch := res.Assign[i]
			if ch.Server != Fallback {
				ch.Server = c.Servers[ch.Server]
			}
			out.Assign[v] = ch
		}
		out.Objective += res.Objective
		out.Bound += res.Bound // NaN when a part has none
		out.Iter = max(out.Iter, res.Iter)
		if res.Prices != nil {
			if out.Prices == nil {
				out.Prices = make([]Price, len(in.Servers))
			}
			for i, m := range c.Servers {
				out.Prices[m] = res.Prices[i]
			}
		}
	}
	return out
}
