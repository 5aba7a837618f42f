package topology_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
)

// rightsTail is appended to validDoc's only service.
const rightsTail = `    slate: {url: "http://slate.example/{channel}", addresses: [192.0.2.50, "2001:db8::50"]}
    overflow: {rps_per_server: 100}
    bypass: {url_template: "https://cdn.example/{path}", cname: live.cdn.example}
    rights:
      - {name: ok, channels: [derby], networks: [100.64.1.128/25], action: allow}
      - {name: derby, channels: [derby, "sport*"], regions: [hefei], zones: [wuhu-all], action: blackout, from: "2026-12-06T18:00:00Z", until: "2026-12-06T21:00:00Z"}
      - {networks: [100.64.0.0/10], action: blackout, slate: {addresses: [192.0.2.51]}}
`

func rightsDocWith(t *testing.T, edits ...edit) string {
	return apply(t, validDoc+rightsTail, edits...)
}

func TestRightsValid(t *testing.T) {
	top, err := topology.Parse([]byte(rightsDocWith(t)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := topology.Compile(top, 1)
	if err != nil {
		t.Fatal(err)
	}
	rt := &s.Services[0].Rights
	if len(rt.Rules) != 3 || rt.Rules[1].Label != "1 (derby)" || !rt.Rules[1].Blackout || rt.Rules[0].Blackout {
		t.Fatalf("rules %+v", rt.Rules)
	}
	// The last rule's slate keeps the service's URL and has its own address.
	if sl := rt.Rules[2].Slate; sl.URL != "http://slate.example/{channel}" || sl.A != netip.MustParseAddr("192.0.2.51") || sl.AAAA.IsValid() {
		t.Errorf("merged slate %+v", sl)
	}
	if b := s.Services[0].Bypass; b == nil || b.CNAME != "live.cdn.example" || b.Template == nil {
		t.Errorf("bypass %+v", b)
	}
	hefei, _ := s.Region("hefei")
	wuhuAll, _ := s.Zone("wuhu-all")
	at := func(ts string) func() int64 {
		return func() int64 { v, _ := time.Parse(time.RFC3339, ts); return v.UnixNano() }
	}
	before, during, after := at("2026-12-06T17:59:59Z"), at("2026-12-06T19:00:00Z"), at("2026-12-06T21:00:00Z")
	for _, tc := range []struct {
		name          string
		region, zone  int32
		addr, channel string
		now           func() int64
		want          int32
	}{
		{"allowed network, nested in the blackout network", hefei, 0, "100.64.1.200", "derby", during, 0},
		{"region", hefei, -1, "198.51.100.1", "derby", during, 1},
		{"zone, prefix", -1, wuhuAll, "198.51.100.1", "sport7", during, 1},
		{"after the window: the wider network", hefei, 0, "100.64.1.1", "derby", after, 2},
		{"before the window: the wider network", hefei, 0, "100.64.1.1", "derby", before, 2},
		{"no channel (DNS): only every-channel rules", hefei, -1, "198.51.100.1", "", during, -1},
		{"nothing", -1, -1, "198.51.100.1", "derby", during, -1},
	} {
		if got := rt.Match(tc.region, tc.zone, netip.MustParseAddr(tc.addr), tc.channel, tc.now); got != tc.want {
			t.Errorf("%s: rule %d, want %d", tc.name, got, tc.want)
		}
	}
}

// Every problem of a rule is reported with its field path; one bad rule
// rejects the document.
func TestRightsValidation(t *testing.T) {
	const svc = "services[0] (live)"
	for _, c := range []struct {
		name string
		e    edit
		want string
	}{
		{"action", edit{"action: allow}", "action: permit}"}, svc + `.rights[0] (ok).action: "permit" is not allow or blackout`},
		{"network", edit{"networks: [100.64.1.128/25]", "networks: [100.64.1.0/24, 100.64.1.1/25]"}, svc + `.rights[0] (ok).networks[1]: host bits set`},
		{"region", edit{"regions: [hefei]", "regions: [hefie]"}, svc + `.rights[1] (derby).regions[0]: unknown region "hefie"; did you mean "hefei"?`},
		{"zone", edit{"zones: [wuhu-all]", "zones: [wuhu]"}, svc + `.rights[1] (derby).zones[0]: unknown zone "wuhu"`},
		{"window", edit{`until: "2026-12-06T21:00:00Z"`, `until: "2026-12-06T17:00:00Z"`}, svc + `.rights[1] (derby).until: 2026-12-06T17:00:00Z is not after from`},
		{"time", edit{`from: "2026-12-06T18:00:00Z"`, `from: "6 Dec 18:00"`}, svc + `.rights[1] (derby).from: not an RFC 3339 time`},
		{"channel", edit{`"sport*"`, `"*sport"`}, svc + `.rights[1] (derby).channels[1]: "*sport": '*' may only end a pattern`},
		{"duplicate name", edit{"name: derby", "name: ok"}, svc + `.rights[1] (ok).name: duplicate rule "ok" (first at rights[0])`},
		{"slate address", edit{"addresses: [192.0.2.51]", "addresses: [192.0.2.51, 192.0.2.52]"}, svc + `.rights[2].slate.addresses[1]: a second address of the same family`},
		{"blackout without a slate url", edit{`slate: {url: "http://slate.example/{channel}", addresses`, `slate: {addresses`}, svc + `.rights[1] (derby): a blackout needs a slate url`},
		{"slate url names a server", edit{`url: "http://slate.example/{channel}"`, `url: "http://{server}/{channel}"`}, svc + `.slate.url: {server} names an edge server`},
		{"bypass cname", edit{"cname: live.cdn.example", "cname: live.iptv.example"}, svc + `.bypass.cname: "live.iptv.example" is a hostname of service "live"`},
		{"bypass needs overflow", edit{"    overflow: {rps_per_server: 100}\n", ""}, svc + `.bypass: needs overflow thresholds`},
		{"allow with a slate", edit{"action: allow}", "action: allow, slate: {url: \"http://x.example/\"}}"}, svc + `.rights[0] (ok).slate: only a blackout rule has a slate`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := topology.Parse([]byte(rightsDocWith(t, c.e)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got:\n%v\nwant a line containing:\n%s", err, c.want)
			}
		})
	}
}

func TestRightsDiff(t *testing.T) {
	a, err := topology.Parse([]byte(rightsDocWith(t)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := topology.Parse([]byte(rightsDocWith(t, edit{"regions: [hefei]", "regions: [hefei, wuhu]"})))
	if err != nil {
		t.Fatal(err)
	}
	d := topology.Diff(a, b)
	if got := d.Summary(); got != "1 service changed, rights changed in live" {
		t.Errorf("summary %q", got)
	}
	sec := d.Section(topology.KindServices)
	want := "rights[1]: blackout derby,sport* in regions=[hefei] zones=[wuhu-all] 2026-12-06T18:00:00Z..2026-12-06T21:00:00Z (derby) -> " +
		"blackout derby,sport* in regions=[hefei, wuhu] zones=[wuhu-all] 2026-12-06T18:00:00Z..2026-12-06T21:00:00Z (derby)"
	if sec == nil || len(sec.Changed) != 1 || len(sec.Changed[0].Fields) != 1 || sec.Changed[0].Fields[0] != want {
		t.Fatalf("diff %+v\nwant %s", sec, want)
	}
}

// TestRightsManyRules: first match wins across the rule set's words (rules
// past 64 and 128), whichever of network, zone and region put a rule in;
// more than MaxRules rules are refused.
func TestRightsManyRules(t *testing.T) {
	rules := func(n int) string {
		var b strings.Builder
		b.WriteString("    slate: {url: \"http://slate.example/{channel}\"}\n    rights:\n")
		for i := range n {
			switch i {
			case 70:
				b.WriteString("      - {name: zone70, zones: [hefei-north], action: blackout}\n")
			case 150:
				b.WriteString("      - {name: region150, regions: [hefei], action: blackout}\n")
			default:
				fmt.Fprintf(&b, "      - {name: net%d, networks: [10.%d.%d.0/24], action: allow}\n", i, 200+i/256, i%256)
			}
		}
		return b.String()
	}
	s := mustCompile(t, validDoc+rules(200))
	rt := &s.Services[0].Rights
	hefei, _ := s.Region("hefei")
	north, _ := s.Zone("hefei-north")
	never := func() int64 { t.Fatal("read the clock for rules without windows"); return 0 }
	for _, c := range []struct {
		name         string
		region, zone int32
		addr         string
		want         int32
	}{
		{"a network past 64", -1, -1, "10.200.99.3", 99},
		{"the zone's rule before the region's", hefei, north, "198.51.100.1", 70},
		{"the region's rule before a later network's", hefei, -1, "10.200.199.3", 150},
		{"a network past 128, no region", -1, -1, "10.200.199.3", 199},
		{"nothing", -1, -1, "198.51.100.1", -1},
	} {
		if got := rt.Match(c.region, c.zone, netip.MustParseAddr(c.addr), "ch1", never); got != c.want {
			t.Errorf("%s: rule %d, want %d", c.name, got, c.want)
		}
	}
	_, err := topology.Parse([]byte(validDoc + rules(topology.MaxRules+1)))
	if want := fmt.Sprintf("services[0] (live).rights: %d rules; at most %d", topology.MaxRules+1, topology.MaxRules); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%d rules: %v, want %q", topology.MaxRules+1, err, want)
	}
}
