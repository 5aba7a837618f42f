package lab

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
)

// TestLabTopology: the topology every lab applies, in each mode: both
// services, each on its own fleet, the servers at the edges' addresses
// with edges, a zone for each city's STBs, and the Topology hook applied.
func TestLabTopology(t *testing.T) {
	cities := []string{"hefei", "wuhu"}
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"plain", Options{}},
		{"edges", Options{Edges: true}},
		{"nginx edges", Options{Edges: true, EdgeServer: EdgeNginx}},
		{"qoe", Options{Edges: true, QoE: true}},
		{"hook", Options{Topology: func(tp *topology.Topology) { tp.Services[0].Overflow = &topology.Overflow{RPSPerServer: 5} }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Cities, o.Dir = cities, t.TempDir()
			l := &Lab{o: o}
			if err := l.writeTopology(); err != nil {
				t.Fatal(err)
			}
			doc, err := os.ReadFile(filepath.Join(o.Dir, "topology.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			tp, err := topology.Parse(doc)
			if err != nil {
				t.Fatalf("the lab's topology.yaml does not parse: %v", err)
			}
			s, err := topology.Compile(tp, 1)
			if err != nil {
				t.Fatal(err)
			}
			if w := topology.Warnings(s); len(w) > 0 {
				t.Errorf("%d warnings, first: %s", len(w), w[0])
			}
			live, _ := s.ServiceByHost(topogen.Hostname)
			vod, ok := s.ServiceByHost(topogen.VODHostname)
			if !ok || len(s.Services) != 2 {
				t.Fatalf("services %d, vod found %v", len(s.Services), ok)
			}
			if (s.Services[live].Overflow != nil) != (tc.o.Topology != nil) {
				t.Errorf("live overflow %+v with hook %v", s.Services[live].Overflow, tc.o.Topology != nil)
			}
			for ci := range cities {
				n := tp.Nodes[ci]
				if len(n.Servers) != LiveServers+VODServers {
					t.Fatalf("node %s has %d servers", n.Name, len(n.Servers))
				}
				for k, sv := range n.Servers {
					si, _ := s.Server(sv.Name)
					isVOD := k >= LiveServers
					if s.InPool(live, si) == isVOD || s.InPool(vod, si) != isVOD {
						t.Errorf("server %s (VOD %v) in live's pool %v, vod's %v", sv.Name, isVOD, s.InPool(live, si), s.InPool(vod, si))
					}
					if !o.Edges {
						continue
					}
					addr := fmt.Sprintf("10.%d.4.%d:8080", ci+1, 10+k)
					if sv.Address != addr {
						t.Errorf("server %s at %s, want its edge's %s", sv.Name, sv.Address, addr)
					}
					if name, ok := l.EdgeAt("http://" + addr + "/live/ch1/6000/index.m3u8"); !ok || name != EdgeName(ci, 10+k) {
						t.Errorf("EdgeAt(%s) = %q %v", addr, name, ok)
					}
				}
			}
			if _, ok := s.ZoneOf(mustAddr(t, "10.2.1.2")); !ok {
				t.Error("wuhu's STB network is in no zone")
			}
		})
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
