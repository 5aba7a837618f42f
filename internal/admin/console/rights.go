package console

import (
	"time"

	"github.com/anysched/anysched/internal/province/topology"
)

// serviceRules are one service's rights rules, from the topology document.
type serviceRules struct {
	Service string
	Rules   []topology.Rule
}

// RightsRule is one rights rule as the province page lists it.
type RightsRule struct {
	Service string `json:"service"`
	Index   int    `json:"index"`
	Rule    string `json:"rule"` // the rule on one line (as schedctl diff shows it)
	// Active: the rule applies now (within its window); a blackout that
	// is not active blacks nothing out.
	Active bool `json:"active"`
}

// rightsAt lists the rules of the topology last read, active or not at now.
func (con *Console) rightsAt(now time.Time) []RightsRule {
	con.regionsMu.Lock()
	defer con.regionsMu.Unlock()
	var out []RightsRule
	for _, sr := range con.rights {
		for i := range sr.Rules {
			r := &sr.Rules[i]
			out = append(out, RightsRule{Service: sr.Service, Index: i, Rule: r.String(), Active: r.ActiveAt(now)})
		}
	}
	return out
}
