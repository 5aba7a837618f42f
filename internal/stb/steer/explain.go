package steer

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"

	"github.com/anysched/anysched/internal/province/topology"
)

// Candidate is one server the engine looked at, and why it was or was not taken.
type Candidate struct {
	Server     string  `json:"server"`
	Node       string  `json:"node"`
	Region     string  `json:"region"`
	Address    string  `json:"address"`
	DistanceKm float64 `json:"distance_km"`
	Weight     int     `json:"weight"` // the topology's
	// Effective is the weight the service's in-node policy uses now (the
	// balance policy's override, slow start, adaptive weights); Weight
	// for nearest and qoe, which weigh as the topology does.
	Effective float64 `json:"effective_weight"`
	Available bool    `json:"available"`
	Chosen    bool    `json:"chosen"`
	Why       string  `json:"why"`
}

// Explanation is a decision with the reasoning behind it, for operators.
// Unlike Decide it allocates freely; it is never on the STB path.
type Explanation struct {
	Decision  Decision          `json:"-"`
	Result    string            `json:"result"`
	Reason    string            `json:"reason,omitempty"`
	Names     Names             `json:"names"`
	ClientLoc topology.Location `json:"client_location"`
	Steps     []string          `json:"steps"`
	// Channel is where the request's channel and content key came from
	// (nil when the hostname belongs to no service).
	Channel *ChannelMatch `json:"channel,omitempty"`
	// Rule is the rights rule that matched ("2 (derby)"), if any.
	Rule string `json:"rule,omitempty"`
	// Family is the request's address family ("ipv4", "ipv6"; empty:
	// none asked), Address what the client is given and GivenFamily its
	// family (the other one under family_fallback other).
	Family      string      `json:"family,omitempty"`
	Address     string      `json:"address,omitempty"`
	GivenFamily string      `json:"given_family,omitempty"`
	Candidates  []Candidate `json:"candidates"`
}

// Explain decides req as Decide would now and says why, listing the servers
// of every region the decision considered. It leaves the balance policies'
// state as it found it.
func (e *Engine) Explain(req Request) Explanation {
	d := e.decide(req, true)
	x := Explanation{Decision: d, Result: d.Result.String(), Reason: d.Reason, Names: e.Names(&d)}
	s := e.snap
	if d.Service < 0 {
		x.Steps = append(x.Steps, fmt.Sprintf("hostname %q belongs to no service", req.Host))
		return x
	}
	x.Steps = append(x.Steps, fmt.Sprintf("hostname %q -> service %s", req.Host, s.Services[d.Service].Name))
	cm := e.ExplainChannel(d.Service, req.Path, req.Query)
	x.Channel = &cm
	x.Steps = append(x.Steps, cm.step())
	if st := s.Services[d.Service].Steering; st != nil {
		x.Steps = append(x.Steps, fmt.Sprintf("content steering on: a playing session asks again every %d s and is moved to this answer when it differs, "+
			"at most %d moves onto a server in any %.3g s per scheduler (deferred: asks again in %d s); at once if its server is down",
			st.TTL, st.MoveBurst, float64(st.MoveBurst)/st.MovesPerSecond, st.Retry))
	}
	switch {
	case d.Zone >= 0:
		x.ClientLoc = s.Zones[d.Zone].Loc
		x.Steps = append(x.Steps, fmt.Sprintf("client %s is in coverage zone %s of region %s", req.Client, s.Zones[d.Zone].Name, s.Regions[d.ClientRegion].Name))
	case d.Result == ResultGeo || (d.ClientRegion >= 0 && e.geoPlaced(req.Client)):
		l, _, _ := e.geoLocate(req.Client)
		x.ClientLoc = l
		x.Steps = append(x.Steps, fmt.Sprintf("client %s is in no coverage zone: GeoIP places it at %.4f,%.4f, nearest region %s", req.Client, l.Lat, l.Lon, s.Regions[d.ClientRegion].Name))
	case d.ClientRegion >= 0:
		x.ClientLoc = s.Regions[d.ClientRegion].Loc
		x.Steps = append(x.Steps, fmt.Sprintf("client %s is in no coverage zone: default region %s", req.Client, s.Regions[d.ClientRegion].Name))
	default:
		return x
	}
	if x.rights(e, &d, &req) {
		return x
	}
	pl := e.pool(d.Service, d.Family)
	if p := s.Services[d.Service].Pool; p >= 0 {
		x.Steps = append(x.Steps, fmt.Sprintf("service %s uses pool %s (labels %s): %d servers", s.Services[d.Service].Name, s.Pools[p].Name, poolLabels(s.Pools[p].Match), len(s.Pools[p].Servers)))
	}
	if d.Result == ResultBypass {
		x.Steps = append(x.Steps, "every node of the province that could serve the client is over the service's overflow thresholds: the service's bypass takes the client out of the province")
	}
	if d.Result == ResultOverflow {
		if d.Region == d.ClientRegion {
			x.Steps = append(x.Steps, "the nearest node is over the service's overflow thresholds: the next node took the client")
		} else {
			x.Steps = append(x.Steps, fmt.Sprintf("every node of region %s is over the service's overflow thresholds: the next region took the client", s.Regions[d.ClientRegion].Name))
		}
	}
	// Regions in the order the engine considers them.
	considered := []int32{d.ClientRegion}
	if d.Result == ResultFallback || d.Result == ResultError || d.Result == ResultBypass || (d.Result == ResultOverflow && d.Region != d.ClientRegion) {
		if d.Result == ResultBypass {
			for r := range s.Regions {
				if !slices.Contains(considered, int32(r)) {
					considered = append(considered, int32(r))
				}
			}
		} else if d.Result != ResultOverflow {
			x.Steps = append(x.Steps, fmt.Sprintf("region %s has no available server of the service", s.Regions[d.ClientRegion].Name))
		}
		for _, r := range s.Regions[d.ClientRegion].Fallback {
			if !slices.Contains(considered, r) {
				considered = append(considered, r)
			}
			if r == d.Region {
				break
			}
		}
		if d.Region >= 0 && !slices.Contains(considered, d.Region) {
			considered = append(considered, d.Region)
		}
	}
	policy := ""
	if d.Service >= 0 && e.selection[d.Service] == topology.SelectQoE {
		x.Steps = append(x.Steps, "selection qoe: the city's scheduler replaces server and bitrate with its QoE plan's (see its /debug/alloc); shown is the nearest answer it starts from")
	} else if d.Service >= 0 && e.selection[d.Service] != topology.SelectNearest && pl.balance != nil {
		policy = string(e.selection[d.Service])
	}
	scores := map[int32]string{}
	if d.Region >= 0 && policy != "" {
		x.Steps = append(x.Steps, fmt.Sprintf("in-node policy %s picked the server", policy))
		sel := e.selection[d.Service]
		var key uint64
		if sel == topology.SelectCHash {
			key = e.contentHash(d.Service, req.Path, req.Query)
		}
		bx := pl.balance.Explain(sel, d.Node, key, addrHash(req.Client))
		for _, n := range bx.Notes {
			x.Steps = append(x.Steps, policy+": "+n)
		}
		for _, c := range bx.Candidates {
			t := fmt.Sprintf("%s score %.4g, weight %.4g (effective %.4g)", policy, c.Score, c.Weight, c.Effective)
			if c.Note != "" {
				t += ", " + c.Note
			}
			scores[c.Server] = t
		}
	}
	x.Family = d.Family.String()
	if d.Region >= 0 {
		_, addr, given, _ := e.Addr(&d)
		x.Address, x.GivenFamily = addr, given.String()
		x.Steps = append(x.Steps, fmt.Sprintf("chose node %s in region %s, server %s (%s) at %d kbps", s.Nodes[d.Node].Name, s.Regions[d.Region].Name, s.Servers[d.Server].Name, addr, d.BitrateKbps))
		if d.Family != FamilyAny && given != d.Family {
			x.Steps = append(x.Steps, fmt.Sprintf("the client is %s but the server has no %s address up: family_fallback other gives its %s address", d.Family, d.Family, given))
		}
	}
	if d.Family != FamilyAny && s.Services[d.Service].FamilySkip {
		x.Steps = append(x.Steps, fmt.Sprintf("family_fallback skip: only servers with an %s address up are considered", d.Family))
	}
	weights := map[int32]map[int32]ServerWeight{} // by node, for policy
	for _, r := range considered {
		for _, si := range s.Regions[r].Servers {
			sv := &s.Servers[si]
			_, addr, _, _ := e.ServerAddr(si, d.Family)
			c := Candidate{
				Server: sv.Name, Node: s.Nodes[sv.Node].Name, Region: s.Regions[r].Name, Address: addr,
				DistanceKm: math.Round(dist(x.ClientLoc, sv.Loc)) / 1000, Weight: sv.Weight, Effective: e.weight[si], Available: pl.avail[si],
			}
			if policy != "" {
				ws, ok := weights[sv.Node]
				if !ok {
					ws = e.policyWeights(pl.balance, e.selection[d.Service], sv.Node)
					weights[sv.Node] = ws
				}
				if w, ok := ws[si]; ok {
					c.Effective = w.Effective
				}
			}
			switch {
			case si == d.Server && policy != "":
				c.Chosen, c.Why = true, "chosen by policy "+policy+" in the nearest node with an available server"
			case si == d.Server:
				c.Chosen, c.Why = true, "chosen: nearest available"
			case !s.InPool(d.Service, si):
				c.Why = "not in the service's pool"
			case e.avail[si] && !pl.avail[si]:
				c.Why = fmt.Sprintf("no %s address up (family_fallback skip)", d.Family)
			case !e.avail[si]:
				c.Why = "unavailable"
				if e.why != nil {
					if w := e.why(si); w != "" {
						c.Why = "unavailable: " + w
					}
				}
			case e.hasOver[d.Service] && e.over.Over(d.Service, sv.Node):
				c.Why = "its node is over the service's overflow thresholds: " + e.over.Reason(d.Service, sv.Node)
			case r != d.Region:
				c.Why = "region not used"
			case sv.Node != d.Node:
				c.Why = "its node is not the nearest with an available server"
			case !e.colocated[sv.Node] && dist(x.ClientLoc, sv.Loc) > dist(x.ClientLoc, s.Servers[d.Server].Loc)+tieM:
				c.Why = "farther than the chosen server"
			case policy != "":
				c.Why = "policy " + policy + " picked another server of the node"
			default:
				c.Why = "equally near: lost the weighted hash for this client"
			}
			if sc, ok := scores[si]; ok {
				c.Why += "; " + sc
			}
			x.Candidates = append(x.Candidates, c)
		}
	}
	slices.SortStableFunc(x.Candidates, func(a, b Candidate) int {
		if a.Chosen != b.Chosen {
			if a.Chosen {
				return -1
			}
			return 1
		}
		switch {
		case a.DistanceKm < b.DistanceKm:
			return -1
		case a.DistanceKm > b.DistanceKm:
			return 1
		}
		return 0
	})
	return x
}

// geoPlaced reports whether the GeoIP database places a as the engine
// would (a client in no zone).
func (e *Engine) geoPlaced(a netip.Addr) bool {
	if _, ok := e.snap.ZoneOf(a); ok {
		return false
	}
	_, _, ok := e.geoLocate(a)
	return ok
}

func poolLabels(m topology.Labels) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// rights adds the service's rights steps to x; true: the request is
// blacked out and nothing else was considered.
func (x *Explanation) rights(e *Engine, d *Decision, req *Request) bool {
	s := e.snap
	rt := &s.Services[d.Service].Rights
	if len(rt.Rules) == 0 {
		return false
	}
	r := e.Rule(d)
	if r == nil {
		x.Steps = append(x.Steps, fmt.Sprintf("rights: none of the service's %d rules matches: allowed", len(rt.Rules)))
		return false
	}
	x.Rule = r.Label
	if !r.Blackout {
		x.Steps = append(x.Steps, fmt.Sprintf("rights: rule %s matches first: allowed", r.Label))
		return false
	}
	to := "no slate"
	if r.Slate != nil {
		to = "slate " + string(e.AppendLocation(nil, d, req.Path, req.Query))
		for _, a := range []netip.Addr{r.Slate.A, r.Slate.AAAA} {
			if a.IsValid() {
				to += ", DNS " + a.String()
			}
		}
	}
	x.Steps = append(x.Steps, fmt.Sprintf("rights: rule %s matches first: blacked out, sent to %s", r.Label, to))
	return true
}
