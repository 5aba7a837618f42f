package topology

import (
	"fmt"
	"math"

	"github.com/anysched/anysched/internal/stb/geo"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// maxZoneWarnings caps the uncovered-zone warnings of one service: a
// province of 400 zones with a radius too small is one mistake, not 400.
const maxZoneWarnings = 20

// Warnings lists what is valid but likely wrong in a compiled topology; an
// apply goes through and shows them. Today: zones of a QoE service that no
// server of their region covers (coverage_radius_m around the server does
// not reach the zone's location), so the allocator can place none of their
// viewers in their own city and sends them all to a fallback region at the
// lowest rung. The test is the allocator's (internal/allocation/allocator coverage).
func Warnings(s *Snapshot) []string {
	var out []string
	for si, sv := range s.Services {
		if sv.Selection != SelectQoE {
			continue
		}
		n := 0
		for _, z := range s.Zones {
			if z.Region < 0 {
				continue
			}
			w := uncovered(s, int32(si), z)
			if w == "" {
				continue
			}
			if n++; n <= maxZoneWarnings {
				out = append(out, fmt.Sprintf("service %s: %s", sv.Name, w))
			}
		}
		if n > maxZoneWarnings {
			out = append(out, fmt.Sprintf("service %s: ... and %d more zones covered by no server of their region", sv.Name, n-maxZoneWarnings))
		}
	}
	return out
}

// uncovered describes how zone z is not covered by the servers of its
// region that service svc may use (its pool); "" when one covers it.
func uncovered(s *Snapshot, svc int32, z ZoneView) string {
	r := &s.Regions[z.Region]
	nearest, best := int32(-1), math.Inf(1)
	for _, si := range r.Servers {
		if !s.InPool(svc, si) {
			continue
		}
		sv := &s.Servers[si]
		d := geo.DistanceM(z.Loc.Lat, z.Loc.Lon, sv.Loc.Lat, sv.Loc.Lon)
		if sv.CoverageRadiusM <= 0 || d <= sv.CoverageRadiusM {
			return ""
		}
		if d < best {
			nearest, best = si, d
		}
	}
	if nearest < 0 {
		what := "servers"
		if p := s.Services[svc].Pool; p >= 0 {
			what = "servers of pool " + s.Pools[p].Name
		}
		return fmt.Sprintf("zone %s (region %s) is covered by no server of %s: the region has no %s", z.Name, r.Name, r.Name, what)
	}
	sv := &s.Servers[nearest]
	return fmt.Sprintf("zone %s (region %s) is covered by no server of %s: nearest is %s at %.1f km, coverage_radius_m %g",
		z.Name, r.Name, r.Name, sv.Name, best/1000, sv.CoverageRadiusM)
}

// Load decodes and compiles a document under l: every problem comes back
// at once, each with its field path and line. warnings are what Warnings
// finds in a valid document.
func (l Limits) Load(data []byte) (t *Topology, snap *Snapshot, warnings []string, err error) {
	t, err = Decode(data)
	if err != nil {
		return nil, nil, nil, err
	}
	snap, err = l.Compile(t, 0)
	if err != nil {
		if es, ok := yamlstrict.AsErrors(err); ok {
			locate(data, es)
		}
		return nil, nil, nil, err
	}
	return t, snap, Warnings(snap), nil
}

// locate gives errors their lines and names the entries in their paths.
func locate(data []byte, es yamlstrict.Errors) {
	yamlstrict.Locate(data, es, "name", func(n string) bool { return nameProblem(n) == "" })
}
