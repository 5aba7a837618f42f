package steer_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/stb/balance"
	"github.com/anysched/anysched/internal/stb/steer"
)

// TestExplainAgreesWithDecide: on one engine built by Build, Explain gives
// the decision the next Decide makes, for every in-node policy, and
// explaining changes nothing: swrr's rotation and chash's bounded loads
// advance only with real decisions. p2c draws at random, so only its node
// must agree.
func TestExplainAgreesWithDecide(t *testing.T) {
	for _, sel := range []string{"nearest", "swrr", "chash", "p2c"} {
		t.Run(sel, func(t *testing.T) {
			s := withSelection(t, sel)
			eng, err := steer.Build(s, steer.Inputs{Balance: balance.DefaultConfig()})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 60 {
				req := steer.Request{
					Client: netip.AddrFrom4([4]byte{100, 64, byte(2 + i%4), byte(i)}),
					Host:   "live.iptv.example", Path: fmt.Sprintf("/ch%d/index.m3u8", i%7),
				}
				x := eng.Explain(req)
				x2 := eng.Explain(req) // explaining twice changes nothing
				d := eng.Decide(req)
				if x.Decision.Node != d.Node || x2.Decision.Node != d.Node {
					t.Fatalf("request %d: explained node %d (then %d), decided %d", i, x.Decision.Node, x2.Decision.Node, d.Node)
				}
				if sel != "p2c" && (x.Decision.Server != d.Server || x2.Decision.Server != d.Server) {
					t.Fatalf("request %d: explained server %d (then %d), decided %d", i, x.Decision.Server, x2.Decision.Server, d.Server)
				}
			}
		})
	}
}

// TestAsRegionIsThatRegionsBuild: the center's engine answering as a region
// gives what an engine built for that region gives, including for clients
// in no coverage zone, and availability carries over.
func TestAsRegionIsThatRegionsBuild(t *testing.T) {
	s := withSelection(t, "nearest")
	av := &avail.Availability{Available: make([]bool, len(s.Servers)), Why: make([]string, len(s.Servers)), Figures: make([]avail.Figures, len(s.Servers))}
	for i := range av.Available {
		av.Available[i] = true
	}
	east, _ := s.Server("east-1-a")
	av.Available[east], av.Why[east] = false, "down by 1 of 1 checkers"
	center, err := steer.Build(s, steer.Inputs{DefaultRegion: "west", Avail: av, Balance: balance.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	east1, err := steer.Build(s, steer.Inputs{DefaultRegion: "east", Avail: av, Balance: balance.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	as, ok := center.AsRegion("east")
	if !ok {
		t.Fatal("AsRegion(east) found no region east")
	}
	if _, ok := center.AsRegion("nowhere"); ok {
		t.Error("AsRegion accepted an unknown region")
	}
	for _, c := range []string{"198.18.0.1", "100.64.2.9", "100.64.4.9", "2001:db8:3::9"} {
		req := steer.Request{Client: netip.MustParseAddr(c), Host: "live.iptv.example"}
		got, want := as.Decide(req), east1.Decide(req)
		if got != want {
			t.Errorf("client %s: as east %+v, east's own engine %+v", c, got, want)
		}
		if got.Server == east {
			t.Errorf("client %s sent to an unavailable server", c)
		}
	}
	if d := center.Decide(steer.Request{Client: netip.MustParseAddr("198.18.0.1"), Host: "live.iptv.example"}); s.Regions[d.ClientRegion].Name != "west" {
		t.Errorf("AsRegion changed the center's own engine: a client in no zone is placed in %s", s.Regions[d.ClientRegion].Name)
	}
}
