package qoe

import "slices"

// The shared origin cost (Params.OriginCost = c > 0): a server pulls a
// channel from the origin once for all its viewers of that channel, so the
// objective is
//
//	F(x) = sum_v Y_v*QoE(v, x_v) - c * #{(m, h) : some viewer of channel h is on m}
//
// Its bound is in origin_bound.go, the primal heuristics that charge the
// pulls in origin_search.go.

// origin is the option table's view of the shared origin cost: the pairs
// (server, channel) that some option can pull, each option's pair, the
// users grouped by channel and, per user, its options grouped by server.
type origin struct {
	cost    float64
	pair    []int32 // per option: its pair; -1 for a user without a channel
	pairSrv []int32 // per pair: its server
	// units: one channel's users (pairs [unitPair[u], unitPair[u+1])), or
	// one user without a channel (no pairs): users ord[unitStart[u]:unitStart[u+1]]
	ord       []int32
	unitStart []int32
	unitPair  []int32
	groups    []int32 // the evaluator's chunks: units [groups[g], groups[g+1])
	// slots: a user's options on one server (contiguous: options are
	// sorted by server); user v's are [slotStart[v], slotStart[v+1]), slot
	// s's options [slotOpt[s], slotOpt[s+1])
	slotStart []int32
	slotOpt   []int32
	// per pair p, the slots of its channel's users on its server:
	// pairSlot[pairSlotStart[p]:pairSlotStart[p+1]], with slotUser their users
	pairSlotStart []int32
	pairSlot      []int32
	slotUser      []int32
}

// buildOrigin builds o's origin view (in.Params.OriginCost > 0).
func buildOrigin(in *Instance, o *options) *origin {
	n, total := len(in.Users), len(o.srv)
	g := &origin{cost: in.Params.OriginCost, pair: make([]int32, total)}
	// channels, densely numbered in ascending order of their values
	var chans []int32
	for v := range in.Users {
		if c := in.Users[v].Channel; c >= 0 {
			chans = append(chans, c)
		}
	}
	slices.Sort(chans)
	chans = slices.Compact(chans)
	first := make([]int32, len(chans)+1) // counting sort of the users by channel
	dense := make([]int32, n)
	nless := 0
	for v := range in.Users {
		dense[v] = -1
		if c := in.Users[v].Channel; c >= 0 {
			h, _ := slices.BinarySearch(chans, c)
			dense[v] = int32(h)
			first[h+1]++
		} else {
			nless++
		}
	}
	for h := range chans {
		first[h+1] += first[h]
	}
	g.ord = make([]int32, n)
	at := slices.Clone(first[:len(chans)])
	rest := int(first[len(chans)])
	for v := range in.Users {
		if h := dense[v]; h >= 0 {
			g.ord[at[h]] = int32(v)
			at[h]++
		} else {
			g.ord[rest] = int32(v)
			rest++
		}
	}
	nunits := len(chans) + nless
	g.unitStart = make([]int32, nunits+1)
	g.unitPair = make([]int32, nunits+1)
	copy(g.unitStart, first)
	for u := len(chans); u <= nunits; u++ {
		g.unitStart[u] = first[len(chans)] + int32(u-len(chans))
	}
	// pairs, channel by channel, in order of first appearance
	stamp := make([]int32, len(in.Servers)) // channel+1 that last saw the server
	pid := make([]int32, len(in.Servers))
	for h := range chans {
		g.unitPair[h] = int32(len(g.pairSrv))
		for _, v := range g.ord[first[h]:first[h+1]] {
			for i := o.start[v]; i < o.start[v+1]; i++ {
				m := o.srv[i]
				if stamp[m] != int32(h+1) {
					stamp[m], pid[m] = int32(h+1), int32(len(g.pairSrv))
					g.pairSrv = append(g.pairSrv, m)
				}
				g.pair[i] = pid[m]
			}
		}
	}
	for u := len(chans); u <= nunits; u++ {
		g.unitPair[u] = int32(len(g.pairSrv))
	}
	for _, v := range g.ord[first[len(chans)]:] {
		for i := o.start[v]; i < o.start[v+1]; i++ {
			g.pair[i] = -1
		}
	}
	// slots
	g.slotStart = make([]int32, n+1)
	for v := 0; v < n; v++ {
		g.slotStart[v] = int32(len(g.slotOpt))
		for i := o.start[v]; i < o.start[v+1]; i++ {
			if i == o.start[v] || o.srv[i] != o.srv[i-1] {
				g.slotOpt = append(g.slotOpt, i)
			}
		}
	}
	g.slotStart[n] = int32(len(g.slotOpt))
	g.slotOpt = append(g.slotOpt, int32(total))
	g.slotUser = make([]int32, len(g.slotOpt)-1)
	g.pairSlotStart = make([]int32, g.npairs()+1)
	for v := 0; v < n; v++ {
		for s := g.slotStart[v]; s < g.slotStart[v+1]; s++ {
			g.slotUser[s] = int32(v)
			if p := g.pair[g.slotOpt[s]]; p >= 0 {
				g.pairSlotStart[p+1]++
			}
		}
	}
	for p := 0; p < g.npairs(); p++ {
		g.pairSlotStart[p+1] += g.pairSlotStart[p]
	}
	g.pairSlot = make([]int32, g.pairSlotStart[g.npairs()])
	fill := slices.Clone(g.pairSlotStart[:g.npairs()])
	for s := range g.slotUser {
		if p := g.pair[g.slotOpt[s]]; p >= 0 {
			g.pairSlot[fill[p]] = int32(s)
			fill[p]++
		}
	}
	// chunks of about evalChunk users, whole units
	g.groups = append(g.groups, 0)
	for u, size := 0, int32(0); u < nunits; u++ {
		size += g.unitStart[u+1] - g.unitStart[u]
		if size >= evalChunk || u == nunits-1 {
			g.groups = append(g.groups, int32(u+1))
			size = 0
		}
	}
	return g
}

// npairs is the number of (server, channel) pairs.
func (g *origin) npairs() int { return len(g.pairSrv) }

// OriginPulls returns the origin pulls of an assignment: the number of
// distinct (server, channel) pairs with at least one viewer (users with a
// Channel >= 0 on a server; invalid choices are skipped), and the origin
// traffic in kbps. A pull streams the channel's source, the top rung R,
// whatever rungs its viewers get: the server transcodes down from R (the
// model's compute (R - r)*H), so kbps = pulls * R. It counts by Channel
// whatever Params.OriginCost is (with the zero value of Channel every user
// watches channel 0).
func OriginPulls(in *Instance, assign []Choice) (pulls int, kbps float64) {
	seen := make(map[[2]int64]struct{})
	for v, c := range assign {
		if v >= len(in.Users) || in.Users[v].Channel < 0 || c.Server < 0 || c.Server >= len(in.Servers) {
			continue
		}
		seen[[2]int64{int64(c.Server), int64(in.Users[v].Channel)}] = struct{}{}
	}
	pulls = len(seen)
	if len(in.Ladder) > 0 {
		kbps = float64(pulls) * in.Ladder[len(in.Ladder)-1]
	}
	return pulls, kbps
}
