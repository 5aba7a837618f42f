package config

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"

	"github.com/anysched/anysched/internal/token"
	"github.com/anysched/anysched/internal/topology"
	"github.com/anysched/anysched/internal/yamlstrict"
)

// Alloc configures the live QoE allocation of a regional scheduler (the
// services with selection: qoe).
type Alloc struct {
	Period       time.Duration `yaml:"period"`        // between two solves of the region
	SessionTTL   time.Duration `yaml:"session_ttl"`   // a session not seen this long has ended
	SolveTimeout time.Duration `yaml:"solve_timeout"` // 0: period/2, at most 2s
	MaxSessions  int           `yaml:"max_sessions"`
	Viewers      `yaml:",inline"`
	// ArrivalReserve: share of each server's capacity the solve leaves for
	// STBs arriving before the next solve (0 to 0.5).
	ArrivalReserve float64 `yaml:"arrival_reserve"`
	// Rank is this scheduler's place in its city's route preference: 0
	// for the primary, 1 for the first standby, and so on. Without etcd,
	// the instance ranked before every other of the city plans on the
	// city's whole capacity (routers send the STBs to it alone). Default
	// -1: announce.bgp.as_path_prepend in bgp mode (a standby prepends),
	// else 0 (give it explicitly to a standby in ospf mode).
	Rank int `yaml:"rank"`
	// IdleAfter: a scheduler that received no STB of its city for this
	// long gives its capacity claims back but for the arrival reserve.
	// Default 0: 2 periods, at least 5 s.
	IdleAfter time.Duration `yaml:"idle_after"`
	// StateInterval: how often a scheduler taking its city's STBs
	// publishes its plan (sessions and where they were sent) in etcd for
	// whoever plans the city next (the center when the city falls, the
	// city when it returns); it also does when it goes idle and when it
	// stops. Default 0: max(period, 30s). Each publication costs about 30
	// bytes per session.
	StateInterval time.Duration `yaml:"state_interval"`
	// Model overrides the QoE model's parameters (docs/design.md, "The QoE model"; defaults
	// and their reasons in docs/design.md); a key left out keeps its default.
	Model Model `yaml:"model"`
}

// Viewers is how a scheduler reads the viewer tokens of QoE services: a
// city's scheduler (under alloc, with the allocation's keys) and the center
// (its alloc section has these keys only) apply the same rules.
type Viewers struct {
	Auth string `yaml:"auth"` // optional | required
	// Keys verify the viewer tokens (HS256 JWTs) the business platform signs.
	Keys           []TokenKey    `yaml:"keys"`
	Leeway         time.Duration `yaml:"leeway"` // clock skew allowed on exp/nbf/iat
	DefaultProfile Profile       `yaml:"default_profile"`
	// TokenIssuer and TokenAudience, when set, must match the token's iss
	// and (one of) its aud; without an audience a token carrying aud is
	// refused (RFC 7519 §4.1.3).
	TokenIssuer   string `yaml:"token_issuer"`
	TokenAudience string `yaml:"token_audience"`
	// MaxTokenLifetime bounds exp - iat (exp - now without iat), so a
	// leaked token is not good for years.
	MaxTokenLifetime time.Duration `yaml:"max_token_lifetime"`
	// RequireNetworkBinding refuses tokens without a cnet claim (the
	// client network the platform saw at login).
	RequireNetworkBinding bool `yaml:"require_network_binding"`
}

// DefaultViewers returns the token defaults.
func DefaultViewers() Viewers {
	return Viewers{Auth: "optional", Leeway: 30 * time.Second, DefaultProfile: Profile{DanmakuPerHour: 1}, MaxTokenLifetime: 24 * time.Hour}
}

// Model holds optional overrides of the QoE model's symbols. Units:
// seconds, kbps, transcoding compute units.
type Model struct {
	A               *float64 `yaml:"a"`                 // weight of the interaction experience
	B               *float64 `yaml:"b"`                 // weight of the video quality
	C               *float64 `yaml:"c"`                 // weight of the bitrate jitter
	D               *float64 `yaml:"d"`                 // weight of a server switch
	Theta           *float64 `yaml:"theta_s"`           // latency threshold
	Lambda          *float64 `yaml:"lambda"`            // room-mean scale of the interaction demand
	B1              *float64 `yaml:"b1"`                // video-quality scale
	K               *float64 `yaml:"k_per_kbps"`        // jitter per kbps of bitrate drop
	S               *float64 `yaml:"s"`                 // loss of one switch
	Omega           *float64 `yaml:"omega"`             // gift weight
	TIngest         *float64 `yaml:"ingest_s"`          // broadcaster uplink
	BackboneBase    *float64 `yaml:"backbone_base_s"`   // between edge sites: fixed part
	BackbonePerKm   *float64 `yaml:"backbone_s_per_km"` // between edge sites: per km
	BackboneOrigin  *float64 `yaml:"origin_s"`          // via the origin
	AccessBase      *float64 `yaml:"access_base_s"`     // server to STB: fixed part
	AccessPerKm     *float64 `yaml:"access_s_per_km"`   // server to STB: per km
	G               *float64 `yaml:"transcode_s_per_kbps"`
	H               *float64 `yaml:"transcode_units_per_kbps"`
	FallbackLatency *float64 `yaml:"fallback_latency_s"`
	// OriginCost is charged once per (server, channel) with a viewer: the
	// server pulls the channel from the origin once, so the plan groups a
	// channel's viewers where capacity allows. Default 0 (off).
	OriginCost *float64 `yaml:"origin_cost"`
}

// MaxModelValue bounds every QoE model override: far above any meaningful
// weight, latency or rate, low enough that the planner's products over a
// million sessions stay finite.
const MaxModelValue = 1e6

func (m Model) validate(errs *yamlstrict.Errors) {
	for _, f := range []struct {
		name     string
		v        *float64
		positive bool
	}{
		{"a", m.A, false}, {"b", m.B, false}, {"c", m.C, false}, {"d", m.D, false},
		{"theta_s", m.Theta, true}, {"lambda", m.Lambda, false}, {"b1", m.B1, true}, {"k_per_kbps", m.K, false},
		{"s", m.S, false}, {"omega", m.Omega, false}, {"ingest_s", m.TIngest, false},
		{"backbone_base_s", m.BackboneBase, false}, {"backbone_s_per_km", m.BackbonePerKm, false},
		{"origin_s", m.BackboneOrigin, false}, {"access_base_s", m.AccessBase, false},
		{"access_s_per_km", m.AccessPerKm, false}, {"transcode_s_per_kbps", m.G, false},
		{"transcode_units_per_kbps", m.H, false}, {"fallback_latency_s", m.FallbackLatency, false},
		{"origin_cost", m.OriginCost, false},
	} {
		switch {
		case f.v == nil:
		case math.IsNaN(*f.v) || math.IsInf(*f.v, 0) || *f.v < 0 || *f.v > MaxModelValue:
			errs.Add("alloc.model."+f.name, "%v is out of range [0, %g]", *f.v, MaxModelValue)
		case f.positive && *f.v == 0:
			errs.Add("alloc.model."+f.name, "must be > 0")
		}
	}
}

// TokenKey is one token signing key; the secret stays in its own file.
type TokenKey struct {
	ID         string `yaml:"id"`
	SecretFile string `yaml:"secret_file"`
}

// Profile is a viewer's profile for the allocation.
type Profile struct {
	DesiredKbps    float64 `yaml:"desired_kbps"` // 0: the top of the service's ladder
	DanmakuPerHour float64 `yaml:"danmaku_per_hour"`
	Gift           float64 `yaml:"gift"`
}

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
	return Alloc{
		Period: 10 * time.Second, SessionTTL: 2 * time.Minute, MaxSessions: 1_000_000,
		Viewers: DefaultViewers(), ArrivalReserve: 0.1, Rank: -1,
	}
}

// TokenKeys reads the configured keys' secrets.
func (a Viewers) TokenKeys() ([]token.Key, error) {
	var out []token.Key
	for i, k := range a.Keys {
		secret, err := token.ReadSecret(k.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("config: alloc.keys[%d].secret_file: %w", i, err)
		}
		out = append(out, token.Key{ID: k.ID, Secret: secret})
	}
	return out, nil
}

func (a Alloc) validate(errs *yamlstrict.Errors) {
	if a.Period < time.Second || a.Period > 10*time.Minute {
		errs.Add("alloc.period", "%s is out of range [1s, 10m]", a.Period)
	}
	if a.SessionTTL < a.Period {
		errs.Add("alloc.session_ttl", "%s must be at least alloc.period %s", a.SessionTTL, a.Period)
	}
	if a.SolveTimeout < 0 || (a.SolveTimeout > 0 && a.SolveTimeout >= a.Period) {
		errs.Add("alloc.solve_timeout", "%s must be >= 0 and below alloc.period %s", a.SolveTimeout, a.Period)
	}
	if a.MaxSessions < 1 {
		errs.Add("alloc.max_sessions", "must be >= 1")
	}
	a.Viewers.validate(errs)
	a.Model.validate(errs)
	if a.ArrivalReserve < 0 || a.ArrivalReserve > 0.5 {
		errs.Add("alloc.arrival_reserve", "%v is out of range [0, 0.5]", a.ArrivalReserve)
	}
	if a.Rank < -1 || a.Rank > 1000 {
		errs.Add("alloc.rank", "%d is out of range [0, 1000] (-1: from announce.bgp.as_path_prepend)", a.Rank)
	}
	if a.IdleAfter < 0 || (a.IdleAfter > 0 && a.IdleAfter < a.Period) {
		errs.Add("alloc.idle_after", "%s must be 0 (2 periods) or at least alloc.period %s", a.IdleAfter, a.Period)
	}
	if a.StateInterval < 0 || (a.StateInterval > 0 && a.StateInterval < a.Period) {
		errs.Add("alloc.state_interval", "%s must be 0 (max(period, 30s)) or at least alloc.period %s", a.StateInterval, a.Period)
	}
}

func (a Viewers) validate(errs *yamlstrict.Errors) {
	switch a.Auth {
	case "optional":
	case "required":
		if len(a.Keys) == 0 {
			errs.Add("alloc.keys", "at least one key is required with alloc.auth: required")
		}
	default:
		errs.Add("alloc.auth", "%q is not one of optional, required", a.Auth)
	}
	seen := map[string]bool{}
	for i, k := range a.Keys {
		p := fmt.Sprintf("alloc.keys[%d]", i)
		if k.ID == "" {
			errs.Add(p+".id", "required")
		} else if seen[k.ID] {
			errs.Add(p+".id", "duplicate key id %q", k.ID)
		}
		seen[k.ID] = true
		if k.SecretFile == "" {
			errs.Add(p+".secret_file", "required")
		} else if _, err := token.ReadSecret(k.SecretFile); err != nil {
			errs.Add(p+".secret_file", "%v", err)
		} else {
			privateFile(errs, p+".secret_file", k.SecretFile)
		}
	}
	if a.Leeway < 0 || a.Leeway > 5*time.Minute {
		errs.Add("alloc.leeway", "%s is out of range [0, 5m]", a.Leeway)
	}
	if a.MaxTokenLifetime < time.Minute || a.MaxTokenLifetime > 31*24*time.Hour {
		errs.Add("alloc.max_token_lifetime", "%s is out of range [1m, 744h]", a.MaxTokenLifetime)
	}
	for _, f := range []struct{ name, v string }{{"alloc.token_issuer", a.TokenIssuer}, {"alloc.token_audience", a.TokenAudience}} {
		if len(f.v) > 256 || strings.TrimSpace(f.v) != f.v || strings.ContainsFunc(f.v, unicode.IsControl) {
			errs.Add(f.name, "%q must be at most 256 bytes, without surrounding spaces or control characters", f.v)
		}
	}
	d := a.DefaultProfile
	if d.DesiredKbps < 0 || d.DesiredKbps > topology.MaxBitrateKbps {
		errs.Add("alloc.default_profile.desired_kbps", "%v is out of range [0, %d]", d.DesiredKbps, topology.MaxBitrateKbps)
	}
	if d.DanmakuPerHour < 0 || d.DanmakuPerHour > MaxModelValue {
		errs.Add("alloc.default_profile.danmaku_per_hour", "must be >= 0 and at most %g", MaxModelValue)
	}
	if d.Gift < 0 || d.Gift > MaxModelValue {
		errs.Add("alloc.default_profile.gift", "must be >= 0 and at most %g", MaxModelValue)
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
