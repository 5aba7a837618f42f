package health

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// TestAgentProbesItsRegion: an agent probes the servers of the region its
// identity is bound to (an explicit list only narrows it: a verdict on
// another region's server would count for nothing), and a province-wide
// agent every region's. An agent without a region is refused.
func TestAgentProbesItsRegion(t *testing.T) {
	snap := fixture.Compile(t, fixture.Shaped(t, topogen.Options{NodesPerRegion: 1, ServersPerNode: 2, ZonesPerRegion: 1, NetworksPerZone: 1}, topogen.Cities(nil, 2)...))
	var syn1, all []string
	for _, sv := range snap.Servers {
		all = append(all, sv.Name)
		if snap.Regions[sv.Region].Name == "syn-1" {
			syn1 = append(syn1, sv.Name)
		}
	}
	targets := func(o AgentOptions) []string {
		t.Helper()
		o.CheckerID = "c1"
		a, err := NewAgent(nil, "/anysched/", o, nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		a.SetSnapshot(snap)
		a.Checker.mu.Lock()
		defer a.Checker.mu.Unlock()
		var got []string
		for s := range a.Checker.targets {
			got = append(got, s)
		}
		slices.Sort(got)
		return got
	}
	if got := targets(AgentOptions{Region: "syn-1"}); !slices.Equal(got, syn1) {
		t.Errorf("region syn-1 probes %v, want %v", got, syn1)
	}
	if got := targets(AgentOptions{Region: "syn-1", Servers: all}); !slices.Equal(got, syn1) {
		t.Errorf("region syn-1 listing every server probes %v, want only syn-1's %v", got, syn1)
	}
	if got := targets(AgentOptions{Region: keyspace.ProvinceRegion}); !slices.Equal(got, all) {
		t.Errorf("a province-wide checker probes %v, want %v", got, all)
	}
	if _, err := NewAgent(nil, "/anysched/", AgentOptions{CheckerID: "c1", Servers: all}, nil, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("an agent without a region was built")
	}
}
