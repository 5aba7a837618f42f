package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/anysched/anysched/internal/allocation/allocator"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// Alloc configures the live QoE allocation of a regional scheduler (the
// services with selection: qoe): the allocator's own keys (period,
// session_ttl, solve_timeout, max_sessions, auth, default_profile,
// arrival_reserve, model, idle_after, state_interval; their defaults and
// checks are allocator.DefaultConfig and Config.Validate), the viewer
// tokens (token.Config: keys, leeway, token_issuer, token_audience,
// max_token_lifetime, require_network_binding), and the rank.
type Alloc struct {
	allocator.Config `yaml:",inline"`
	Viewers          `yaml:",inline"`
	// Rank is this scheduler's place in its city's route preference: 0
	// for the primary, 1 for the first standby, and so on. Without etcd,
	// the instance ranked before every other of the city plans on the
	// city's whole capacity (routers send the STBs to it alone). Default
	// -1: announce.bgp.as_path_prepend in bgp mode (a standby prepends),
	// else 0 (give it explicitly to a standby in ospf mode).
	Rank int `yaml:"rank"`
}

// Viewers is how a scheduler reads the viewer tokens of QoE services (the
// token package's keys, defaults and checks): a city's scheduler and the
// center apply the same rules (alloc.auth and alloc.default_profile are
// the allocator's).
type Viewers = token.Config

// CenterAlloc is a central scheduler's alloc section: the viewer tokens,
// and how it plans the QoE sessions of a city whose STBs reach it (its
// schedulers are gone): as the city would, with the same model and
// timings (rank is the center's: after every city scheduler).
type CenterAlloc struct {
	Alloc `yaml:",inline"`
	// PlanFallenCities: plan a fallen city's viewers from its last
	// published plan (default true); false: the viewers get their own
	// rung on the nearest server, unplanned.
	PlanFallenCities bool `yaml:"plan_fallen_cities"`
}

// DefaultCenterAlloc returns the center's allocation defaults.
func DefaultCenterAlloc() CenterAlloc {
	return CenterAlloc{Alloc: DefaultAlloc(), PlanFallenCities: true}
}

// DefaultAlloc returns the allocation defaults.
func DefaultAlloc() Alloc {
	return Alloc{Config: allocator.DefaultConfig(), Viewers: token.DefaultConfig(), Rank: -1}
}

func (a Alloc) validate(errs *yamlstrict.Errors) {
	if es, ok := yamlstrict.AsErrors(a.Config.Validate("alloc.")); ok {
		*errs = append(*errs, es...)
	}
	if a.Auth == allocator.AuthRequired && len(a.Keys) == 0 {
		errs.Add("alloc.keys", "at least one key is required with alloc.auth: required")
	}
	if es, ok := yamlstrict.AsErrors(a.Viewers.Validate("alloc.")); ok {
		*errs = append(*errs, es...)
	}
	// Token reads its secrets; config holds every key file the daemon
	// reads to one mode rule, here where the secret itself is good.
	for i, k := range a.Keys {
		p := fmt.Sprintf("alloc.keys[%d].secret_file", i)
		if !slices.ContainsFunc(*errs, func(e *yamlstrict.FieldError) bool { return e.Path == p }) {
			privateFile(errs, p, k.SecretFile)
		}
	}
	if a.Rank < -1 || a.Rank > 1000 {
		errs.Add("alloc.rank", "%d is out of range [0, 1000] (-1: from announce.bgp.as_path_prepend)", a.Rank)
	}
}

// validateStrip checks http.strip_query_params: names as they appear in a
// query, so that one written here matches what STBs send.
func (h HTTP) validateStrip(errs *yamlstrict.Errors) {
	for i, name := range h.StripQueryParams {
		ok := name != "" && len(name) <= 64
		for j := 0; j < len(name) && ok; j++ {
			c := name[j]
			ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0
		}
		if !ok {
			errs.Add(fmt.Sprintf("http.strip_query_params[%d]", i), "%q must be 1-64 letters, digits or -._~", name)
		}
	}
}
