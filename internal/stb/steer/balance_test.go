package steer_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/balance"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// withSelection compiles the test province with the live service selecting by sel.
func withSelection(t *testing.T, sel string) *topology.Snapshot {
	t.Helper()
	return fixture.CompileYAML(t, strings.Replace(doc, "bitrates_kbps: [730, 2000, 6000]", "bitrates_kbps: [730, 2000, 6000]\n    selection: "+sel, 1), 1)
}

func table(t *testing.T, s *topology.Snapshot, cfg ...balance.Config) *balance.Table {
	t.Helper()
	nodes := make([]balance.NodeInput, len(s.Nodes))
	for ni, nv := range s.Nodes {
		for _, si := range nv.Servers {
			nodes[ni].Servers = append(nodes[ni].Servers, balance.Server{Index: si, Name: s.Servers[si].Name, Weight: float64(s.Servers[si].Weight)})
			nodes[ni].Loads = append(nodes[ni].Loads, balance.Load{Healthy: true})
		}
	}
	c := balance.DefaultConfig()
	if len(cfg) > 0 {
		c = cfg[0]
	}
	tb, err := balance.BuildTable(balance.TableInput{Nodes: nodes, Config: c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestCHashKeepsAChannelOnOneServer: with selection chash every STB asking
// for one channel is sent to the same server of the node (cache affinity),
// and different channels spread over the node's servers, with the default
// bound: 30 requests for a channel are far below its load floor.
func TestCHashKeepsAChannelOnOneServer(t *testing.T) {
	s := withSelection(t, "chash")
	cfg := balance.DefaultConfig()
	e := steer.New(s, steer.Options{Balance: table(t, s, cfg)})
	perChannel := map[string]map[int32]bool{}
	servers := map[int32]bool{}
	for ch := range 40 {
		path := fmt.Sprintf("/ch%d/index.m3u8", ch)
		for c := range 30 {
			d := e.Decide(steer.Request{Client: netip.AddrFrom4([4]byte{100, 64, 2, byte(c)}), Host: "live.iptv.example", Path: path})
			if perChannel[path] == nil {
				perChannel[path] = map[int32]bool{}
			}
			perChannel[path][d.Server] = true
			servers[d.Server] = true
		}
	}
	for p, srv := range perChannel {
		if len(srv) != 1 {
			t.Errorf("channel %s went to %d servers, want 1", p, len(srv))
		}
	}
	if len(servers) != 2 {
		t.Errorf("40 channels used %d servers of the 2-server node", len(servers))
	}
	x := e.Explain(steer.Request{Client: netip.MustParseAddr("100.64.2.1"), Host: "live.iptv.example", Path: "/ch1/index.m3u8"})
	if !strings.Contains(strings.Join(x.Steps, "\n"), "in-node policy chash picked the server") {
		t.Errorf("explain steps: %v", x.Steps)
	}
	if c := x.Candidates[0]; !c.Chosen || !strings.Contains(c.Why, "chosen by policy chash") || !strings.Contains(c.Why, "chash score") {
		t.Errorf("the pick does not carry the policy and its score: %+v", c)
	}
}

// TestPolicyNeverPicksUnavailable: the policy's pick is checked against the
// engine's availability (health and drains), falling back to nearest.
func TestPolicyNeverPicksUnavailable(t *testing.T) {
	for _, sel := range []string{"swrr", "chash", "p2c"} {
		s := withSelection(t, sel)
		// The table thinks mid-near-a is healthy, the engine knows it is drained.
		e := steer.New(s, steer.Options{Balance: table(t, s), Available: down(s, "mid-near-a")})
		for c := range 200 {
			d := e.Decide(steer.Request{Client: netip.AddrFrom4([4]byte{100, 64, 2, byte(c)}), Host: "live.iptv.example", Path: fmt.Sprintf("/ch%d/x", c)})
			if s.Servers[d.Server].Name == "mid-near-a" {
				t.Fatalf("%s: sent an STB to an unavailable server", sel)
			}
		}
	}
}

func TestSWRRSpreadsByWeight(t *testing.T) {
	s := withSelection(t, "swrr")
	e := steer.New(s, steer.Options{Balance: table(t, s)})
	count := map[string]int{}
	for range 4000 {
		d := e.Decide(steer.Request{Client: netip.MustParseAddr("100.64.2.7"), Host: "live.iptv.example"})
		count[s.Servers[d.Server].Name]++
	}
	// mid-near-a weight 300, mid-near-b weight 100: exactly 3:1 in round robin.
	if count["mid-near-a"] != 3000 || count["mid-near-b"] != 1000 {
		t.Fatalf("swrr spread %v, want 3000/1000", count)
	}
}

// TestNodeRankOrdersNodes: the scheduler's ranking (RTT + loss, capacity)
// replaces the distance order; the engine takes the first node of it with an
// available server.
func TestNodeRankOrdersNodes(t *testing.T) {
	s := withSelection(t, "nearest")
	farFirst := func(nodes []int32, _ topology.Location) []int32 {
		out := slices.Clone(nodes)
		slices.SortFunc(out, func(a, b int32) int { return strings.Compare(s.Nodes[a].Name, s.Nodes[b].Name) }) // "mid-far" before "mid-near"
		return out
	}
	c := netip.MustParseAddr("100.64.2.7") // nearest to mid-near
	if d := steer.New(s, steer.Options{}).Decide(steer.Request{Client: c, Host: "live.iptv.example"}); s.Nodes[d.Node].Name != "mid-near" {
		t.Fatalf("by distance: node %s", s.Nodes[d.Node].Name)
	}
	if d := steer.New(s, steer.Options{NodeRank: farFirst}).Decide(steer.Request{Client: c, Host: "live.iptv.example"}); s.Nodes[d.Node].Name != "mid-far" {
		t.Fatalf("ranked: node %s, want the ranking's first", s.Nodes[d.Node].Name)
	}
}
