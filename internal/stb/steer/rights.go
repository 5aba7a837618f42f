package steer

import (
	"time"

	"github.com/anysched/anysched/internal/province/topology"
)

// rule is the first of the service's rights rules that matches d's client
// (placed already) and req's channel, or -1. A request without a path (a
// DNS query) names no channel: only rules for every channel apply to it.
func (e *Engine) rule(rt *topology.Rights, d *Decision, req *Request) int32 {
	channel := ""
	if req.Path != "" {
		channel = e.Channel(d.Service, req.Path, req.Query)
	}
	return rt.Match(d.ClientRegion, d.Zone, req.Client, channel, func() int64 {
		if req.Now.IsZero() {
			return time.Now().UnixNano()
		}
		return req.Now.UnixNano()
	})
}

// toBypass makes d a BYPASS: no server in the province, the service's
// bypass target instead.
func toBypass(d *Decision) {
	d.Result, d.Region, d.Node, d.Server = ResultBypass, -1, -1, -1
}

// anyAvail reports whether any server of the pool is available.
func anyAvail(pl *pool) bool {
	for _, n := range pl.regionAvail {
		if n > 0 {
			return true
		}
	}
	return false
}

// Rule returns the rights rule d matched, nil when none did.
func (e *Engine) Rule(d *Decision) *topology.RuleView {
	if d.Rule < 0 || d.Service < 0 {
		return nil
	}
	return &e.snap.Services[d.Service].Rights.Rules[d.Rule]
}
