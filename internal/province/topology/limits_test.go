package topology_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
)

// TestCenterPrefixLimitConfigurable: the shortest center prefix is a
// province's setting; the defaults stay /16 and /48.
func TestCenterPrefixLimitConfigurable(t *testing.T) {
	doc := strings.Replace(validDoc, "center_prefix: 198.18.0.0/26", "center_prefix: 198.16.0.0/12", 1)
	top, err := topology.Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := topology.Validate(top); err == nil || !strings.Contains(err.Error(), "anycast.center_prefix: 198.16.0.0/12 is shorter than /16") {
		t.Fatalf("default limits: %v", err)
	}
	wide := topology.Limits{CenterPrefixMinBits4: 12, CenterPrefixMinBits6: 32}
	if _, err := wide.Compile(top, 1); err != nil {
		t.Fatalf("limit /12: %v", err)
	}
	narrow := topology.Limits{CenterPrefixMinBits4: 27}
	if err := narrow.Validate(mustDecode(t, validDoc)); err == nil || !strings.Contains(err.Error(), "shorter than /27") {
		t.Fatalf("limit /27 with a /26: %v", err)
	}
	// The announcer's last line follows the same limits.
	p, ip := netip.MustParsePrefix("198.16.0.0/12"), netip.MustParseAddr("198.18.0.1")
	if err := topology.CheckAnnounced(p, ip); err == nil {
		t.Fatal("CheckAnnounced took a /12 under the defaults")
	}
	if err := wide.CheckAnnounced(p, ip); err != nil {
		t.Fatalf("CheckAnnounced under /12: %v", err)
	}
	v6 := netip.MustParsePrefix("2001:db8::/32")
	if err := wide.CheckAnnounced(v6, netip.MustParseAddr("2001:db8::1")); err != nil {
		t.Fatalf("IPv6 /32 under a /32 limit: %v", err)
	}
	if err := (topology.Limits{}).CheckAnnounced(v6, netip.MustParseAddr("2001:db8::1")); err == nil {
		t.Fatal("zero Limits are not the defaults")
	}
}

func mustDecode(t *testing.T, doc string) *topology.Topology {
	t.Helper()
	top, err := topology.Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// TestNumericRanges: every number of a document is finite and bounded, and
// each one out of range is reported with its field path (bandwidth_mbps: 1e308 once made the planner fail with NaN every period).
func TestNumericRanges(t *testing.T) {
	for _, c := range []struct{ from, to, want string }{
		{"bandwidth_mbps: 10000", "bandwidth_mbps: 1e308", "nodes[0] (hefei-1).servers[0] (hefei-1-a).capacity.bandwidth_mbps: 1e+308 is out of range [0, 1e+07]"},
		{"bandwidth_mbps: 10000", "bandwidth_mbps: .inf", "nodes[0] (hefei-1).servers[0] (hefei-1-a).capacity.bandwidth_mbps: invalid value: .inf is not a finite number"},
		{"transcode_units: 400", "transcode_units: .nan", "nodes[0] (hefei-1).servers[0] (hefei-1-a).capacity.transcode_units: invalid value: .nan is not a finite number"},
		{"transcode_units: 400", "transcode_units: 1e300", "capacity.transcode_units: 1e+300 is out of range"},
		{"coverage_radius_m: 300", "coverage_radius_m: 1e300", "nodes[0] (hefei-1).servers[0] (hefei-1-a).coverage_radius_m: 1e+300 is out of range [0, 2e+07]"},
		{"coverage_radius_m: 300", "coverage_radius_m: -1", "coverage_radius_m: -1 is out of range"},
		{"weight: 100", "weight: 1e9", "nodes[0] (hefei-1).servers[0] (hefei-1-a).weight: invalid value: 1e9 is not a whole number"},
		{"weight: 100", "weight: 9999999999", "nodes[0] (hefei-1).servers[0] (hefei-1-a).weight: 9999999999 is out of range"},
		{"lat: 31.861", "lat: .nan", "nodes[0] (hefei-1).servers[0] (hefei-1-a).location.lat: invalid value: .nan is not a finite number"},
		{"lon: 117.281", "lon: -.inf", "nodes[0] (hefei-1).servers[0] (hefei-1-a).location.lon: invalid value: -.inf is not a finite number"},
		{"lat: 31.82", "lat: 91", "regions[0] (hefei).location.lat: 91 is out of range [-90, 90]"},
	} {
		doc := strings.Replace(validDoc, c.from, c.to, 1)
		if doc == validDoc {
			t.Fatalf("%q not in the document", c.from)
		}
		_, err := topology.Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.to, err, c.want)
		}
	}
}
