package main

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/lab"
)

// allCities is the whole sample province, in the lab's order.
var allCities = lab.AllCities()

const (
	// checkInterval is the lab's embedded checkers' probe interval.
	checkInterval = time.Second
	// channels the viewers choose from (Zipf 1.1 popularity).
	channels = 200
	// topKbps is the live ladder's top rung, what a session wants.
	topKbps = 6000
	// unitsPerMbps: transcoding capacity in the QoE lab's proportion
	// (lab.QoEServerUnits per lab.QoEServerMbps).
	unitsPerMbps = float64(lab.QoEServerUnits) / lab.QoEServerMbps
)

// Settings are the run's parameters (kept in the results file).
type Settings struct {
	Sessions    int           `json:"sessions"`
	Cities      []CityPlan    `json:"cities"`
	Duration    time.Duration `json:"duration"`
	Sample      time.Duration `json:"sample"`
	Period      time.Duration `json:"alloc_period"`
	SessionTTL  time.Duration `json:"session_ttl"`
	Refresh     time.Duration `json:"refresh"`
	Zap         float64       `json:"zap"`
	StormEvery  time.Duration `json:"storm_every"`
	StormFirst  time.Duration `json:"storm_first"`
	StormShare  float64       `json:"storm_share"`
	StormWindow time.Duration `json:"storm_window"`
	Servers     int           `json:"servers"`
	Capacity    float64       `json:"capacity"`
	Standby     []string      `json:"standby"`
	Addrs       int           `json:"addrs"`
	KeepAlive   bool          `json:"keepalive"`
	Workers     int           `json:"workers"`
	EtcdMembers int           `json:"etcd_members"`
	// EtcdHistory: the center's etcd.housekeeping.max_history.
	EtcdHistory   time.Duration `json:"etcd_history,omitempty"`
	CheckInterval time.Duration `json:"check_interval"`
	Channels      int           `json:"channels"`
}

// CityPlan is one city's share of the run.
type CityPlan struct {
	City     string `json:"city"`
	Sessions int    `json:"sessions"`
	// Servers: live servers (the lab's two edges, and as many more
	// probed at the same edges' health URLs); ServerMbps each.
	Servers    int     `json:"servers"`
	ServerMbps float64 `json:"server_mbps"`
}

// splitCities shares the sessions and the live servers out over the
// cities by census population (topogen.AnhuiSplit), in the lab's city
// order, and sizes the servers: together a city's carry capacity x its
// sessions' demand at the top rung.
func splitCities(sessions, servers int, capacity float64) []CityPlan {
	byCity := map[string]int{}
	for _, c := range topogen.AnhuiSplit(sessions) {
		byCity[c.City] = c.N
	}
	// Every city has the lab's two live edges; the rest by population.
	srv := map[string]int{}
	for _, c := range topogen.AnhuiSplit(servers - lab.LiveServers*len(allCities)) {
		srv[c.City] = c.N + lab.LiveServers
	}
	out := make([]CityPlan, len(allCities))
	for i, c := range allCities {
		n, k := byCity[c], srv[c]
		mbps := math.Ceil(capacity * float64(n) * topKbps / 1000 / float64(k))
		out[i] = CityPlan{City: c, Sessions: n, Servers: k, ServerMbps: max(mbps, 1)}
	}
	return out
}

// amend gives the lab's topology the run's servers: each city's live
// servers get its capacity, and the city gets more live servers beside the
// lab's two edges, each probed at one of those edges' health URLs (so the
// checkers probe every one of them every second). Their own addresses
// (ports 8081 and up) serve nothing: the synthetic STBs stop at the
// redirect.
func (s Settings) amend(t *topology.Topology) {
	for ni := range t.Nodes {
		n := &t.Nodes[ni]
		ci := slices.Index(allCities, n.Region)
		if ci < 0 {
			continue
		}
		plan := s.Cities[ci]
		var live []int
		for si := range n.Servers {
			if n.Servers[si].Labels[topogen.FleetLabel] != topogen.FleetVOD { // live servers carry the node's label only
				live = append(live, si)
			}
		}
		if len(live) == 0 {
			continue
		}
		for _, si := range live {
			n.Servers[si].Capacity = topology.Capacity{BandwidthMbps: plan.ServerMbps, TranscodeUnits: math.Ceil(plan.ServerMbps * unitsPerMbps)}
		}
		for k := len(live); k < plan.Servers; k++ {
			src := n.Servers[live[k%len(live)]]
			sv := src
			sv.Name = fmt.Sprintf("%s-live-%d", n.Name, k+1)
			sv.Address = fmt.Sprintf("%s:%d", hostOf(src.Address), 8081+k)
			if src.Health != nil {
				h := *src.Health
				sv.Health = &h
			}
			sv.Labels = topology.Labels{}
			for lk, lv := range src.Labels {
				sv.Labels[lk] = lv
			}
			n.Servers = append(n.Servers, sv)
		}
	}
}

// hostOf is the host part of host:port.
func hostOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i]
		}
	}
	return addr
}
