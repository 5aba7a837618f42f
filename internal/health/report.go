// Package health is edge-server health: agents probe servers and publish
// verdicts to etcd under a lease; schedulers merge the verdicts of every live
// agent, apply operator drains and a per-node panic threshold, and turn the
// result into the availability the routing engine uses.
package health

import "time"

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

// Report is one checker's current view of one server: what it publishes.
type Report struct {
	Server  string        `json:"server"`
	Checker string        `json:"checker"`
	Up      bool          `json:"up"`               // the verdict after rise/fall
	Reason  string        `json:"reason,omitempty"` // why down (or degraded)
	RTT     time.Duration `json:"rtt_ns"`           // smoothed probe round trip
	Loss    float64       `json:"loss"`             // failed share of the last probes, 0-1
	Load    Load          `json:"load"`
	Since   time.Time     `json:"since"` // when the verdict last changed
	At      time.Time     `json:"at"`    // when this report was made
}
