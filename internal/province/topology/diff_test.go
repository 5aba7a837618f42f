package topology_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
)

// mustParse decodes and validates validDoc with edits applied.
func mustParse(t *testing.T, edits ...edit) *topology.Topology {
	t.Helper()
	doc := validDoc
	for _, e := range edits {
		if strings.Count(doc, e.old) != 1 {
			t.Fatalf("edit %q: occurs %d times", e.old, strings.Count(doc, e.old))
		}
		doc = strings.Replace(doc, e.old, e.new, 1)
	}
	top, err := topology.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("document does not validate: %v", err)
	}
	return top
}

// A third region with a node of two servers, so that removals can stay
// under the guard's share.
var thirdRegion = []edit{
	{"  - name: wuhu\n    location: {lat: 31.35, lon: 118.43}\n", "  - name: wuhu\n    location: {lat: 31.35, lon: 118.43}\n" +
		"  - name: anqing\n    location: {lat: 30.5, lon: 117.0}\n"},
	{"zones:\n", "  - name: anqing-1\n    region: anqing\n    location: {lat: 30.5, lon: 117.0}\n    servers:\n" +
		"      - name: anqing-1-a\n        address: 10.3.1.10:8080\n      - name: anqing-1-b\n        address: 10.3.1.11:8080\n" +
		"      - name: anqing-1-c\n        address: 10.3.1.12:8080\n      - name: anqing-1-d\n        address: 10.3.1.13:8080\nzones:\n"},
}

func TestDiff(t *testing.T) {
	base := mustParse(t)
	cases := []struct {
		name    string
		old     *topology.Topology
		new     *topology.Topology
		want    []topology.Section
		summary string
		emptied []string
	}{
		{name: "identical", old: base, new: mustParse(t), summary: "no change"},
		{
			name:    "capacity and weight changed",
			old:     base,
			new:     mustParse(t, edit{"bandwidth_mbps: 10000", "bandwidth_mbps: 20000"}, edit{"weight: 100\n", "weight: 50\n"}),
			want:    []topology.Section{{Kind: "servers", Changed: []topology.Change{{Name: "hefei-1-a", Fields: []string{"weight: 100 -> 50", "bandwidth_mbps: 10000 -> 20000"}}}}},
			summary: "1 server changed",
		},
		{
			// A weight of 0 means the default: writing it out changes nothing.
			name: "default weight written out", old: mustParse(t, edit{"        weight: 100\n", ""}), new: base, summary: "no change",
		},
		{
			name: "server moved, region fallback, settings",
			old:  base,
			new: mustParse(t,
				edit{"fallback: [hefei]", "fallback: []"},
				edit{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.0/24"},
				edit{"    servers:\n      - name: wuhu-1-a\n        address: 10.2.1.10:8080\n", "    servers:\n      - name: wuhu-1-a\n        address: 10.2.1.11:8080\n"}),
			want: []topology.Section{
				{Kind: "regions", Changed: []topology.Change{{Name: "wuhu", Fields: []string{"fallback: [hefei] -> []"}}}},
				{Kind: "servers", Changed: []topology.Change{{Name: "wuhu-1-a", Fields: []string{"address: 10.2.1.10:8080 -> 10.2.1.11:8080"}}}},
				{Kind: "settings", Changed: []topology.Change{{Name: "anycast.center_prefix", Fields: []string{"198.18.0.0/26 -> 198.18.0.0/24"}}}},
			},
			summary: "1 region changed, 1 server changed, 1 setting changed",
		},
		{
			name: "networks added, removed and moved",
			old:  base,
			new: mustParse(t,
				edit{"networks: [100.64.1.0/24]", "networks: [100.64.2.0/24, 100.64.3.0/24]"},
				edit{"networks: [100.68.0.0/16]", "networks: [100.68.0.0/16, 100.64.1.0/24]"}),
			want: []topology.Section{
				{Kind: "zones", Changed: []topology.Change{
					{Name: "hefei-north", Fields: []string{"networks: +2 -1"}},
					{Name: "wuhu-all", Fields: []string{"networks: +1 -0"}},
				}},
				{Kind: "networks", Added: []string{"100.64.2.0/24", "100.64.3.0/24"},
					Changed: []topology.Change{{Name: "100.64.1.0/24", Fields: []string{"zone: hefei-north -> wuhu-all"}}}},
			},
			summary: "2 zones changed, +2 networks, 1 network changed",
		},
		{
			name: "a node removed empties its region",
			old:  base,
			new: mustParse(t, edit{"  - name: wuhu-1\n    region: wuhu\n    location: {lat: 31.36, lon: 118.44}\n    servers:\n      - name: wuhu-1-a\n        address: 10.2.1.10:8080\n", ""},
				edit{"  - name: wuhu-all\n    region: wuhu\n    networks: [100.68.0.0/16]\n", "  - name: wuhu-all\n    region: wuhu\n    networks: [100.68.0.0/16]\n"}),
			want: []topology.Section{
				{Kind: "nodes", Removed: []string{"wuhu-1"}},
				{Kind: "servers", Removed: []string{"wuhu-1-a"}},
			},
			summary: "-1 node, -1 server",
			emptied: []string{"wuhu"},
		},
		{
			name: "from nothing",
			old:  nil,
			new:  base,
			want: []topology.Section{
				{Kind: "regions", Added: []string{"hefei", "wuhu"}},
				{Kind: "nodes", Added: []string{"hefei-1", "wuhu-1"}},
				{Kind: "servers", Added: []string{"hefei-1-a", "wuhu-1-a"}},
				{Kind: "zones", Added: []string{"hefei-north", "wuhu-all"}},
				{Kind: "networks", Added: []string{"100.64.1.0/24", "100.68.0.0/16"}},
				{Kind: "services", Added: []string{"live"}},
				{Kind: "settings", Changed: []topology.Change{
					{Name: "anycast.center_prefix", Fields: []string{"(none) -> 198.18.0.0/26"}},
					{Name: "anycast.service_ip", Fields: []string{"(none) -> 198.18.0.1"}},
				}},
			},
			summary: "+2 regions, +2 nodes, +2 servers, +2 zones, +2 networks, +1 service, 2 settings changed",
		},
		{
			name: "service changed",
			old:  base,
			new:  mustParse(t, edit{"bitrates_kbps: [730, 1100, 2000]", "bitrates_kbps: [730, 2000]"}, edit{"selection: nearest", "selection: swrr"}),
			want: []topology.Section{{Kind: "services", Changed: []topology.Change{{Name: "live", Fields: []string{
				"bitrates_kbps: [730, 1100, 2000] -> [730, 2000]", "selection: nearest -> swrr"}}}}},
			summary: "1 service changed",
		},
		{
			// Writing the default out changes nothing; skip does.
			name:    "family fallback",
			old:     mustParse(t, edit{"selection: nearest", "selection: nearest\n    family_fallback: other"}),
			new:     mustParse(t, edit{"selection: nearest", "selection: nearest\n    family_fallback: skip"}),
			want:    []topology.Section{{Kind: "services", Changed: []topology.Change{{Name: "live", Fields: []string{"family_fallback: other -> skip"}}}}},
			summary: "1 service changed",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := topology.Diff(c.old, c.new)
			if !reflect.DeepEqual(d.Sections, c.want) {
				t.Errorf("sections:\n got %+v\nwant %+v", d.Sections, c.want)
			}
			if got := d.Summary(); got != c.summary {
				t.Errorf("summary: got %q, want %q", got, c.summary)
			}
			if !reflect.DeepEqual(d.EmptiedRegions, c.emptied) {
				t.Errorf("emptied regions: got %v, want %v", d.EmptiedRegions, c.emptied)
			}
			// The same inputs give the same diff, whatever the map order.
			if again := topology.Diff(c.old, c.new); !reflect.DeepEqual(again, d) {
				t.Errorf("not deterministic:\n%+v\n%+v", d, again)
			}
		})
	}
}

func TestDiffDangers(t *testing.T) {
	base := mustParse(t, thirdRegion...) // 6 servers, 2 networks
	removeServer := edit{"      - name: anqing-1-d\n        address: 10.3.1.13:8080\n", ""}
	removeTwo := edit{"      - name: anqing-1-c\n        address: 10.3.1.12:8080\n      - name: anqing-1-d\n        address: 10.3.1.13:8080\n", ""}
	cases := []struct {
		name string
		new  *topology.Topology
		want []string
	}{
		{name: "one server of six is under 20%", new: mustParse(t, append(thirdRegion, removeServer)...)},
		{name: "two of six is over", new: mustParse(t, append(thirdRegion, removeTwo)...), want: []string{"removes 2 of 6 servers (33.3% > 20%)"}},
		{
			name: "a zone network of two",
			new:  mustParse(t, append(thirdRegion, edit{"networks: [100.64.1.0/24]", "networks: [100.64.9.0/24]"})...),
			want: []string{"removes 1 of 2 zone networks (50% > 20%)"},
		},
		{
			name: "the only node of a region",
			new:  mustParse(t, append(thirdRegion, edit{"  - name: wuhu-1\n    region: wuhu\n    location: {lat: 31.36, lon: 118.44}\n    servers:\n      - name: wuhu-1-a\n        address: 10.2.1.10:8080\n", ""})...),
			want: []string{"leaves 1 region with no server: wuhu"},
		},
		{
			name: "nodes: []",
			new: func() *topology.Topology {
				t := *base
				t.Nodes = nil
				return &t
			}(),
			want: []string{"removes every node (3)", "removes 6 of 6 servers (100% > 20%)", "leaves 3 regions with no server: anqing, hefei, wuhu"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := topology.Diff(base, c.new).Dangers(0.2)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %q\nwant %q", got, c.want)
			}
		})
	}
	// A first apply removes nothing.
	if got := topology.Diff(nil, base).Dangers(0.2); got != nil {
		t.Errorf("first apply: %q", got)
	}
}

// BenchmarkDiffProvinceScale: a dry run at province scale (10,000 servers,
// 100,000 networks) diffs two whole documents.
func BenchmarkDiffProvinceScale(b *testing.B) {
	a, c := topogen.ProvinceScale(nil), topogen.ProvinceScale(nil)
	c.Nodes = c.Nodes[1:]
	b.ReportAllocs()
	for b.Loop() {
		_ = topology.Diff(a, c).Dangers(0.2)
	}
}
