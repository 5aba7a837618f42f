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
	// Up6 is the verdict on a dual-stack server's IPv6 address (Target.
	// Address6), with Reason6 why it is down; Up and Reason are then its
	// IPv4 address's, as they always were the server's address's. Absent
	// (a single-family server, or a checker before dual-stack): the IPv6
	// address is as Up says, which is what such a report meant. An added
	// field older readers ignore, not a new format: they read Up as their
	// writer meant it.
	Up6     *bool  `json:"up6,omitempty"`
	Reason6 string `json:"reason6,omitempty"`
	// Format is the report's format version (ReportFormat; absent is 1).
	// A merger refuses a report of a later one: a newer checker's verdict
	// may mean what this build cannot tell.
	Format int `json:"format,omitempty"`
}

// ReportFormat is the format of the reports this build writes and the
// newest it reads (docs/design.md, "Compatibility across releases").
const ReportFormat = 1

// up6 is r's verdict on the server's IPv6 address and why it is down: Up6
// when the checker gave one, else Up (see Report.Up6).
func (r *Report) up6() (bool, string) {
	if r.Up6 != nil {
		return *r.Up6, r.Reason6
	}
	return r.Up, r.Reason
}
