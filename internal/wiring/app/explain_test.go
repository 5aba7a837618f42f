package app_test

import (
	"context"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/internal/wiring/config"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestExplainAgreesWithSTBs: for every selection policy, what the admin API
// explains "as region hefei" is what hefei's own scheduler answers a real
// STB request, and what it explains as the center is what the center
// answers: both come from the engine steer.Build made, not from a rebuild
// with fewer inputs. Nearest must agree on the server; swrr rotates, p2c
// draws at random and chash bounds each scheduler's own loads inside the
// chosen node, so they must agree on the node (internal/stb/steer's tests
// check that, on one engine, Explain and Decide agree on the server too).
// qoe is left out: the city's allocator replaces the engine's answer by
// design, and explain says so.
func TestExplainAgreesWithSTBs(t *testing.T) {
	tp := topogen.Province(topogen.Cities(nil, 3), topogen.Options{NodesPerRegion: 2, ServersPerNode: 3, ZonesPerRegion: 1, NetworksPerZone: 1, FallbackPerRegion: 1})
	base := tp.Services[0]
	policies := []string{"nearest", "swrr", "chash", "p2c"}
	tp.Services = nil
	for _, p := range policies {
		sv := base
		sv.Name, sv.Hostnames, sv.Selection = p, []string{p + ".iptv.example"}, topology.Selection(p)
		tp.Services = append(tp.Services, sv)
	}
	doc, err := topogen.YAML(tp)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "topology.yaml")
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	// Clients: one in each city's coverage zone, and one in none.
	clients := []string{"198.18.0.1"}
	for _, z := range tp.Zones {
		clients = append(clients, netip.MustParsePrefix(z.Networks[0]).Addr().Next().String())
	}

	e := etcdtest.Start(t)
	cc := centerConfig(t)
	cc.Etcd.Endpoints = []string{e.Endpoint()}
	cc.HTTP.Listen = anyPort
	cc.HTTP.TrustedProxies = []config.Network{config.MustParseNetwork("127.0.0.0/8")}
	runCenter(t, &cc)
	rc := regionalConfig(t, cc, tp.Regions[0].Name)
	rc.Etcd.Endpoints = []string{e.Endpoint()}
	rc.HTTP.Listen = anyPort
	rc.HTTP.TrustedProxies = []config.Network{config.MustParseNetwork("127.0.0.0/8")}
	runRegional(t, &rc)
	wait.ForErr(t, "center admin API", 30*time.Second, func() error { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err })
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", path); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	conn, err := grpc.NewClient(cc.GRPC.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	admin := pb.NewAdminClient(conn)

	get := func(listen, host, client, p string) (int, string) {
		code, loc, _ := stbGet(listen, host, p, client)
		return code, loc
	}
	for _, l := range []string{cc.HTTP.Listen, rc.HTTP.Listen} {
		wait.For(t, "answers from "+l, 30*time.Second, func() bool {
			code, _ := get(l, "swrr.iptv.example", clients[0], "/warmup/index.m3u8")
			return code == http.StatusFound
		})
	}

	for _, pol := range policies {
		host := pol + ".iptv.example"
		for i, client := range clients {
			p := "/ch" + string(rune('a'+i)) + "/index.m3u8"
			for _, as := range []struct{ name, region, listen string }{{"center", "", cc.HTTP.Listen}, {rc.Region, rc.Region, rc.HTTP.Listen}} {
				x, err := admin.Explain(context.Background(), &pb.ExplainRequest{ClientIp: client, Host: host, Path: p, Region: as.region})
				if err != nil {
					t.Fatalf("%s explain as %s for %s: %v", pol, as.name, client, err)
				}
				code, loc := get(as.listen, host, client, p)
				if code != http.StatusFound {
					t.Fatalf("%s request to %s from %s: %d %s", pol, as.name, client, code, loc)
				}
				node := map[string]string{} // server address -> node, from the candidates
				for _, c := range x.GetCandidates() {
					node[c.GetAddress()] = c.GetNode()
				}
				gotNode := ""
				for addr, n := range node {
					if strings.Contains(loc, "//"+addr+"/") {
						gotNode = n
					}
				}
				switch {
				case pol == "nearest" && loc != x.GetLocation():
					t.Errorf("%s as %s, client %s: explained %s, STB sent to %s", pol, as.name, client, x.GetLocation(), loc)
				case gotNode != x.GetNode():
					t.Errorf("%s as %s, client %s: explained node %s (%s), STB sent to %s in node %q", pol, as.name, client, x.GetNode(), x.GetLocation(), loc, gotNode)
				}
			}
		}
	}
}
