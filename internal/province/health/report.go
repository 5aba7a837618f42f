// Package health is edge-server health: agents probe servers and publish
// verdicts to etcd under a lease; schedulers merge the verdicts of every live
// agent, apply operator drains and a per-node panic threshold, and turn the
// result into the availability the routing engine uses (package avail).
package health

import (
	"time"

	"github.com/anysched/anysched/internal/province/health/avail"
)

// Report is one checker's current view of one server: what it publishes.
type Report struct {
	Server  string        `json:"server"`
	Checker string        `json:"checker"`
	Up      bool          `json:"up"`               // the verdict after rise/fall
	Reason  string        `json:"reason,omitempty"` // why down (or degraded)
	RTT     time.Duration `json:"rtt_ns"`           // smoothed probe round trip
	Loss    float64       `json:"loss"`             // failed share of the last probes, 0-1
	Load    avail.Load    `json:"load"`
	Since   time.Time     `json:"since"` // when the verdict last changed
	At      time.Time     `json:"at"`    // when this report was made
	// Format is the report's format version (ReportFormat; absent is 1).
	// A merger refuses a report of a later one: a newer checker's verdict
	// may mean what this build cannot tell.
	Format int `json:"format,omitempty"`
}

// ReportFormat is the format of the reports this build writes and the
// newest it reads (docs/design.md, "Compatibility across releases").
const ReportFormat = 1
