package qoe

import (
	"math"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// MaxParam bounds every model parameter and profile figure: far above any
// meaningful weight, latency or rate, low enough that the planner's
// products over a million sessions stay finite.
const MaxParam = 1e6

// Validate checks the parameters a configuration may set; path is where
// they sit in the file ("alloc.model."), so that each problem names its key.
func (p Params) Validate(path string) error {
	var errs yamlstrict.Errors
	for _, f := range []struct {
		name     string
		v        float64
		positive bool // a divisor or a log's scale
	}{
		{"a", p.A, false}, {"b", p.B, false}, {"c", p.C, false}, {"d", p.D, false},
		{"theta_s", p.Theta, true}, {"lambda", p.Lambda, false}, {"b1", p.B1, true}, {"k_per_kbps", p.K, false},
		{"s", p.S, false}, {"omega", p.Omega, false}, {"ingest_s", p.TIngest, false},
		{"backbone_base_s", p.BackboneBase, false}, {"backbone_s_per_km", p.BackbonePerKm, false},
		{"origin_s", p.BackboneOrigin, false}, {"access_base_s", p.AccessBase, false},
		{"access_s_per_km", p.AccessPerKm, false}, {"transcode_s_per_kbps", p.G, false},
		{"transcode_units_per_kbps", p.H, false}, {"fallback_latency_s", p.FallbackLatency, false},
		{"origin_cost", p.OriginCost, false},
	} {
		switch {
		case math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || f.v > MaxParam:
			errs.Add(path+f.name, "%v is out of range [0, %g]", f.v, MaxParam)
		case f.positive && f.v == 0:
			errs.Add(path+f.name, "must be > 0")
		}
	}
	return errs.Err()
}

// Validate checks a profile a configuration gives (a default viewer's);
// path is where it sits in the file, maxKbps the highest bitrate a
// province may list.
func (p Profile) Validate(path string, maxKbps int) error {
	var errs yamlstrict.Errors
	if p.DesiredKbps < 0 || p.DesiredKbps > float64(maxKbps) {
		errs.Add(path+"desired_kbps", "%v is out of range [0, %d]", p.DesiredKbps, maxKbps)
	}
	if p.Danmaku < 0 || p.Danmaku > MaxParam {
		errs.Add(path+"danmaku_per_hour", "must be >= 0 and at most %g", MaxParam)
	}
	if p.Gift < 0 || p.Gift > MaxParam {
		errs.Add(path+"gift", "must be >= 0 and at most %g", MaxParam)
	}
	return errs.Err()
}
