package topology_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// validDoc is the smallest document that shows every entity; each bad case
// below breaks exactly one thing in it.
const validDoc = `anycast:
  service_ip: 198.18.0.1
  center_prefix: 198.18.0.0/26
regions:
  - name: hefei
    location: {lat: 31.82, lon: 117.23}
  - name: wuhu
    location: {lat: 31.35, lon: 118.43}
    fallback: [hefei]
nodes:
  - name: hefei-1
    region: hefei
    location: {lat: 31.86, lon: 117.28}
    servers:
      - name: hefei-1-a
        address: 10.1.1.10:8080
        health: {url: "http://10.1.1.10:8080/health"}
        weight: 100
        location: {lat: 31.861, lon: 117.281}
        coverage_radius_m: 300
        capacity: {bandwidth_mbps: 10000, transcode_units: 400}
  - name: wuhu-1
    region: wuhu
    location: {lat: 31.36, lon: 118.44}
    servers:
      - name: wuhu-1-a
        address: 10.2.1.10:8080
zones:
  - name: hefei-north
    region: hefei
    networks: [100.64.1.0/24]
    location: {lat: 31.90, lon: 117.20}
  - name: wuhu-all
    region: wuhu
    networks: [100.68.0.0/16]
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/{bitrate}/index.m3u8"
    bitrates_kbps: [730, 1100, 2000]
    selection: nearest
`

// edit is one textual change to validDoc: old must occur exactly once.
type edit struct{ old, new string }

func apply(t *testing.T, doc string, edits ...edit) string {
	t.Helper()
	for _, e := range edits {
		if n := strings.Count(doc, e.old); n != 1 {
			t.Fatalf("edit %q: found %d times in the document, want exactly once", e.old, n)
		}
		doc = strings.Replace(doc, e.old, e.new, 1)
	}
	return doc
}

// Reusable edits.
var (
	hefeiRegion = "  - name: hefei\n    location: {lat: 31.82, lon: 117.23}\n"
	wuhuRegion  = "  - name: wuhu\n    location: {lat: 31.35, lon: 118.43}\n    fallback: [hefei]\n"
	lastService = "    selection: nearest\n"
	lastZone    = "    networks: [100.68.0.0/16]\n"
)

func TestValidDocument(t *testing.T) {
	s := mustCompile(t, validDoc)
	want := topology.Counts{Regions: 2, Nodes: 2, Servers: 2, Zones: 2, Networks: 2, Services: 1}
	if got := s.Counts(); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
}

func mustCompile(t *testing.T, doc string) *topology.Snapshot {
	t.Helper()
	top, err := topology.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse:\n%v\ndocument:\n%s", err, doc)
	}
	s, err := topology.Compile(top, 7)
	if err != nil {
		t.Fatalf("Compile after Parse: %v", err)
	}
	return s
}

func TestBadDocuments(t *testing.T) {
	type tc struct {
		name  string
		doc   string // the whole document, when not an edit of validDoc
		edits []edit
		path  string // exact path of the expected error ("" = the document)
		msg   string // substring of its message
		count int    // how many errors in all; 0 means exactly 1
	}
	cases := []tc{
		// decoding: shape of the document
		{name: "unknown top-level key", edits: []edit{{lastService, lastService + "servcies: []\n"}}, path: "servcies", msg: "unknown field"},
		{name: "unknown nested key", edits: []edit{{"address: 10.1.1.10:8080", "adress: 10.1.1.10:8080"}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).adress", msg: "unknown field"},
		{name: "unknown key with suggestion", edits: []edit{{"service_ip:", "service-ip:"}}, path: "anycast.service-ip", msg: `unknown field (did you mean "service_ip"?)`},
		{name: "key given twice", edits: []edit{{"    region: hefei\n    networks", "    region: hefei\n    region: wuhu\n    networks"}}, path: "zones[0] (hefei-north).region", msg: "key given twice"},
		{name: "string for lat", edits: []edit{{"{lat: 31.82,", "{lat: north,"}}, path: "regions[0] (hefei).location.lat", msg: "invalid value"},
		{name: "quoted number for lat", edits: []edit{{"{lat: 31.82,", `{lat: "31.82",`}}, path: "regions[0] (hefei).location.lat", msg: "invalid value"},
		{name: "list for location", edits: []edit{{"location: {lat: 31.86, lon: 117.28}", "location: [31.86, 117.28]"}}, path: "nodes[0] (hefei-1).location", msg: "expected a mapping, found a list"},
		{name: "mapping for servers", edits: []edit{{"    servers:\n      - name: wuhu-1-a\n        address: 10.2.1.10:8080\n", "    servers: {name: wuhu-1-a}\n"}}, path: "nodes[1] (wuhu-1).servers", msg: "expected a list, found a mapping"},
		{name: "scalar for networks", edits: []edit{{"[100.68.0.0/16]", "100.68.0.0/16"}}, path: "zones[1] (wuhu-all).networks", msg: "expected a list"},
		{name: "list for name", edits: []edit{{"name: wuhu-all", "name: [wuhu-all]"}}, path: "zones[1].name", msg: "expected a single value, found a list"},
		{name: "string for weight", edits: []edit{{"weight: 100", "weight: heavy"}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).weight", msg: "invalid value"},
		{name: "weight overflows int", edits: []edit{{"weight: 100", "weight: 99999999999999999999"}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).weight", msg: "invalid value"},
		{name: "empty document", doc: "", path: "", msg: "document is empty"},
		{name: "comment-only document", doc: "# nothing here\n", path: "", msg: "document is empty"},
		{name: "two documents", doc: validDoc + "---\n" + validDoc, path: "", msg: "more than one YAML document"},
		{name: "alias", edits: []edit{{"location: {lat: 31.82, lon: 117.23}", "location: &hf {lat: 31.82, lon: 117.23}"}, {"location: {lat: 31.86, lon: 117.28}", "location: *hf"}}, path: "nodes[0] (hefei-1).location", msg: "YAML aliases are not allowed"},
		{name: "merge key", edits: []edit{{"location: {lat: 31.86, lon: 117.28}", "location: {<<: {lat: 1}, lon: 117.28}"}}, path: "nodes[0] (hefei-1).location.<<", msg: "unknown field"},
		{name: "not YAML", doc: "regions: [\n", path: "", msg: "not valid YAML"},
		{name: "list at top level", doc: "- a\n- b\n", path: "", msg: "expected a mapping, found a list"},

		// names
		{name: "duplicate region", edits: []edit{{wuhuRegion, wuhuRegion + "  - name: hefei\n    location: {lat: 1, lon: 1}\n"}}, path: "regions[2] (hefei).name", msg: `duplicate region "hefei" (first at regions[0])`},
		{name: "duplicate node", edits: []edit{{"- name: wuhu-1\n", "- name: hefei-1\n"}}, path: "nodes[1] (hefei-1).name", msg: `duplicate node "hefei-1" (first at nodes[0])`},
		{name: "duplicate server across nodes", edits: []edit{{"name: wuhu-1-a", "name: hefei-1-a"}}, path: "nodes[1] (wuhu-1).servers[0] (hefei-1-a).name", msg: `duplicate server "hefei-1-a" (first in node "hefei-1")`},
		{name: "duplicate server within a node", edits: []edit{{"      - name: wuhu-1-a\n        address: 10.2.1.10:8080\n", "      - name: wuhu-1-a\n        address: 10.2.1.10:8080\n      - name: wuhu-1-a\n        address: 10.2.1.11:8080\n"}}, path: "nodes[1] (wuhu-1).servers[1] (wuhu-1-a).name", msg: `duplicate server "wuhu-1-a"`},
		{name: "duplicate zone", edits: []edit{{"name: wuhu-all", "name: hefei-north"}}, path: "zones[1] (hefei-north).name", msg: `duplicate zone "hefei-north" (first at zones[0])`},
		{name: "duplicate service", edits: []edit{{lastService, lastService + "  - name: live\n    hostnames: [vod.iptv.example]\n    url_template: \"http://{server}/vod/{path}\"\n    bitrates_kbps: [1000]\n"}}, path: "services[1] (live).name", msg: `duplicate service "live" (first at services[0])`},
		{name: "uppercase name", edits: []edit{{"name: hefei-1-a", "name: Hefei-1-a"}}, path: "nodes[0] (hefei-1).servers[0].name", msg: "not a valid name"},
		{name: "name ending in dash", edits: []edit{{"name: wuhu-all", "name: wuhu-"}}, path: "zones[1].name", msg: "not a valid name"},
		{name: "missing name", edits: []edit{{"  - name: wuhu-1\n", "  - region: wuhu\n"}, {"    region: wuhu\n    location: {lat: 31.36", "    location: {lat: 31.36"}}, path: "nodes[1].name", msg: "required"},

		// references
		{name: "node in unknown region", edits: []edit{{"- name: wuhu-1\n    region: wuhu\n", "- name: wuhu-1\n    region: wuhan\n"}}, path: "nodes[1] (wuhu-1).region", msg: `unknown region "wuhan"`},
		{name: "zone in unknown region", edits: []edit{{"- name: wuhu-all\n    region: wuhu\n", "- name: wuhu-all\n    region: nowhere\n"}}, path: "zones[1] (wuhu-all).region", msg: `unknown region "nowhere"`},
		{name: "zone without region", edits: []edit{{"- name: wuhu-all\n    region: wuhu\n", "- name: wuhu-all\n"}}, path: "zones[1] (wuhu-all).region", msg: "required"},
		{name: "fallback to unknown region", edits: []edit{{"fallback: [hefei]", "fallback: [hefie]"}}, path: "regions[1] (wuhu).fallback[0]", msg: `unknown region "hefie"`},
		{name: "fallback to self", edits: []edit{{"fallback: [hefei]", "fallback: [wuhu]"}}, path: "regions[1] (wuhu).fallback[0]", msg: "cannot fall back to itself"},
		{name: "fallback listed twice", edits: []edit{{"fallback: [hefei]", "fallback: [hefei, hefei]"}}, path: "regions[1] (wuhu).fallback[1]", msg: `region "hefei" listed twice`},
		{name: "fallback 2-cycle", edits: []edit{{hefeiRegion, hefeiRegion + "    fallback: [wuhu]\n"}}, path: "regions[1] (wuhu).fallback", msg: "fallback cycle: hefei -> wuhu -> hefei"},
		{name: "fallback 3-cycle", edits: []edit{
			{hefeiRegion, hefeiRegion + "    fallback: [bengbu]\n"},
			{wuhuRegion, wuhuRegion + "  - name: bengbu\n    location: {lat: 32.92, lon: 117.39}\n    fallback: [wuhu]\n"},
		}, path: "regions[1] (wuhu).fallback", msg: "fallback cycle: hefei -> bengbu -> wuhu -> hefei"},

		// networks
		{name: "bad CIDR", edits: []edit{{"[100.64.1.0/24]", "[100.64.1.0/33]"}}, path: "zones[0] (hefei-north).networks[0]", msg: `not a CIDR prefix: "100.64.1.0/33"`},
		{name: "address without length", edits: []edit{{"[100.64.1.0/24]", "[100.64.1.0]"}}, path: "zones[0] (hefei-north).networks[0]", msg: "not a CIDR prefix"},
		{name: "non-canonical CIDR", edits: []edit{{"[100.64.1.0/24]", "[100.64.1.7/24]"}}, path: "zones[0] (hefei-north).networks[0]", msg: "host bits set: \"100.64.1.7/24\" (did you mean 100.64.1.0/24?)"},
		{name: "duplicate network in a zone", edits: []edit{{"[100.68.0.0/16]", "[100.68.0.0/16, 100.68.0.0/16]"}}, path: "zones[1] (wuhu-all).networks[1]", msg: "network 100.68.0.0/16 is already in zones[1] (wuhu-all).networks[0]"},
		{name: "duplicate network across zones", edits: []edit{{"[100.68.0.0/16]", "[100.68.0.0/16, 100.64.1.0/24]"}}, path: "zones[1] (wuhu-all).networks[1]", msg: "already in zones[0] (hefei-north).networks[0]"},
		{name: "nested network in another region", edits: []edit{{"[100.68.0.0/16]", "[100.68.0.0/16, 100.64.1.128/25]"}}, path: "zones[1] (wuhu-all).networks[1]", msg: `100.64.1.128/25 overlaps 100.64.1.0/24 of zone "hefei-north" (zones[0] (hefei-north).networks[0]) in region "hefei"`},
		{name: "covering network in another region", edits: []edit{{"[100.64.1.0/24]", "[100.64.1.0/24, 100.64.0.0/10]"}}, path: "zones[1] (wuhu-all).networks[0]", msg: `100.68.0.0/16 overlaps 100.64.0.0/10 of zone "hefei-north" (zones[0] (hefei-north).networks[1]) in region "hefei"`},
		{name: "zone without networks", edits: []edit{{"[100.68.0.0/16]", "[]"}}, path: "zones[1] (wuhu-all).networks", msg: "at least one network is required"},

		// servers
		{name: "address without port", edits: []edit{{"address: 10.1.1.10:8080", "address: 10.1.1.10"}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).address", msg: "not host:port"},
		{name: "hostname address", edits: []edit{{"address: 10.1.1.10:8080", "address: edge1.iptv.example:8080"}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).address", msg: "not host:port with an IP address"},
		{name: "port 0", edits: []edit{{"address: 10.1.1.10:8080", "address: 10.1.1.10:0"}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).address", msg: "non-zero port"},
		{name: "unspecified address", edits: []edit{{"address: 10.1.1.10:8080", "address: 0.0.0.0:8080"}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).address", msg: "not host:port"},
		{name: "missing address", edits: []edit{{"        address: 10.2.1.10:8080\n", ""}}, path: "nodes[1] (wuhu-1).servers[0] (wuhu-1-a).address", msg: "required"},
		{name: "duplicate address", edits: []edit{{"address: 10.2.1.10:8080", "address: 10.1.1.10:8080"}}, path: "nodes[1] (wuhu-1).servers[0] (wuhu-1-a).address", msg: "address 10.1.1.10:8080 is already used"},
		{name: "duplicate address v4-mapped", edits: []edit{{"address: 10.2.1.10:8080", `address: "[::ffff:10.1.1.10]:8080"`}}, path: "nodes[1] (wuhu-1).servers[0] (wuhu-1-a).address", msg: "already used"},
		{name: "address is the service IP", edits: []edit{{"address: 10.1.1.10:8080", "address: 198.18.0.1:8080"}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).address", msg: "is the anycast service address"},
		{name: "node without servers", edits: []edit{{"    servers:\n      - name: wuhu-1-a\n        address: 10.2.1.10:8080\n", "    servers: []\n"}}, path: "nodes[1] (wuhu-1).servers", msg: "at least one server is required"},
		{name: "negative weight", edits: []edit{{"weight: 100", "weight: -1"}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).weight", msg: "out of range"},
		{name: "health URL not http", edits: []edit{{`{url: "http://10.1.1.10:8080/health"}`, `{url: "ftp://10.1.1.10/health"}`}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).health.url", msg: "not an http(s) URL"},
		{name: "negative capacity", edits: []edit{{"bandwidth_mbps: 10000", "bandwidth_mbps: -1"}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).capacity.bandwidth_mbps", msg: "-1 is out of range [0, 1e+07]"},
		{name: "huge capacity", edits: []edit{{"bandwidth_mbps: 10000", "bandwidth_mbps: 1e308"}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).capacity.bandwidth_mbps", msg: "1e+308 is out of range [0, 1e+07]"},
		{name: "infinite radius", edits: []edit{{"coverage_radius_m: 300", "coverage_radius_m: .inf"}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).coverage_radius_m", msg: "finite"},

		// locations
		{name: "lat above 90", edits: []edit{{"{lat: 31.82,", "{lat: 91,"}}, path: "regions[0] (hefei).location.lat", msg: "91 is out of range [-90, 90]"},
		{name: "lon below -180", edits: []edit{{"lon: 118.43}", "lon: -181}"}}, path: "regions[1] (wuhu).location.lon", msg: "-181 is out of range [-180, 180]"},
		{name: "NaN lat on a node", edits: []edit{{"{lat: 31.86,", "{lat: .nan,"}}, path: "nodes[0] (hefei-1).location.lat", msg: "is not a finite number"},
		{name: "server lon out of range", edits: []edit{{"lon: 117.281}", "lon: 200}"}}, path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).location.lon", msg: "out of range"},
		{name: "zone lat out of range", edits: []edit{{"{lat: 31.90,", "{lat: -90.5,"}}, path: "zones[0] (hefei-north).location.lat", msg: "out of range"},
		{name: "region without location", edits: []edit{{"    location: {lat: 31.35, lon: 118.43}\n", ""}}, path: "regions[1] (wuhu).location", msg: "required"},
		{name: "null location", edits: []edit{{"location: {lat: 31.36, lon: 118.44}", "location: ~"}}, path: "nodes[1] (wuhu-1).location", msg: "required"},

		// anycast
		{name: "center prefix without the service IP", edits: []edit{{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.1.0/26"}}, path: "anycast.center_prefix", msg: "does not contain the service address 198.18.0.1"},
		{name: "center prefix with host bits", edits: []edit{{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.1/26"}}, path: "anycast.center_prefix", msg: "host bits set: \"198.18.0.1/26\" (did you mean 198.18.0.0/26?)"},
		{name: "center prefix is everything", edits: []edit{{"center_prefix: 198.18.0.0/26", "center_prefix: 0.0.0.0/0"}}, path: "anycast.center_prefix", msg: "shorter than /16"},
		{name: "center prefix too wide", edits: []edit{{"center_prefix: 198.18.0.0/26", "center_prefix: 198.0.0.0/8"}}, path: "anycast.center_prefix", msg: "shorter than /16"},
		{name: "service IP unspecified", edits: []edit{{"service_ip: 198.18.0.1", "service_ip: 0.0.0.0"}}, path: "anycast.service_ip", msg: "not a unicast host address"},
		{name: "service IP loopback", edits: []edit{{"service_ip: 198.18.0.1", "service_ip: 127.0.0.1"}}, path: "anycast.service_ip", msg: "not a unicast host address"},
		{name: "service IP multicast", edits: []edit{{"service_ip: 198.18.0.1", "service_ip: 224.0.0.5"}}, path: "anycast.service_ip", msg: "not a unicast host address"},
		{name: "service IP broadcast", edits: []edit{{"service_ip: 198.18.0.1", "service_ip: 255.255.255.255"}}, path: "anycast.service_ip", msg: "not a unicast host address"},
		{name: "service IP link-local", edits: []edit{{"service_ip: 198.18.0.1", "service_ip: 169.254.0.1"}}, path: "anycast.service_ip", msg: "not a unicast host address"},
		{name: "IPv6 prefix without address", edits: []edit{{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.0/26\n  center_prefix6: 2001:db8:ff::/48"}}, path: "anycast.center_prefix6", msg: "set without anycast.service_ip6"},
		{name: "IPv6 address without prefix", edits: []edit{{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.0/26\n  service_ip6: 2001:db8:ff::1"}}, path: "anycast.center_prefix6", msg: "required with anycast.service_ip6"},
		{name: "IPv4 in service_ip6", edits: []edit{{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.0/26\n  service_ip6: 198.18.0.2\n  center_prefix6: 2001:db8:ff::/48"}}, path: "anycast.service_ip6", msg: "not an IPv6 address"},
		{name: "IPv6 prefix outside", edits: []edit{{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.0/26\n  service_ip6: 2001:db8:ff::1\n  center_prefix6: 2001:db8:fe::/48"}}, path: "anycast.center_prefix6", msg: "does not contain the service address 2001:db8:ff::1"},
		{name: "IPv6 prefix too wide", edits: []edit{{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.0/26\n  service_ip6: 2001:db8:ff::1\n  center_prefix6: 2001::/16"}}, path: "anycast.center_prefix6", msg: "shorter than /48"},
		{name: "two IPv6 service addresses", edits: []edit{{"service_ip: 198.18.0.1\n  center_prefix: 198.18.0.0/26", "service_ip: 2001:db8:fe::1\n  center_prefix: 2001:db8:fe::/48\n  service_ip6: 2001:db8:ff::1\n  center_prefix6: 2001:db8:ff::/48"}}, path: "anycast.service_ip", msg: "dual-stack province writes its IPv4 service address here"},
		{name: "IPv4 in address6", edits: []edit{{"address: 10.2.1.10:8080", "address: 10.2.1.10:8080\n        address6: 10.2.1.11:8080"}}, path: "nodes[1] (wuhu-1).servers[0] (wuhu-1-a).address6", msg: "not an IPv6 address"},
		{name: "two IPv6 server addresses", edits: []edit{{"address: 10.2.1.10:8080", `address: "[2001:db8::10]:8080"` + "\n        address6: \"[2001:db8::11]:8080\""}}, path: "nodes[1] (wuhu-1).servers[0] (wuhu-1-a).address", msg: "dual-stack server writes its IPv4 address here"},
		{name: "address6 is the IPv6 service address", edits: []edit{{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.0/26\n  service_ip6: 2001:db8:ff::1\n  center_prefix6: 2001:db8:ff::/48"}, {"address: 10.2.1.10:8080", "address: 10.2.1.10:8080\n        address6: \"[2001:db8:ff::1]:80\""}}, path: "nodes[1] (wuhu-1).servers[0] (wuhu-1-a).address6", msg: "anycast service address"},
		{name: "address6 used twice", edits: []edit{{"address: 10.2.1.10:8080", "address: 10.2.1.10:8080\n        address6: \"[2001:db8::10]:8080\""}, {"address: 10.1.1.10:8080", "address: 10.1.1.10:8080\n        address6: \"[2001:db8::10]:8080\""}}, path: "nodes[1] (wuhu-1).servers[0] (wuhu-1-a).address6", msg: "already used at nodes[0] (hefei-1).servers[0] (hefei-1-a).address6"},
		{name: "center prefix is a host route", edits: []edit{{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.1/32"}}, path: "anycast.center_prefix", msg: "host route"},
		{name: "service IP not an IP", edits: []edit{{"service_ip: 198.18.0.1", "service_ip: anycast.example"}}, path: "anycast.service_ip", msg: "not an IP address"},
		{name: "service IP missing", edits: []edit{{"  service_ip: 198.18.0.1\n", ""}}, path: "anycast.service_ip", msg: "required"},

		// services
		{name: "empty bitrate ladder", edits: []edit{{"bitrates_kbps: [730, 1100, 2000]", "bitrates_kbps: []"}}, path: "services[0] (live).bitrates_kbps", msg: "at least one bitrate is required"},
		{name: "unsorted ladder", edits: []edit{{"bitrates_kbps: [730, 1100, 2000]", "bitrates_kbps: [730, 2000, 1100]"}}, path: "services[0] (live).bitrates_kbps[2]", msg: "1100 is not above the previous 2000"},
		{name: "repeated bitrate", edits: []edit{{"bitrates_kbps: [730, 1100, 2000]", "bitrates_kbps: [730, 730, 2000]"}}, path: "services[0] (live).bitrates_kbps[1]", msg: "strictly ascending"},
		{name: "zero bitrate", edits: []edit{{"bitrates_kbps: [730, 1100, 2000]", "bitrates_kbps: [0, 1100, 2000]"}}, path: "services[0] (live).bitrates_kbps[0]", msg: "0 is out of range [1, 1000000]"},
		{name: "huge bitrate", edits: []edit{{"bitrates_kbps: [730, 1100, 2000]", "bitrates_kbps: [730, 1100, 2000000]"}}, path: "services[0] (live).bitrates_kbps[2]", msg: "2000000 is out of range [1, 1000000]"},
		{name: "bad hostname", edits: []edit{{"hostnames: [live.iptv.example]", "hostnames: [live..iptv.example]"}}, path: "services[0] (live).hostnames[0]", msg: "not a valid DNS name"},
		{name: "hostname with underscore", edits: []edit{{"hostnames: [live.iptv.example]", "hostnames: [live_tv.example]"}}, path: "services[0] (live).hostnames[0]", msg: "not a valid DNS name"},
		{name: "IP as hostname", edits: []edit{{"hostnames: [live.iptv.example]", "hostnames: [live.iptv.example, 198.18.0.1]"}}, path: "services[0] (live).hostnames[1]", msg: "not a valid DNS name"},
		{name: "no hostnames", edits: []edit{{"hostnames: [live.iptv.example]", "hostnames: []"}}, path: "services[0] (live).hostnames", msg: "at least one hostname is required"},
		{name: "duplicate hostname across services", edits: []edit{{lastService, lastService + "  - name: vod\n    hostnames: [LIVE.iptv.example.]\n    url_template: \"http://{server}/vod/{path}\"\n    bitrates_kbps: [1000]\n"}}, path: "services[1] (vod).hostnames[0]", msg: `hostname "live.iptv.example" already belongs to service "live"`},
		{name: "url_template without server", edits: []edit{{`"http://{server}/live/`, `"http://cdn.iptv.example/live/`}}, path: "services[0] (live).url_template", msg: "must contain {server} or {host}"},
		{name: "unknown placeholder", edits: []edit{{"{bitrate}/index", "{bitrate}/{quality}/index"}}, path: "services[0] (live).url_template", msg: "unknown placeholder {quality}"},
		{name: "unclosed placeholder", edits: []edit{{"{bitrate}/index", "{bitrate/index"}}, path: "services[0] (live).url_template", msg: "unclosed '{'"},
		{name: "url_template not http", edits: []edit{{`"http://{server}/live/`, `"rtsp://{server}/live/`}}, path: "services[0] (live).url_template", msg: "must start with http:// or https://"},
		{name: "region named center", edits: []edit{{hefeiRegion, hefeiRegion + "  - name: center\n    location: {lat: 31.9, lon: 117.3}\n"}}, path: "regions[1] (center).name", msg: `"center" is reserved for the central scheduler`},
		{name: "unsupported selection", edits: []edit{{"selection: nearest", "selection: roundrobin"}}, path: "services[0] (live).selection", msg: `"roundrobin" is not supported (supported: nearest, swrr, chash, p2c, qoe)`},
		{name: "unknown default service", edits: []edit{{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.0/26\n  default_service: vod"}}, path: "anycast.default_service", msg: `unknown service "vod"`},
		{name: "no services", doc: validDoc[:strings.Index(validDoc, "services:")], path: "services", msg: "at least one service is required"},
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := c.doc
			if c.edits != nil {
				doc = apply(t, validDoc, c.edits...)
			}
			_, err := topology.Parse([]byte(doc))
			if err == nil {
				t.Fatalf("Parse accepted the document:\n%s", doc)
			}
			errs, ok := yamlstrict.AsErrors(err)
			if !ok {
				t.Fatalf("error %v (%T) carries no field errors", err, err)
			}
			want := c.count
			if want == 0 {
				want = 1
			}
			if len(errs) != want {
				t.Errorf("%d errors, want %d:\n%v", len(errs), want, err)
			}
			for _, e := range errs {
				if e.Path == c.path && strings.Contains(e.Msg, c.msg) {
					return
				}
			}
			t.Errorf("no error at %q containing %q; got:\n%v", c.path, c.msg, err)
		})
	}
}

func TestValidVariants(t *testing.T) {
	for _, c := range []struct {
		name  string
		edits []edit
	}{
		{"nested zone in the same region", []edit{{lastZone, lastZone + "  - name: hefei-center\n    region: hefei\n    networks: [100.64.1.128/25, 100.64.1.0/26]\n"}}},
		{"fallback DAG", []edit{
			{wuhuRegion, wuhuRegion + "  - name: bengbu\n    location: {lat: 32.92, lon: 117.39}\n    fallback: [wuhu, hefei]\n  - name: luan\n    location: {lat: 31.73, lon: 116.52}\n    fallback: [bengbu, wuhu, hefei]\n"},
		}},
		{"IPv6 server and network", []edit{{"address: 10.2.1.10:8080", `address: "[2001:db8::10]:8080"`}, {"[100.68.0.0/16]", "[100.68.0.0/16, 2001:db8:1::/48]"}}},
		{"dual-stack province and servers", []edit{
			{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.0/26\n  service_ip6: 2001:db8:ff::1\n  center_prefix6: 2001:db8:ff::/48"},
			{"address: 10.2.1.10:8080", "address: 10.2.1.10:8080\n        address6: \"[2001:db8::10]:8080\""},
			{"[100.68.0.0/16]", "[100.68.0.0/16, 2001:db8:1::/48]"},
		}},
		{"IPv6-only province", []edit{{"service_ip: 198.18.0.1\n  center_prefix: 198.18.0.0/26", "service_ip: 2001:db8:ff::1\n  center_prefix: 2001:db8:ff::/48"}}},
		{"optional fields omitted", []edit{
			{`        health: {url: "http://10.1.1.10:8080/health"}` + "\n", ""},
			{"        weight: 100\n", ""},
			{"        location: {lat: 31.861, lon: 117.281}\n", ""},
			{"    selection: nearest\n", ""},
			{"    location: {lat: 31.90, lon: 117.20}\n", ""},
		}},
		{"nulls leave defaults", []edit{{"weight: 100", "weight: ~"}, {"    selection: nearest\n", "    selection:\n"}}},
		{"revision", []edit{{"anycast:\n", "revision: 42\nanycast:\n"}}},
		{"comments and anchors without aliases", []edit{{"regions:\n", "# the cities\nregions: # one per city\n"}, {"location: {lat: 31.82, lon: 117.23}", "location: &hf {lat: 31.82, lon: 117.23}"}}},
		{"url template with host and port", []edit{{`"http://{server}/live/`, `"https://{host}:{port}/{service}/{region}/`}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustCompile(t, apply(t, validDoc, c.edits...))
		})
	}
}

// TestAllProblemsReported checks that one pass over a document reports every
// problem, so an operator fixes a file in one go.
func TestAllProblemsReported(t *testing.T) {
	doc := apply(t, validDoc,
		edit{"service_ip: 198.18.0.1", "service_ip: 198.18.0.999"},
		edit{"{lat: 31.82,", "{lat: 95,"},
		edit{"fallback: [hefei]", "fallback: [nowhere]"},
		edit{"- name: wuhu-1\n    region: wuhu\n", "- name: wuhu-1\n    region: wuhan\n"},
		edit{"address: 10.1.1.10:8080", "address: 10.1.1.10"},
		edit{"address: 10.2.1.10:8080", "address: 10.2.1.10:0"},
		edit{"[100.64.1.0/24]", "[100.64.1.1/24]"},
		edit{"bitrates_kbps: [730, 1100, 2000]", "bitrates_kbps: [0, 1100, 1000]"},
		edit{"selection: nearest", "selection: fastest"},
	)
	_, err := topology.Parse([]byte(doc))
	errs, ok := yamlstrict.AsErrors(err)
	if !ok {
		t.Fatalf("Parse = %v, want field errors", err)
	}
	want := []string{
		"anycast.service_ip",
		"regions[0] (hefei).location.lat",
		"regions[1] (wuhu).fallback[0]",
		"nodes[1] (wuhu-1).region",
		"nodes[0] (hefei-1).servers[0] (hefei-1-a).address",
		"nodes[1] (wuhu-1).servers[0] (wuhu-1-a).address",
		"zones[0] (hefei-north).networks[0]",
		"services[0] (live).bitrates_kbps[0]",
		"services[0] (live).bitrates_kbps[2]",
		"services[0] (live).selection",
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Path)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%d errors at %v\nwant %d at %v\n%v", len(got), got, len(want), want, err)
	}

	// decoding problems are collected the same way, with lines
	doc = apply(t, validDoc,
		edit{"address: 10.1.1.10:8080", "adress: 10.1.1.10:8080"},
		edit{"{lat: 31.82,", "{lat: north,"},
		edit{"weight: 100", "weight: [100]"},
		edit{"selection: nearest", "selection: nearest\n    colour: blue"},
	)
	_, err = topology.Parse([]byte(doc))
	errs, _ = yamlstrict.AsErrors(err)
	if len(errs) != 4 {
		t.Fatalf("%d decode errors, want 4:\n%v", len(errs), err)
	}
	for _, e := range errs {
		if e.Line == 0 {
			t.Errorf("%s: no line number", e.Path)
		}
	}
	if got := errs[0].Error(); got != "regions[0] (hefei).location.lat: invalid value: cannot unmarshal !!str `north` into float64 (line 6)" {
		t.Errorf("first error reads %q", got)
	}
	if !strings.Contains(err.Error(), "nodes[0] (hefei-1).servers[0] (hefei-1-a).adress: unknown field (did you mean \"address\"?) (line 16)") {
		t.Errorf("error text lacks the unknown field with its line:\n%v", err)
	}
}

const lookupDoc = `revision: 3
anycast:
  service_ip: 198.18.0.1
  center_prefix: 198.18.0.0/26
regions:
  - name: hefei
    location: {lat: 31.82, lon: 117.23}
  - name: wuhu
    location: {lat: 31.35, lon: 118.43}
    fallback: [hefei]
  - name: luan
    location: {lat: 31.73, lon: 116.52}
    fallback: [wuhu, hefei]
nodes:
  - name: hefei-1
    region: hefei
    location: {lat: 31.86, lon: 117.28}
    servers:
      - name: hefei-1-a
        address: 10.1.1.10:8080
      - name: hefei-1-b
        address: "[2001:db8::b]:8443"
        weight: 50
        location: {lat: 31.87, lon: 117.29}
  - name: wuhu-1
    region: wuhu
    location: {lat: 31.36, lon: 118.44}
    servers:
      - name: wuhu-1-a
        address: 10.2.1.10:8080
zones:
  - name: hefei-all
    region: hefei
    networks: [100.64.0.0/16, 2001:db8:100::/40]
  - name: hefei-center
    region: hefei
    networks: [100.64.1.0/24]
    location: {lat: 31.83, lon: 117.24}
  - name: wuhu-all
    region: wuhu
    networks: [100.68.0.0/16]
services:
  - name: live
    hostnames: [live.iptv.example, TV.IPTV.Example.]
    url_template: "http://{server}/live/{channel}/{bitrate}/index.m3u8"
    bitrates_kbps: [730, 1100, 2000]
  - name: vod
    hostnames: [vod.iptv.example]
    url_template: "http://{server}/vod/{path}"
    bitrates_kbps: [2000]
`

func TestSnapshotLookups(t *testing.T) {
	s := mustCompile(t, lookupDoc)
	if s.Revision != 7 || s.Doc == nil || s.Doc.Revision != 3 {
		t.Errorf("revision %d, doc revision %v; want 7 and 3", s.Revision, s.Doc)
	}
	if s.ServiceIP != netip.MustParseAddr("198.18.0.1") || s.CenterPrefix != netip.MustParsePrefix("198.18.0.0/26") {
		t.Errorf("anycast = %v %v", s.ServiceIP, s.CenterPrefix)
	}
	want := topology.Counts{Regions: 3, Nodes: 2, Servers: 3, Zones: 3, Networks: 4, Services: 2}
	if got := s.Counts(); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}

	idx := func(what string, f func(string) (int32, bool), name string, want int32) {
		t.Helper()
		got, ok := f(name)
		if !ok || got != want {
			t.Errorf("%s(%q) = %d, %v; want %d, true", what, name, got, ok, want)
		}
	}
	missing := func(what string, f func(string) (int32, bool), name string) {
		t.Helper()
		if got, ok := f(name); ok {
			t.Errorf("%s(%q) = %d, true; want not found", what, name, got)
		}
	}
	idx("Region", s.Region, "luan", 2)
	missing("Region", s.Region, "bozhou")
	idx("Node", s.Node, "wuhu-1", 1)
	missing("Node", s.Node, "wuhu-2")
	idx("Server", s.Server, "hefei-1-b", 1)
	idx("Server", s.Server, "wuhu-1-a", 2)
	missing("Server", s.Server, "hefei-1")
	idx("Zone", s.Zone, "hefei-center", 1)
	idx("Service", s.Service, "vod", 1)
	missing("Service", s.Service, "Vod")

	for _, h := range []string{"live.iptv.example", "LIVE.IPTV.EXAMPLE", "live.iptv.example.", "live.iptv.example:8080", "Live.Iptv.Example.:80", "tv.iptv.example", "TV.IPTV.Example."} {
		idx("ServiceByHost", s.ServiceByHost, h, 0)
	}
	idx("ServiceByHost", s.ServiceByHost, "vod.iptv.example:80", 1)
	for _, h := range []string{"", "iptv.example", "live.iptv.example.evil", "live.iptv.example:80:80", "[::1]:80"} {
		missing("ServiceByHost", s.ServiceByHost, h)
	}
	if got := s.Services[0].Hostnames; !slices.Equal(got, []string{"live.iptv.example", "tv.iptv.example"}) {
		t.Errorf("normalised hostnames = %v", got)
	}
	if s.Services[0].Selection != topology.DefaultSelection {
		t.Errorf("default selection = %q, want %q", s.Services[0].Selection, topology.DefaultSelection)
	}

	zone := func(addr string, want string) {
		t.Helper()
		zi, ok := s.ZoneOf(netip.MustParseAddr(addr))
		switch {
		case want == "" && ok:
			t.Errorf("ZoneOf(%s) = %s, want none", addr, s.Zones[zi].Name)
		case want != "" && (!ok || s.Zones[zi].Name != want):
			t.Errorf("ZoneOf(%s) = %d, %v; want %s", addr, zi, ok, want)
		}
	}
	zone("100.64.200.1", "hefei-all")
	zone("100.64.1.77", "hefei-center") // more specific nested zone wins
	zone("::ffff:100.64.1.77", "hefei-center")
	zone("2001:db8:1ff::1", "hefei-all")
	zone("100.68.5.5", "wuhu-all")
	zone("100.65.0.1", "")
	zone("2001:db8::1", "")

	// defaults
	a, b := s.Servers[0], s.Servers[1]
	if a.Weight != topology.DefaultWeight || b.Weight != 50 {
		t.Errorf("weights = %d, %d; want %d (default) and 50", a.Weight, b.Weight, topology.DefaultWeight)
	}
	if a.Loc != s.Nodes[0].Loc || b.Loc != (topology.Location{Lat: 31.87, Lon: 117.29}) {
		t.Errorf("server locations = %v, %v; want the node's %v and its own", a.Loc, b.Loc, s.Nodes[0].Loc)
	}
	if a.Addr != netip.MustParseAddrPort("10.1.1.10:8080") || b.Addr != netip.MustParseAddrPort("[2001:db8::b]:8443") {
		t.Errorf("addresses = %v, %v", a.Addr, b.Addr)
	}
	if a.Node != 0 || a.Region != 0 || s.Servers[2].Node != 1 || s.Servers[2].Region != 1 {
		t.Errorf("server references = %+v / %+v", a, s.Servers[2])
	}
	if s.Zones[0].Loc != s.Regions[0].Loc || s.Zones[1].Loc != (topology.Location{Lat: 31.83, Lon: 117.24}) {
		t.Errorf("zone locations = %v, %v; want the region's %v and its own", s.Zones[0].Loc, s.Zones[1].Loc, s.Regions[0].Loc)
	}
	if got := fmt.Sprint(s.Regions[2].Fallback, s.Regions[0].Nodes, s.Regions[0].Servers, s.Nodes[0].Servers); got != "[1 0] [0] [0 1] [0 1]" {
		t.Errorf("region/node references = %s", got)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	top, err := topology.Parse([]byte(lookupDoc))
	if err != nil {
		t.Fatal(err)
	}
	js, err := top.EncodeJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := topology.DecodeJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	js2, _ := back.EncodeJSON()
	if string(js) != string(js2) {
		t.Errorf("JSON round trip differs:\n%s\n%s", js, js2)
	}
	if _, err := topology.DecodeJSON([]byte(`{"anycast":{},"regoins":[]}`)); err == nil || !strings.Contains(err.Error(), "regoins") {
		t.Errorf("DecodeJSON with an unknown field = %v, want an error naming it", err)
	}
	y, err := top.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topology.Parse(y); err != nil {
		t.Errorf("YAML() output does not parse: %v\n%s", err, y)
	}
}

// TestDualStack: a dual-stack province has both service addresses with
// their aggregates, answers requests addressed to either, and gives each
// family its own address of a dual-stack server (and none of a family a
// server lacks).
func TestDualStack(t *testing.T) {
	s := mustCompile(t, apply(t, validDoc,
		edit{"center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.0/26\n  service_ip6: 2001:db8:ff::1\n  center_prefix6: 2001:db8:ff::/48\n  default_service: live"},
		edit{"address: 10.2.1.10:8080", "address: 10.2.1.10:8080\n        address6: \"[2001:db8::10]:8080\""},
	))
	want := []topology.AnycastPair{
		{ServiceIP: netip.MustParseAddr("198.18.0.1"), CenterPrefix: netip.MustParsePrefix("198.18.0.0/26")},
		{ServiceIP: netip.MustParseAddr("2001:db8:ff::1"), CenterPrefix: netip.MustParsePrefix("2001:db8:ff::/48")},
	}
	if got := s.Anycast(); !slices.Equal(got, want) {
		t.Errorf("Anycast() = %v, want %v", got, want)
	}
	for _, host := range []string{"198.18.0.1", "[2001:db8:ff::1]", "[2001:db8:ff::1]:80"} {
		if _, ok := s.ServiceByHost(host); !ok {
			t.Errorf("ServiceByHost(%q): no service", host)
		}
	}
	wuhu, hefei := s.Servers[1], s.Servers[0]
	for _, c := range []struct {
		v    *topology.ServerView
		v6   bool
		want string
	}{
		{&wuhu, false, "10.2.1.10:8080"},
		{&wuhu, true, "[2001:db8::10]:8080"},
		{&hefei, false, "10.1.1.10:8080"},
		{&hefei, true, ""},
	} {
		ap, str, ok := c.v.AddrFor(c.v6)
		if ok != (c.want != "") || str != c.want || (ok && ap.String() != c.want) {
			t.Errorf("%s.AddrFor(v6=%v) = %v %q %v, want %q", c.v.Name, c.v6, ap, str, ok, c.want)
		}
	}
	single := mustCompile(t, validDoc)
	if got := single.Anycast(); len(got) != 1 || single.IsServiceIP(netip.MustParseAddr("2001:db8:ff::1")) {
		t.Errorf("single-family province: Anycast() = %v", got)
	}
}
