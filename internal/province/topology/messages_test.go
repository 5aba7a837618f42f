package topology_test

import (
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
)

// Errors name the object, keep the line, and suggest the
// nearest known name for an unknown reference.
func TestErrorsNameObjectsAndSuggest(t *testing.T) {
	for _, c := range []struct {
		name  string
		edits []edit
		want  string
	}{
		{"node region", []edit{{"- name: wuhu-1\n    region: wuhu\n", "- name: wuhu-1\n    region: wuhuu\n"}},
			`nodes[1] (wuhu-1).region: unknown region "wuhuu"; did you mean "wuhu"? (line 23)`},
		{"zone region", []edit{{"- name: wuhu-all\n    region: wuhu\n", "- name: wuhu-all\n    region: hefie\n"}},
			`zones[1] (wuhu-all).region: unknown region "hefie"; did you mean "hefei"? (line 34)`},
		{"fallback", []edit{{"fallback: [hefei]", "fallback: [hefe]"}},
			`regions[1] (wuhu).fallback[0]: unknown region "hefe"; did you mean "hefei"? (line 9)`},
		{"nothing near", []edit{{"fallback: [hefei]", "fallback: [tiancheng]"}},
			`regions[1] (wuhu).fallback[0]: unknown region "tiancheng" (line 9)`},
		{"default service", []edit{{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.0/26\n  default_service: lve"}},
			`anycast.default_service: unknown service "lve"; did you mean "live"? (line 4)`},
		{"server field", []edit{{"address: 10.2.1.10:8080", "address: 10.2.1.10"}},
			`nodes[1] (wuhu-1).servers[0] (wuhu-1-a).address: not host:port`},
		{"missing field gets its entry's line", []edit{{"        address: 10.2.1.10:8080\n", ""}},
			`nodes[1] (wuhu-1).servers[0] (wuhu-1-a).address: required (line 26)`},
		{"decode error", []edit{{"address: 10.2.1.10:8080", "adress: 10.2.1.10:8080"}},
			`nodes[1] (wuhu-1).servers[0] (wuhu-1-a).adress: unknown field (did you mean "address"?) (line 27)`},
		{"duplicate network names the zone", []edit{{"[100.68.0.0/16]", "[100.68.0.0/16, 100.64.1.0/24]"}},
			`zones[1] (wuhu-all).networks[1]: network 100.64.1.0/24 is already in zones[0] (hefei-north).networks[0] (line 35)`},
		// The later zone holds the wider network: the overlap is its problem,
		// not the unchanged zone's (it was reported on zones[0]).
		{"overlap on the later zone", []edit{{"[100.68.0.0/16]", "[100.68.0.0/16, 100.64.0.0/12]"}},
			`zones[1] (wuhu-all).networks[1]: 100.64.0.0/12 contains 100.64.1.0/24 of zone "hefei-north" (zones[0] (hefei-north).networks[0]) in region "hefei" (line 35)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := topology.Parse([]byte(apply(t, validDoc, c.edits...)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got:\n%v\nwant a line containing:\n%s", err, c.want)
			}
			if strings.Count(err.Error(), "\n") != 0 {
				t.Errorf("more than one problem:\n%v", err)
			}
		})
	}
}

// `weight: 0` used to mean 100 without a word; it is
// refused, saying what to do instead.
func TestWeightZeroRefused(t *testing.T) {
	_, err := topology.Parse([]byte(apply(t, validDoc, edit{"weight: 100", "weight: 0"})))
	want := "nodes[0] (hefei-1).servers[0] (hefei-1-a).weight: invalid value: weight 0 is not allowed: omit it for the default 100, or drain the server (schedctl drain) for no traffic (line 18)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	// Left out, it is the default.
	s := mustCompile(t, apply(t, validDoc, edit{"        weight: 100\n", ""}))
	if s.Servers[0].Weight != topology.DefaultWeight {
		t.Errorf("weight left out = %d, want %d", s.Servers[0].Weight, topology.DefaultWeight)
	}
}

// Zones of a QoE service that no server of their region
// covers are warned about, naming the nearest server.
func TestWarningsUncoveredQoEZones(t *testing.T) {
	// hefei-north is ~8.8 km from hefei-1-a (radius 300 m); wuhu-1-a states
	// no radius, so it covers its whole region.
	s := mustCompile(t, apply(t, validDoc, edit{"selection: nearest", "selection: qoe"}))
	w := topology.Warnings(s)
	want := "service live: zone hefei-north (region hefei) is covered by no server of hefei: nearest is hefei-1-a at 8.8 km, coverage_radius_m 300"
	if len(w) != 1 || w[0] != want {
		t.Errorf("warnings %q\nwant [%s]", w, want)
	}
	s = mustCompile(t, apply(t, validDoc, edit{"selection: nearest", "selection: qoe"}, edit{"coverage_radius_m: 300", "coverage_radius_m: 10000"}))
	if w := topology.Warnings(s); len(w) != 0 {
		t.Errorf("covered: warnings %q", w)
	}
	if w := topology.Warnings(mustCompile(t, validDoc)); len(w) != 0 {
		t.Errorf("nearest selection: warnings %q", w)
	}
}

func TestWithRevision(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"added before the first key", "# header\n\nanycast: {}\nregions: []\n", "# header\n\nrevision: 9\nanycast: {}\nregions: []\n"},
		{"replaced in place", "# header\nrevision: 3 # from get\nanycast: {}\n", "# header\nrevision: 9\nanycast: {}\n"},
		{"after a document marker", "---\n# c\nanycast: {}\n", "---\n# c\nrevision: 9\nanycast: {}\n"},
		{"no final newline", "anycast: {}", "revision: 9\nanycast: {}"},
		{"flow mapping", `{"anycast": {}}`, ""},
		{"revision over two lines", "revision:\n  3\nanycast: {}\n", ""},
		{"not a mapping", "- a\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := topology.WithRevision([]byte(c.in), 9)
			if ok != (c.want != "") || string(got) != c.want {
				t.Errorf("WithRevision(%q) = %q, %v; want %q", c.in, got, ok, c.want)
			}
		})
	}
}
