package dnsd

import (
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/miekg/dns"
)

// TestSeveralAnswers: a service with answers: N gets up to N records of
// the family asked, in the engine's order, through the full path (the fast
// path leaves such zones alone).
func TestSeveralAnswers(t *testing.T) {
	doc := strings.Replace(testTopology, "    bitrates_kbps: [2000]\n", "    bitrates_kbps: [2000]\n    answers: 3\n", 1)
	eng := steer.New(compile(t, []byte(doc)), steer.Options{})
	s := New(Config{TrustedResolvers: testResolvers}, engineFunc(eng), nil, nil)
	tests := []struct {
		name, from string
		qtype      uint16
		want       []string
	}{
		// north-a: north-1 nearest, then north-2, then the other region.
		{"A from north", "100.64.0.9", dns.TypeA, []string{"10.1.1.10", "10.1.2.10", "10.2.1.10"}},
		// south-v6: south-6 (IPv6 only) is chosen: NODATA for A, as with one answer.
		{"A from south-v6", "100.65.6.9", dns.TypeA, nil},
		{"AAAA from south-v6", "100.65.6.9", dns.TypeAAAA, []string{"2001:db8:2::10"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := serve(t, s, query("live.iptv.example.", tc.qtype), udpFrom(tc.from))
			var got []string
			for _, rr := range r.Answer {
				switch a := rr.(type) {
				case *dns.A:
					got = append(got, a.A.String())
				case *dns.AAAA:
					got = append(got, a.AAAA.String())
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("answers %v, want %v", got, tc.want)
			}
		})
	}
	if ix := s.indexFor(eng.Snapshot()); len(ix.fast) != 0 {
		t.Errorf("fast path takes a zone with answers 3: %v", ix.fast)
	}
}
