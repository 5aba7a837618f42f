package steer

import (
	"slices"
	"strings"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/balance"
)

// ServerWeight is a server's weight as an in-node policy uses it, when it
// differs from the topology's.
type ServerWeight struct {
	Server    int32   // snapshot index
	Topology  int     // the topology document's weight
	Effective float64 // what the policy weighs it with now
	// Why names the policy and what moved the weight: the balance
	// policy's weights override, and slow start, adaptive weights or
	// failures (the policy's own adjustments).
	Why string
}

// policyWeights is what selection sel's policy for node weighs each of its
// servers with, by snapshot index; nil when sel has no table here (nearest
// and qoe pick with the topology's weights).
func (e *Engine) policyWeights(t *balance.Table, sel topology.Selection, node int32) map[int32]ServerWeight {
	if t == nil || sel == topology.SelectNearest || sel == topology.SelectQoE {
		return nil
	}
	p := t.Policy(sel, node)
	if p == nil {
		return nil
	}
	cfg := t.Config()
	out := map[int32]ServerWeight{}
	for _, c := range p.Explain(0, 0).Candidates {
		sv := &e.snap.Servers[c.Server]
		w := ServerWeight{Server: c.Server, Topology: sv.Weight, Effective: c.Effective}
		var why []string
		if ov, ok := cfg.Weights[sv.Name]; ok && ov != float64(sv.Weight) {
			why = append(why, "balance weights override")
		}
		if c.Effective != c.Weight {
			why = append(why, "slow start, adaptive weights or failures")
		}
		if len(why) > 0 || c.Effective != float64(sv.Weight) {
			w.Why = string(sel) + ": " + strings.Join(why, "; ")
		}
		out[c.Server] = w
	}
	return out
}

// Weights lists every server whose weight in an in-node policy in use
// differs from its topology weight (one entry per policy that weighs it
// differently), in snapshot order. Services that select by nearest (or
// qoe) weigh servers as the topology does, and add nothing.
func (e *Engine) Weights() []ServerWeight {
	type use struct {
		t   *balance.Table
		sel topology.Selection
	}
	var used []use
	nearest := false
	for svc, sel := range e.selection {
		if sel == topology.SelectNearest || sel == topology.SelectQoE {
			nearest = true
			continue
		}
		u := use{e.pools[e.svcPool[FamilyAny][svc]].balance, sel}
		if u.t != nil && !slices.Contains(used, u) {
			used = append(used, u)
		}
	}
	var out []ServerWeight
	for n := range e.snap.Nodes {
		byPolicy := make([]map[int32]ServerWeight, len(used))
		for i, u := range used {
			byPolicy[i] = e.policyWeights(u.t, u.sel, int32(n))
		}
		for _, si := range e.snap.Nodes[n].Servers {
			if tw := e.snap.Servers[si].Weight; nearest && e.weight[si] != float64(tw) {
				out = append(out, ServerWeight{Server: si, Topology: tw, Effective: e.weight[si], Why: "nearest and qoe: slow start"})
			}
			for _, ws := range byPolicy {
				if w, ok := ws[si]; ok && w.Why != "" {
					out = append(out, w)
				}
			}
		}
	}
	return out
}
