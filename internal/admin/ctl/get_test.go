package ctl

import (
	"os"
	"testing"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
)

func TestGet(t *testing.T) {
	doc, err := os.ReadFile("testdata/topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]handler{"GetTopology": reply(&pb.GetTopologyResponse{Revision: 7, Document: doc})}
	got := []call{{method: "GetTopology", req: &pb.GetTopologyRequest{}}}
	weighed := map[string]handler{"GetTopology": stored["GetTopology"], "GetBalance": reply(&pb.BalanceResponse{Weights: []*pb.ServerWeight{
		{Server: "hefei-1-a", Topology: 100, Effective: 60, Why: "swrr: balance weights override"},
		{Server: "wuhu-1-a", Topology: 100, Effective: 37.5, Why: "swrr: slow start, adaptive weights or failures"},
		{Server: "wuhu-1-a", Topology: 100, Effective: 10, Why: "p2c: slow start, adaptive weights or failures"},
	}})}
	gotWeights := append(got, call{method: "GetBalance", req: &pb.GetBalanceRequest{}})
	runCases(t, []cmdCase{
		// The whole document prints as stored (an edit starts from it),
		// except as JSON.
		{name: "topology", args: []string{"get", "topology"}, rpc: stored, want: string(doc), sent: got},
		{name: "topology yaml", args: []string{"get", "topology", "-o", "yaml"}, rpc: stored, want: string(doc), sent: got},
		{name: "topology json", args: []string{"get", "topology", "-o", "json"}, rpc: stored, golden: "get-topology-json.golden", sent: got},
		// Sections: a table with defaults filled in (weight 100, selection
		// nearest, 4 networks at most), then the revision.
		{name: "regions", args: []string{"get", "regions"}, rpc: stored, golden: "get-regions.golden", sent: got},
		{name: "regions yaml", args: []string{"get", "regions", "-o", "yaml"}, rpc: stored, golden: "get-regions-yaml.golden", sent: got},
		{name: "nodes", args: []string{"get", "nodes", "-o", "table"}, rpc: stored, golden: "get-nodes.golden", sent: got},
		// Servers with the effective weights the center's policies use
		// where they differ from the topology's.
		{name: "servers", args: []string{"get", "servers"}, rpc: weighed, golden: "get-servers.golden", sent: gotWeights},
		{name: "servers json", args: []string{"get", "servers", "-o", "json"}, rpc: weighed, golden: "get-servers-json.golden", sent: gotWeights},
		{name: "servers yaml", args: []string{"get", "servers", "-o", "yaml"}, rpc: weighed, golden: "get-servers-yaml.golden", sent: gotWeights},
		// A center that cannot say (older, or failing): the topology's
		// weights, and a word on stderr.
		{name: "servers without weights", args: []string{"get", "servers"}, rpc: stored, golden: "get-servers-topology.golden", sent: gotWeights},
		{name: "zones", args: []string{"get", "zones"}, rpc: stored, golden: "get-zones.golden", sent: got},
		{name: "zones json", args: []string{"get", "zones", "-o", "json"}, rpc: stored, golden: "get-zones-json.golden", sent: got},
		{name: "services", args: []string{"get", "services"}, rpc: stored, golden: "get-services.golden", sent: got},
		{name: "empty section", args: []string{"get", "services"}, rpc: map[string]handler{"GetTopology": reply(&pb.GetTopologyResponse{Revision: 2, Document: []byte("regions: []\n")})},
			want: "NAME  HOSTNAMES  SELECTION  BITRATES_KBPS\nrevision 2\n", sent: got},
		{name: "unreadable document", args: []string{"get", "regions"}, rpc: map[string]handler{"GetTopology": reply(&pb.GetTopologyResponse{Revision: 2, Document: []byte("regions: 3\n")})},
			wantErr: "schedctl get: the server sent a document this schedctl cannot read: regions: ...", sent: got},
		{name: "api error", args: []string{"get", "nodes"}, rpc: map[string]handler{"GetTopology": fail(codes.NotFound, "no topology applied yet")},
			wantErr: "schedctl get: no topology applied yet", sent: got},
		// Mistakes found before any RPC.
		{name: "nothing", args: []string{"get"}, wantErr: "schedctl get: get what? topology, regions, nodes, servers, zones or services", usage: true},
		{name: "flags first", args: []string{"get", "-o", "json", "zones"}, rpc: stored, golden: "get-zones-json.golden", sent: got},
		{name: "only flags", args: []string{"get", "-o", "json"}, wantErr: "schedctl get: get what? topology, regions, nodes, servers, zones or services", usage: true},
		{name: "unknown section", args: []string{"get", "server"}, wantErr: `schedctl get: cannot get "server": want topology, regions, nodes, servers, zones or services`, usage: true},
		{name: "unknown format", args: []string{"get", "nodes", "-o", "wide"}, wantErr: `schedctl get: invalid value "wide" for flag -o: want table, yaml or json`, usage: true},
		{name: "two sections", args: []string{"get", "nodes", "zones"}, wantErr: `schedctl get: unexpected argument "zones"`, usage: true},
	})
}
