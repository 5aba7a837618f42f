// Package avail is the merged health of a snapshot's servers as the routing
// engine reads it: plain data, computed by internal/province/health's Merger. It is
// apart from internal/province/health, which follows verdicts in etcd, so that the STB
// hot path (steer and the front ends) links no etcd client.
package avail

import "time"

// Availability is the merged state for one snapshot, indexed by server.
type Availability struct {
	// Figures: the latest report's load, RTT and loss per server (zero
	// without reports); Since: when its verdict last changed.
	Figures   []Figures
	Available []bool
	Why       []string // why a server is unavailable ("" when available)
	Healthy   []bool   // health alone, before drains and panic mode
	Drained   []bool
	Panic     []bool // by node: health ignored for it
	// FamilyDown[0] (IPv4) and [1] (IPv6), by server: the checkers found
	// the server's address of that family down while another of its
	// addresses works (a server with every address down is unavailable
	// instead). Nil: no address is down on its own.
	FamilyDown *[2][]bool
	// FamilyWhy says why, beside FamilyDown (nil with it).
	FamilyWhy *[2][]string
	Checkers  []CheckerInfo
}

// Figures are what checkers measured on one server.
type Figures struct {
	Load     Load
	RTT      time.Duration
	Loss     float64
	Since    time.Time
	Measured bool
}

// Load is what a probe learned about a server's load. Zero means not reported.
type Load struct {
	CPU           float64 `json:"cpu,omitempty"`            // 0-1 (JSON stats body)
	Memory        float64 `json:"memory,omitempty"`         // share of memory in use, 0-1 (JSON stats body)
	LoadAvg       float64 `json:"load_avg,omitempty"`       // load average, >= 0 (JSON stats body)
	BandwidthMbps float64 `json:"bandwidth_mbps,omitempty"` // current egress
	Connections   int     `json:"connections,omitempty"`    // active connections
	Requests      int64   `json:"requests,omitempty"`       // total requests served (nginx stub_status, JSON)
	// Errors is the total of failed requests (5xx) the edge reports (JSON
	// "errors"): with Requests, the edge's own failure rate, which passive
	// outlier detection counts.
	Errors int64 `json:"errors,omitempty"`
}

// CheckerInfo says a checker is alive (its key lives under its lease in
// etcd, internal/province/health).
type CheckerInfo struct {
	ID        string    `json:"id"`
	Region    string    `json:"region,omitempty"`
	Targets   int       `json:"targets"`
	StartedAt time.Time `json:"started_at"`
}
