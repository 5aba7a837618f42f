package dnsd

import (
	"net/netip"
	"testing"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/miekg/dns"
)

// rightsTopology is testTopology with live blacked out in zone north-b
// (a slate with an IPv4 address only) and in one network inside north-a,
// and a bypass CNAME for when the province is over its thresholds.
const rightsTopology = testTopology + `    slate: {url: "http://slate.example/{channel}", addresses: [192.0.2.50]}
    overflow: {rps_per_server: 100}
    bypass: {cname: live.national-cdn.example}
    rights:
      - {name: match, zones: [north-b], action: blackout}
      - {networks: [100.64.0.128/25], action: blackout, slate: {addresses: ["2001:db8::50"]}}
      - {channels: [derby], regions: [south], action: blackout}
`

// overAll puts every node over the thresholds, or none.
type overAll bool

func (o overAll) Over(int32, int32) bool     { return bool(o) }
func (o overAll) Reason(int32, int32) string { return "test" }

func rightsPair(t *testing.T, over bool) *pair {
	snap := compile(t, []byte(rightsTopology))
	c := Config{TrustedResolvers: testResolvers}
	o := steer.Options{Overflow: overAll(over)}
	return &pair{fast: New(c, engineFunc(steer.New(snap, o)), nil, nil), full: New(c, engineFunc(steer.New(snap, o)), nil, nil), snap: snap}
}

// TestBlackoutAndBypassAnswers: what each path answers a blacked-out or
// bypassed client, and that the fast path answers them byte for byte as
// the full path does.
func TestBlackoutAndBypassAnswers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		over      bool
		from, ecs string
		qtype     uint16
		want      string // the answer record's data; "" NODATA
		scope     uint8
	}{
		{"blackout: the slate's A", false, "100.64.1.7", "", dns.TypeA, "192.0.2.50", 0},
		{"blackout: no AAAA on the slate", false, "100.64.1.7", "", dns.TypeAAAA, "", 0},
		{"blackout via ECS: the rule's network bounds the scope", false, "127.0.0.1", "100.64.0.128/25", dns.TypeAAAA, "2001:db8::50", 25},
		{"the rest of the zone is served", false, "127.0.0.1", "100.64.0.0/24", dns.TypeA, "10.1.1.10", 25},
		{"a channel rule does not apply to DNS", false, "100.65.0.7", "", dns.TypeA, "10.2.1.10", 0},
		{"province over: the bypass CNAME", true, "100.65.0.7", "", dns.TypeA, "live.national-cdn.example.", 0},
		{"province over: CNAME for AAAA too", true, "100.65.0.7", "", dns.TypeAAAA, "live.national-cdn.example.", 0},
		{"a blackout wins over the bypass", true, "100.64.1.7", "", dns.TypeA, "192.0.2.50", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const apex = "live.iptv.example."
			p := rightsPair(t, tc.over)
			q := query(apex, tc.qtype)
			if tc.ecs != "" {
				q = query(apex, tc.qtype, ecs(tc.ecs))
			}
			wire, err := q.Pack()
			if err != nil {
				t.Fatal(err)
			}
			if !p.compare(t, wire, netip.MustParseAddr(tc.from)) {
				t.Fatal("the fast path did not answer")
			}
			var m dns.Msg
			if err := m.Unpack(fullReply(p.full, wire, netip.MustParseAddr(tc.from))); err != nil {
				t.Fatal(err)
			}
			got := ""
			if len(m.Answer) == 1 {
				switch rr := m.Answer[0].(type) {
				case *dns.A:
					got = rr.A.String()
				case *dns.AAAA:
					got = rr.AAAA.String()
				case *dns.CNAME:
					got = rr.Target
				}
			}
			if m.Rcode != dns.RcodeSuccess || !m.Authoritative || got != tc.want || len(m.Answer) > 1 || (got == "" && len(m.Ns) != 1) {
				t.Fatalf("rcode %d aa %v answer %q, want %q:\n%v", m.Rcode, m.Authoritative, got, tc.want, &m)
			}
			if opt := m.IsEdns0(); tc.ecs != "" && (opt == nil || opt.Option[0].(*dns.EDNS0_SUBNET).SourceScope != tc.scope) {
				t.Errorf("ECS scope: %v, want %d", opt, tc.scope)
			}
		})
	}
}
