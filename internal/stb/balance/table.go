package balance

import (
	"fmt"
	"time"
)

// NodeInput is one node's servers and their health figures.
type NodeInput struct {
	Servers []Server
	Loads   []Load // nil: all healthy, no figures
}

// TableInput is everything a Table is built from.
type TableInput struct {
	// Nodes by the caller's node index (steer: snapshot node index).
	Nodes []NodeInput
	// Use lists the selections the services use; only those are built.
	// SelectQoE builds the nearest policy it falls back to. Empty: all.
	Use    []Selection
	Config Config
	// Now is the build time (slow start); zero: time.Now().
	Now time.Time
}

// Table holds every node's policies for the selections in use. It is
// immutable once built (its policies' per-pick state aside, which is
// concurrency-safe): a Table is built whole off the hot path and published
// through Live, so a request sees either the old table or the new one, never
// half of either.
type Table struct {
	gen       uint64
	cfg       Config
	built     [numSelections]bool
	policies  [numSelections][]Policy // [selection][node]
	adapted   map[string]float64      // adaptive weights by server identity, for the next build
	rampUntil time.Time
}

// BuildTable builds a table. prev (the table in service, or nil) lends its
// per-pick state (swrr sequences and failure penalties, chash recent loads)
// and its adaptive weights, matched by server name, so a rebuild on every
// health change neither restarts sequences nor forgets load history.
func BuildTable(in TableInput, prev *Table) (*Table, error) {
	cfg := in.Config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	now := orNow(in.Now)
	t := &Table{cfg: cfg, adapted: make(map[string]float64)}
	if prev != nil {
		t.gen = prev.gen + 1
	}
	use := in.Use
	if len(use) == 0 {
		use = selections
	}
	for _, s := range use {
		i := s.Index()
		if i < 0 {
			return nil, fmt.Errorf("balance: unknown selection %q", s)
		}
		if s == SelectQoE {
			i = SelectNearest.Index()
		}
		if !t.built[i] {
			t.built[i] = true
			t.policies[i] = make([]Policy, len(in.Nodes))
		}
	}
	for n, node := range in.Nodes {
		if err := checkInput(node.Servers, node.Loads); err != nil {
			return nil, fmt.Errorf("balance: node %d: %w", n, err)
		}
		servers := node.Servers
		if len(cfg.Weights) > 0 {
			servers = append([]Server(nil), servers...)
			for i := range servers {
				if w, ok := cfg.Weights[servers[i].Name]; ok {
					servers[i].Weight = w
				}
			}
		}
		for i, s := range selections {
			if !t.built[i] {
				continue
			}
			p, err := t.build(s, servers, node.Loads, now, prev, int32(n))
			if err != nil {
				return nil, fmt.Errorf("balance: node %d: %w", n, err) // err names the policy
			}
			t.policies[i][n] = p
		}
	}
	return t, nil
}

// rampable is implemented by the policies slow start applies to.
type rampable interface{ RampingUntil() time.Time }

func (t *Table) build(s Selection, servers []Server, loads []Load, now time.Time, prev *Table, node int32) (Policy, error) {
	cfg := &t.cfg
	var p Policy
	var err error
	switch s {
	case SelectNearest:
		p, err = newNearest(servers, loads, NearestOptions{Panic: cfg.Panic, Now: now})
	case SelectSWRR:
		ws := servers
		if cfg.Adaptive.Enabled {
			ws = t.adapt(servers, loads, prev)
		}
		o := cfg.SWRR
		o.SlowStart, o.Panic, o.Now = cfg.SlowStart, cfg.Panic, now
		var sw *SWRR
		if sw, err = newSWRR(ws, loads, o); err == nil {
			if old, ok := prev.Policy(s, node).(*SWRR); ok {
				sw.Inherit(old)
			}
			p = sw
		}
	case SelectCHash:
		o := cfg.CHash
		o.SlowStart, o.Panic, o.Now = cfg.SlowStart, cfg.Panic, now
		old, _ := prev.Policy(s, node).(*CHash)
		var ch *CHash
		if ch, err = newCHash(servers, loads, o, old); err == nil {
			ch.Inherit(old)
			p = ch
		}
	case SelectP2C:
		o := cfg.P2C
		o.SlowStart, o.Panic, o.Now = cfg.SlowStart, cfg.Panic, now
		p, err = newP2C(servers, loads, o)
	}
	if err != nil {
		return nil, err
	}
	if r, ok := p.(rampable); ok && r.RampingUntil().After(t.rampUntil) {
		t.rampUntil = r.RampingUntil()
	}
	return p, nil
}

// adapt returns servers with adaptive weights, smoothed against prev's.
func (t *Table) adapt(servers []Server, loads []Load, prev *Table) []Server {
	var last []float64
	if prev != nil {
		last = make([]float64, len(servers))
		for i := range servers {
			last[i] = prev.adapted[identity(&servers[i])]
		}
	}
	w := AdaptiveWeights(servers, loads, last, t.cfg.Adaptive)
	out := append([]Server(nil), servers...)
	for i := range out {
		if w[i] > 0 {
			t.adapted[identity(&out[i])] = w[i]
			out[i].Weight = w[i]
		}
	}
	return out
}

// Generation counts the builds since the first table (0).
func (t *Table) Generation() uint64 { return t.gen }

// Config is the configuration the table was built with.
func (t *Table) Config() Config { return t.cfg }

// RampingUntil is when the last slow-starting server of any policy reaches
// full weight (zero: none): keep rebuilding, once a second say, until then.
func (t *Table) RampingUntil() time.Time { return t.rampUntil }

// Policy returns node's policy for selection s, or nil when the table has
// none (selection not in use, node out of range, nil table).
func (t *Table) Policy(s Selection, node int32) Policy {
	if t == nil {
		return nil
	}
	if s == SelectQoE {
		s = SelectNearest
	}
	i := s.Index()
	if i < 0 || node < 0 || int(node) >= len(t.policies[i]) {
		return nil
	}
	return t.policies[i][node]
}

// Pick is Policy(s, node).Pick, or -1 when there is no such policy.
func (t *Table) Pick(s Selection, node int32, keyHash, clientHash uint64) int32 {
	p := t.Policy(s, node)
	if p == nil {
		return -1
	}
	return p.Pick(keyHash, clientHash)
}

// Fail reports a failure of server in node to every policy that reacts to
// single failures (swrr).
func (t *Table) Fail(node, server int32) {
	for _, s := range selections {
		if f, ok := t.Policy(s, node).(Failer); ok {
			f.Fail(server)
		}
	}
}

// Explain is Policy(s, node).Explain, or an explanation saying there is no
// such policy.
func (t *Table) Explain(s Selection, node int32, keyHash, clientHash uint64) Explanation {
	p := t.Policy(s, node)
	if p == nil {
		return Explanation{Policy: string(s.OrDefault()), Pick: -1, Notes: []string{fmt.Sprintf("no %s policy for node %d in this table", s, node)}}
	}
	x := p.Explain(keyHash, clientHash)
	if s == SelectQoE {
		x.Notes = append([]string{"qoe: no allocation plan for this STB; nearest decides"}, x.Notes...)
	}
	return x
}
