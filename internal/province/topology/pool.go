package topology

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
)

// PoolView is a set of servers a service selects: a named pool of the
// document, or a service's inline match (named after the service's path).
type PoolView struct {
	Name    string
	Match   Labels
	Servers []int32 // in snapshot order
	member  []bool  // by server
}

// Has reports whether server is in the pool.
func (p *PoolView) Has(server int32) bool { return p.member[server] }

// HealthPolicy is a server's probe expectations and load thresholds, its
// own fields over its pools' (the tightest threshold of the pools that set
// one; the first pool's status and body).
type HealthPolicy struct {
	ExpectStatus   int
	ExpectBody     *regexp.Regexp // nil: any body
	MaxCPU         float64
	MaxMemory      float64
	MaxConnections int
	MaxLoad        float64
}

// Zero reports whether the policy sets nothing (any 2xx, no thresholds).
func (h *HealthPolicy) Zero() bool {
	return h.ExpectStatus == 0 && h.ExpectBody == nil && h.MaxCPU == 0 && h.MaxMemory == 0 && h.MaxConnections == 0 && h.MaxLoad == 0
}

// ServesAll reports whether service svc may use every server.
func (s *Snapshot) ServesAll(svc int32) bool { return s.Services[svc].Pool < 0 }

// InPool reports whether service svc may send STBs to server.
func (s *Snapshot) InPool(svc, server int32) bool {
	p := s.Services[svc].Pool
	return p < 0 || s.Pools[p].member[server]
}

// DefaultOverflowResume is Overflow.Resume when the document gives none.
const DefaultOverflowResume = 0.8

// MaxAnswers bounds services[].answers: a DNS answer of this many A records
// with ECS still fits the 512-byte UDP minimum.
const MaxAnswers = 8

// labels checks a label set at path.
func (c *compiler) labels(path string, l Labels) {
	for _, k := range slices.Sorted(maps.Keys(l)) {
		if msg := nameProblem(k); msg != "" {
			c.add(path+"."+k, "label key: %s", msg)
		}
		if msg := nameProblem(l[k]); msg != "" {
			c.add(path+"."+k, "label value: %s", msg)
		}
	}
}

// serverLabels merges a node's labels with a server's own (the server's win).
func serverLabels(n *Node, s *Server) Labels {
	if len(n.Labels) == 0 {
		return s.Labels
	}
	if len(s.Labels) == 0 {
		return n.Labels
	}
	out := maps.Clone(n.Labels)
	maps.Copy(out, s.Labels)
	return out
}

// matches reports whether have includes every label of want.
func matches(have, want Labels) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// selectorKey identifies a match set, so services with the same one share
// a pool (and the engine's tables for it).
func selectorKey(m Labels) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(m[k])
		b.WriteByte(',')
	}
	return b.String()
}

// pools compiles the named pools and the servers' health policies; it runs
// after nodes.
func (c *compiler) pools() {
	s := c.s
	s.poolIdx = make(map[string]int32, len(c.t.Pools))
	s.poolBySelector = map[string]int32{}
	for i, p := range c.t.Pools {
		path := at("pools", i, p.Name)
		if c.name(path+".name", p.Name) {
			if j, dup := s.poolIdx[p.Name]; dup {
				c.add(path+".name", "duplicate pool %q (first at pools[%d])", p.Name, j)
			} else {
				s.poolIdx[p.Name] = int32(len(s.Pools))
			}
		}
		c.labels(path+".match", p.Match)
		pv := c.poolView(p.Name, p.Match)
		if len(pv.Servers) == 0 {
			c.add(path+".match", "matches no server (labels %s)", labelString(p.Match))
		}
		if h := p.Health; h != nil && h.URL != "" {
			c.add(path+".health.url", "a probe URL is per server; a pool sets only expectations and thresholds")
		}
		c.healthFields(path+".health", p.Health)
		if _, dup := s.poolBySelector[selectorKey(p.Match)]; !dup {
			s.poolBySelector[selectorKey(p.Match)] = int32(len(s.Pools))
		}
		s.Pools = append(s.Pools, pv)
	}
	// Effective health policies: the server's own fields, else the pools'.
	k := 0
	for ni := range c.t.Nodes {
		for si := range c.t.Nodes[ni].Servers {
			sv := &c.t.Nodes[ni].Servers[si]
			if k >= len(s.Servers) {
				return
			}
			view := &s.Servers[k]
			k++
			var pools []*HealthCheck
			for pi, p := range c.t.Pools {
				if p.Health != nil && pi < len(s.Pools) && s.Pools[pi].member[k-1] {
					pools = append(pools, p.Health)
				}
			}
			view.Health = resolveHealth(sv.Health, pools)
		}
	}
}

func (c *compiler) poolView(name string, match Labels) PoolView {
	pv := PoolView{Name: name, Match: match, member: make([]bool, len(c.s.Servers))}
	for i := range c.s.Servers {
		if matches(c.s.Servers[i].Labels, match) {
			pv.member[i] = true
			pv.Servers = append(pv.Servers, int32(i))
		}
	}
	return pv
}

func labelString(l Labels) string {
	if len(l) == 0 {
		return "{}"
	}
	k := selectorKey(l)
	return "{" + strings.TrimSuffix(k, ",") + "}"
}

// healthFields checks the expectations and thresholds of a health block.
func (c *compiler) healthFields(path string, h *HealthCheck) {
	if h == nil {
		return
	}
	if h.ExpectStatus != 0 && (h.ExpectStatus < 100 || h.ExpectStatus > 599) {
		c.add(path+".expect_status", "%d is not an HTTP status (100-599)", h.ExpectStatus)
	}
	if h.ExpectBody != "" {
		if len(h.ExpectBody) > 1024 {
			c.add(path+".expect_body", "longer than 1024 characters")
		} else if _, err := regexp.Compile(h.ExpectBody); err != nil {
			c.add(path+".expect_body", "not a regular expression: %v", err)
		}
	}
	c.share(path+".max_cpu", h.MaxCPU)
	c.share(path+".max_memory", h.MaxMemory)
	if h.MaxConnections < 0 {
		c.add(path+".max_connections", "%d is negative", h.MaxConnections)
	}
	c.upTo(path+".max_load", h.MaxLoad, 1e6)
}

// share checks a fraction in [0, 1].
func (c *compiler) share(path string, v float64) {
	if math.IsNaN(v) || v < 0 || v > 1 {
		c.add(path, "%v is out of range [0, 1]", v)
	}
}

// resolveHealth merges a server's health block over its pools'.
func resolveHealth(own *HealthCheck, pools []*HealthCheck) HealthPolicy {
	var out HealthPolicy
	tight := func(cur *float64, v float64) {
		if v > 0 && (*cur == 0 || v < *cur) {
			*cur = v
		}
	}
	for _, p := range pools {
		if out.ExpectStatus == 0 {
			out.ExpectStatus = p.ExpectStatus
		}
		if out.ExpectBody == nil && p.ExpectBody != "" {
			out.ExpectBody, _ = regexp.Compile(p.ExpectBody)
		}
		tight(&out.MaxCPU, p.MaxCPU)
		tight(&out.MaxMemory, p.MaxMemory)
		tight(&out.MaxLoad, p.MaxLoad)
		if p.MaxConnections > 0 && (out.MaxConnections == 0 || p.MaxConnections < out.MaxConnections) {
			out.MaxConnections = p.MaxConnections
		}
	}
	if own == nil {
		return out
	}
	if own.ExpectStatus != 0 {
		out.ExpectStatus = own.ExpectStatus
	}
	if own.ExpectBody != "" {
		out.ExpectBody, _ = regexp.Compile(own.ExpectBody)
	}
	if own.MaxCPU > 0 {
		out.MaxCPU = own.MaxCPU
	}
	if own.MaxMemory > 0 {
		out.MaxMemory = own.MaxMemory
	}
	if own.MaxLoad > 0 {
		out.MaxLoad = own.MaxLoad
	}
	if own.MaxConnections > 0 {
		out.MaxConnections = own.MaxConnections
	}
	return out
}

// servicePool resolves a service's pool or match (path p) to a pool index,
// -1 for every server.
func (c *compiler) servicePool(p string, i int, sv *Service) int32 {
	s := c.s
	switch {
	case sv.Pool != "" && len(sv.Match) > 0:
		c.add(p+".match", "give pool or match, not both")
		return -1
	case sv.Pool != "":
		pi, ok := s.poolIdx[sv.Pool]
		if !ok {
			names := make([]string, len(c.t.Pools))
			for j, pl := range c.t.Pools {
				names[j] = pl.Name
			}
			c.add(p+".pool", "unknown pool %q%s", sv.Pool, c.didYouMean(sv.Pool, names))
			return -1
		}
		return pi
	case len(sv.Match) > 0:
		c.labels(p+".match", sv.Match)
		if pi, ok := s.poolBySelector[selectorKey(sv.Match)]; ok {
			return pi
		}
		pv := c.poolView("", sv.Match)
		if len(pv.Servers) == 0 {
			c.add(p+".match", "matches no server (labels %s)", labelString(sv.Match))
			return -1
		}
		pv.Name = fmt.Sprintf("services[%d].match", i)
		s.poolBySelector[selectorKey(sv.Match)] = int32(len(s.Pools))
		s.Pools = append(s.Pools, pv)
		return int32(len(s.Pools) - 1)
	}
	return -1
}

// FamilyFallback is a service's policy for a client of an address family
// the chosen server has no address of (or none up).
type FamilyFallback string

// The family fallback policies.
const (
	// FamilyOther gives the chosen server's address of the other family:
	// a dual-stack STB reaches it either way, and the decision (nearest
	// node, balance, caches) stays the one every family gets.
	FamilyOther FamilyFallback = "other"
	// FamilySkip chooses among the servers with an address of the
	// client's family up, for single-stack clients.
	FamilySkip FamilyFallback = "skip"
)

// OrDefault is f, or FamilyOther when unset.
func (f FamilyFallback) OrDefault() FamilyFallback {
	if f == "" {
		return FamilyOther
	}
	return f
}

// serviceExtras checks answers and overflow of service sv at path p.
func (c *compiler) serviceExtras(p string, sv *Service, view *ServiceView) {
	view.Answers = 1
	switch {
	case sv.Answers < 0 || sv.Answers > MaxAnswers:
		c.add(p+".answers", "%d is out of range [1, %d]", sv.Answers, MaxAnswers)
	case sv.Answers > 0:
		view.Answers = sv.Answers
	}
	view.AlternatesHeader = sv.AlternatesHeader
	switch sv.FamilyFallback {
	case "", FamilyOther:
	case FamilySkip:
		view.FamilySkip = true
	default:
		c.add(p+".family_fallback", "unknown policy %q (want %s or %s)", sv.FamilyFallback, FamilyOther, FamilySkip)
	}
	if sv.AlternatesHeader && view.Answers < 2 {
		c.add(p+".alternates_header", "needs answers of 2 or more")
	}
	o := sv.Overflow
	if o == nil {
		return
	}
	op := p + ".overflow"
	c.share(op+".bandwidth_share", o.BandwidthShare)
	c.share(op+".claims_share", o.ClaimsShare)
	c.share(op+".resume", o.Resume)
	if o.SessionsPerServer < 0 {
		c.add(op+".sessions_per_server", "%d is negative", o.SessionsPerServer)
	}
	c.upTo(op+".rps_per_server", o.RPSPerServer, 1e9)
	if o.BandwidthShare == 0 && o.ClaimsShare == 0 && o.SessionsPerServer == 0 && o.RPSPerServer == 0 {
		c.add(op, "sets no threshold (bandwidth_share, claims_share, sessions_per_server or rps_per_server)")
	}
	if (o.ClaimsShare > 0 || o.SessionsPerServer > 0) && sv.Selection.OrDefault() != SelectQoE {
		c.add(op, "claims_share and sessions_per_server need selection qoe (they are the QoE planner's figures)")
	}
	ov := *o
	if ov.Resume == 0 {
		ov.Resume = DefaultOverflowResume
	}
	view.Overflow = &ov
}
