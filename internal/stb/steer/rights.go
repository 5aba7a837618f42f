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

// canBypass reports whether service svc has a bypass for req's protocol:
// a URL template for HTTP, a CNAME for DNS (a request without a path).
func (e *Engine) canBypass(svc int32, req *Request) bool {
	b := e.snap.Services[svc].Bypass
	if !e.hasOver[svc] || b == nil {
		return false
	}
	if req.Path == "" {
		return b.CNAME != ""
	}
	return b.Template != nil
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
func (e *Engine) Rule(d *Decision) *topology.RuleView { return e.snap.Rule(d.Service, d.Rule) }
