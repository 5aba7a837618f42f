// Package overflow decides which edge nodes overflow for a delivery
// service: while a node's load is over one of the service's thresholds
// (services[].overflow), the routing engine sends the service's new STBs to
// the next node, then the next region.
//
// A node goes over when any figure with a threshold reaches it, and takes
// new STBs again only once every such figure is below Resume times its
// threshold. A figure the inputs do not give (no health data, the first
// evaluation without a rate) holds the node as it is: it can neither put
// it over nor bring it back, so a reload or a gap in the data does not send
// STBs back to a node that was shedding them. A figure that cannot apply
// (bandwidth shares on servers without a stated capacity) is left out.
package overflow

import (
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/prometheus/client_golang/prometheus"
)

// Inputs are the figures of one evaluation. Per-server slices are indexed
// by the snapshot's server index; any may be nil when unknown, and a value
// that is negative or NaN (or missing past the slice's end) is unknown for
// that server.
type Inputs struct {
	Snap *topology.Snapshot
	// BandwidthMbps is each server's current egress (from health).
	BandwidthMbps []float64
	// ClaimedKbps is the bandwidth all QoE planners of the province claim
	// on each server.
	ClaimedKbps []float64
	// Sessions is how many sessions the QoE plan keeps on each server.
	Sessions []int
	// Counters are the requests sent since the start; the controller keeps
	// the previous reading and divides the difference by the time between.
	Counters *Counters
	Now      time.Time
}

// Controller evaluates the overflow thresholds and publishes the result
// as an immutable State.
type Controller struct {
	log   *slog.Logger
	m     *metrics
	state atomic.Pointer[State]

	mu     sync.Mutex // one evaluation at a time
	snap   *topology.Snapshot
	pairs  []pair   // the (service, node) pairs evaluated
	over   []bool   // working copy of the published flags, service-major
	reason []string // likewise
	series []string // services with metric series, to drop them when gone

	// The previous counter reading, by pair.
	counters      *Counters
	misfit        *Counters // counters too small for the snapshot, warned about once
	read          bool
	readAt        time.Time
	reading, next []uint64
	rates         []float64
}

// pair is a service with overflow thresholds and a node holding some of
// its servers.
type pair struct {
	svc, node int32
	o         *topology.Overflow
	servers   []int32 // the service's servers in the node
}

// New returns a controller with no state yet (State returns nil until the
// first Evaluate). reg may be nil.
func New(reg prometheus.Registerer, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Controller{log: log, m: newMetrics(reg)}
}

// State returns the latest published state; nil before the first Evaluate
// (a nil *State answers Over with false).
func (c *Controller) State() *State { return c.state.Load() }

// Evaluate works out every node's figures, moves nodes over or back, and
// publishes a new State when a node did or the snapshot is another one
// (its indices differ). It reports whether it published.
func (c *Controller) Evaluate(in Inputs) (changed bool) {
	if in.Snap == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if in.Snap != c.snap {
		c.rebuild(in.Snap)
		changed = true
	}
	rates := c.readCounters(in)
	nn := len(in.Snap.Nodes)
	for i := range c.pairs {
		p := &c.pairs[i]
		rate := math.NaN()
		if rates != nil {
			rate = rates[i]
		}
		f := figuresOf(p, in, rate)
		k := int(p.svc)*nn + int(p.node)
		svcName, nodeName := in.Snap.Services[p.svc].Name, in.Snap.Nodes[p.node].Name
		if !c.over[k] {
			if why, ok := f.reaches(p.o); ok {
				c.over[k], c.reason[k] = true, why
				c.m.transitions.WithLabelValues(svcName, "over").Inc()
				c.log.Info("node over overflow threshold: new STBs go past it", "service", svcName, "node", nodeName, "reason", why)
				changed = true
			}
		} else if why, ok := f.below(p.o); ok {
			c.over[k], c.reason[k] = false, ""
			c.m.transitions.WithLabelValues(svcName, "back").Inc()
			c.log.Info("node back under overflow thresholds: takes new STBs again", "service", svcName, "node", nodeName, "reason", why)
			changed = true
		}
	}
	if changed {
		c.publish()
	}
	return changed
}

// rebuild lays the state out for a new snapshot, carrying each node's flag
// over by (service name, node name) so a reload keeps the hysteresis.
func (c *Controller) rebuild(snap *topology.Snapshot) {
	old, oldOver, oldReason := c.snap, c.over, c.reason
	nn := len(snap.Nodes)
	c.snap = snap
	c.pairs = c.pairs[:0]
	c.over = make([]bool, len(snap.Services)*nn)
	c.reason = make([]string, len(snap.Services)*nn)
	var named []string
	for si := range snap.Services {
		sv := &snap.Services[si]
		if sv.Overflow == nil {
			continue
		}
		named = append(named, sv.Name)
		osi, oldSvc := int32(-1), false
		if old != nil {
			osi, oldSvc = old.Service(sv.Name)
		}
		for ni := range snap.Nodes {
			var servers []int32
			for _, s := range snap.Nodes[ni].Servers {
				if snap.InPool(int32(si), s) {
					servers = append(servers, s)
				}
			}
			if len(servers) == 0 {
				continue
			}
			c.pairs = append(c.pairs, pair{svc: int32(si), node: int32(ni), o: sv.Overflow, servers: servers})
			if !oldSvc {
				continue
			}
			if oni, ok := old.Node(snap.Nodes[ni].Name); ok {
				from, to := int(osi)*len(old.Nodes)+int(oni), si*nn+ni
				c.over[to], c.reason[to] = oldOver[from], oldReason[from]
			}
		}
	}
	// A new layout: the previous counter reading is by the old pairs.
	c.read = false
	c.syncSeries(named)
}

// syncSeries gives each service with thresholds its series (at 0, so rates
// start from the first transition) and drops those of services gone.
func (c *Controller) syncSeries(names []string) {
	for _, old := range c.series {
		if !containsString(names, old) {
			c.m.nodes.DeleteLabelValues(old)
			c.m.transitions.DeleteLabelValues(old, "over")
			c.m.transitions.DeleteLabelValues(old, "back")
		}
	}
	for _, n := range names {
		c.m.transitions.WithLabelValues(n, "over")
		c.m.transitions.WithLabelValues(n, "back")
	}
	c.series = names
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// publish swaps in a copy of the working flags and updates the gauges.
func (c *Controller) publish() {
	nn := len(c.snap.Nodes)
	st := &State{snap: c.snap, nodes: int32(nn), over: append([]bool(nil), c.over...), reason: append([]string(nil), c.reason...)}
	c.state.Store(st)
	for si := range c.snap.Services {
		if c.snap.Services[si].Overflow != nil {
			c.m.nodes.WithLabelValues(c.snap.Services[si].Name).Set(float64(st.Count(int32(si))))
		}
	}
}

// readCounters takes a reading of every pair's counter and returns the
// request rates since the previous one (by pair), or nil when there is no
// previous reading to compare with.
func (c *Controller) readCounters(in Inputs) []float64 {
	cs := in.Counters
	ns, nn := cs.Size()
	if cs == nil || ns < len(in.Snap.Services) || nn < len(in.Snap.Nodes) {
		if cs != nil && cs != c.misfit {
			c.misfit = cs
			c.log.Warn("overflow counters are smaller than the snapshot: no request rates", "counter_services", ns, "counter_nodes", nn, "services", len(in.Snap.Services), "nodes", len(in.Snap.Nodes))
		}
		c.counters, c.read = nil, false
		return nil
	}
	if cs != c.counters {
		c.counters, c.read = cs, false
	}
	if c.read && !in.Now.After(c.readAt) {
		// No time has passed: keep the reading for the next evaluation.
		return nil
	}
	c.next = c.next[:0]
	for i := range c.pairs {
		c.next = append(c.next, cs.Load(c.pairs[i].svc, c.pairs[i].node))
	}
	var rates []float64
	if c.read {
		secs := in.Now.Sub(c.readAt).Seconds()
		c.rates = c.rates[:0]
		for i, n := range c.next {
			r := math.NaN()
			if prev := c.reading[i]; n >= prev {
				r = float64(n-prev) / secs
			}
			c.rates = append(c.rates, r)
		}
		rates = c.rates
	}
	c.reading, c.next = c.next, c.reading
	c.readAt, c.read = in.Now, true
	return rates
}

// The figures a threshold can be set on, in the order reasons list them.
const (
	figBandwidth = iota
	figClaims
	figSessions
	figRPS
	numFigures
)

// Whether a figure counts in an evaluation.
const (
	absent  = iota // no threshold, or it cannot apply to the node
	unknown        // the inputs do not give it: it holds the node as it is
	known
)

type figures struct {
	v      [numFigures]float64
	status [numFigures]uint8
}

func thresholds(o *topology.Overflow) [numFigures]float64 {
	return [numFigures]float64{o.BandwidthShare, o.ClaimsShare, float64(o.SessionsPerServer), o.RPSPerServer}
}

// figuresOf works out the node's figures over the service's servers in it;
// rate is the node's requests per second, NaN when unknown.
func figuresOf(p *pair, in Inputs, rate float64) figures {
	var f figures
	o := p.o
	if o.BandwidthShare > 0 {
		f.v[figBandwidth], f.status[figBandwidth] = share(in.Snap, p.servers, in.BandwidthMbps, 1)
	}
	if o.ClaimsShare > 0 {
		f.v[figClaims], f.status[figClaims] = share(in.Snap, p.servers, in.ClaimedKbps, 1.0/1000)
	}
	if o.SessionsPerServer > 0 {
		f.status[figSessions] = unknown
		sum, n := 0, 0
		for _, s := range p.servers {
			if int(s) < len(in.Sessions) && in.Sessions[s] >= 0 {
				sum += in.Sessions[s]
				n++
			}
		}
		if n > 0 {
			f.v[figSessions], f.status[figSessions] = float64(sum)/float64(n), known
		}
	}
	if o.RPSPerServer > 0 {
		f.status[figRPS] = unknown
		if !math.IsNaN(rate) {
			f.v[figRPS], f.status[figRPS] = rate/float64(len(p.servers)), known
		}
	}
	return f
}

// share is the part of the servers' bandwidth capacity that vals (scaled
// to Mbps) uses, over the servers with both a capacity and a value.
func share(snap *topology.Snapshot, servers []int32, vals []float64, scale float64) (float64, uint8) {
	var used, capacity float64
	stated := false
	for _, s := range servers {
		cp := snap.Servers[s].Capacity.BandwidthMbps
		if cp <= 0 {
			continue
		}
		stated = true
		if int(s) >= len(vals) {
			continue
		}
		if v := vals[s]; v >= 0 && !math.IsInf(v, 1) { // NaN fails v >= 0
			used += v * scale
			capacity += cp
		}
	}
	switch {
	case !stated:
		return 0, absent
	case capacity == 0:
		return 0, unknown
	}
	return used / capacity, known
}

// reaches reports whether a known figure reaches its threshold, and which.
func (f *figures) reaches(o *topology.Overflow) (string, bool) {
	thr := thresholds(o)
	var why []string
	for k := range numFigures {
		if f.status[k] == known && !lessThan(f.v[k], thr[k]) {
			why = append(why, describe(k, f.v[k], ">=", thr[k]))
		}
	}
	return strings.Join(why, ", "), len(why) > 0
}

// below reports whether every figure with a threshold is known and below
// Resume times it, and says so.
func (f *figures) below(o *topology.Overflow) (string, bool) {
	thr := thresholds(o)
	var why []string
	for k := range numFigures {
		switch f.status[k] {
		case unknown:
			return "", false
		case known:
			lim := o.Resume * thr[k]
			if !lessThan(f.v[k], lim) {
				return "", false
			}
			why = append(why, describe(k, f.v[k], "<", lim))
		}
	}
	if len(why) == 0 {
		return "no threshold applies any more", true
	}
	return strings.Join(why, ", "), true
}

// lessThan compares a figure with a limit to nine significant digits: sums
// of shares and Resume times a threshold carry rounding errors (0.8*0.9 is
// 0.7200000000000001), and 72% must count as at 72%.
func lessThan(v, lim float64) bool { return v < lim-math.Abs(lim)*1e-9 }

// describe renders one figure against a limit: "bandwidth 93% >= 90%",
// "rps 1,250/s per server >= 1,000".
func describe(k int, v float64, op string, lim float64) string {
	switch k {
	case figBandwidth:
		return "bandwidth " + num(v*100) + "% " + op + " " + num(lim*100) + "%"
	case figClaims:
		return "claims " + num(v*100) + "% " + op + " " + num(lim*100) + "%"
	case figSessions:
		return "sessions " + num(v) + " per server " + op + " " + num(lim)
	default:
		return "rps " + num(v) + "/s per server " + op + " " + num(lim)
	}
}

// num formats a figure for operators: whole and with thousands separators
// from 100 up, three significant digits below.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) >= 1e18 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	if math.Abs(v) < 100 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	n := int64(math.Round(v))
	sign := ""
	if n < 0 {
		sign, n = "-", -n
	}
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	b.WriteString(sign)
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}
