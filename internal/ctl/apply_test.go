package ctl

import (
	"os"
	"path/filepath"
	"testing"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
)

func TestApply(t *testing.T) {
	doc, err := os.ReadFile("testdata/topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, []byte("\n  \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	summary := &pb.TopologySummary{Regions: 2, Nodes: 2, Servers: 3, Zones: 2, Networks: 6, Services: 2}
	applied := func(req *pb.ApplyTopologyRequest) []call { return []call{{method: "ApplyTopology", req: req}} }
	runCases(t, []cmdCase{
		{
			name: "applied", args: []string{"apply", "-f", "testdata/topology.yaml"},
			rpc:  map[string]handler{"ApplyTopology": reply(&pb.ApplyTopologyResponse{Revision: 8, Applied: true, Changed: true, Summary: summary})},
			want: "applied revision 8: 2 regions, 2 nodes, 3 servers, 2 zones (6 networks), 2 services\n",
			sent: applied(&pb.ApplyTopologyRequest{Document: doc}),
		},
		{
			name: "unchanged", args: []string{"apply", "-f", "testdata/topology.yaml"},
			rpc:  map[string]handler{"ApplyTopology": reply(&pb.ApplyTopologyResponse{Revision: 7, Summary: summary})},
			want: "unchanged: revision 7 already holds this topology\n",
			sent: applied(&pb.ApplyTopologyRequest{Document: doc}),
		},
		{
			name: "dry run, would change", args: []string{"apply", "--dry-run", "-f", "testdata/topology.yaml"},
			rpc:  map[string]handler{"ApplyTopology": reply(&pb.ApplyTopologyResponse{Revision: 6, Changed: true, Summary: summary})},
			want: "valid: 2 regions, 2 nodes, 3 servers, 2 zones (6 networks), 2 services; would replace revision 6\n",
			sent: applied(&pb.ApplyTopologyRequest{Document: doc, DryRun: true}),
		},
		{
			name: "dry run, identical", args: []string{"apply", "-f", "testdata/topology.yaml", "--dry-run"},
			rpc:  map[string]handler{"ApplyTopology": reply(&pb.ApplyTopologyResponse{Revision: 6, Summary: summary})},
			want: "valid: 2 regions, 2 nodes, 3 servers, 2 zones (6 networks), 2 services; identical to revision 6\n",
			sent: applied(&pb.ApplyTopologyRequest{Document: doc, DryRun: true}),
		},
		{
			name: "forced, from a base revision", args: []string{"apply", "--force", "--base-revision", "5", "-f", "testdata/topology.yaml"},
			rpc:  map[string]handler{"ApplyTopology": reply(&pb.ApplyTopologyResponse{Revision: 9, Applied: true, Summary: summary})},
			want: "applied revision 9: 2 regions, 2 nodes, 3 servers, 2 zones (6 networks), 2 services\n",
			sent: applied(&pb.ApplyTopologyRequest{Document: doc, Force: true, BaseRevision: 5}),
		},
		{
			name: "standard input", args: []string{"apply", "-f", "-"}, stdin: "regions: []\n",
			rpc:  map[string]handler{"ApplyTopology": reply(&pb.ApplyTopologyResponse{Revision: 3, Applied: true})},
			want: "applied revision 3: 0 regions, 0 nodes, 0 servers, 0 zones (0 networks), 0 services\n",
			sent: applied(&pb.ApplyTopologyRequest{Document: []byte("regions: []\n")}),
		},
		{
			name: "rejected, every problem on its line", args: []string{"apply", "-f", "testdata/topology.yaml"},
			rpc: map[string]handler{"ApplyTopology": badRequest("topology rejected: 3 problem(s), nothing was applied",
				"nodes[0].servers[0].weight", "must be positive (line 12)", "regions[0].location.lat", "131.82 is not a latitude (line 7)", "", "... and 1 more")},
			wantErr: "schedctl apply: topology rejected: 3 problem(s), nothing was applied\n" +
				"  nodes[0].servers[0].weight: must be positive (line 12)\n" +
				"  regions[0].location.lat: 131.82 is not a latitude (line 7)\n" +
				"  ... and 1 more",
			sent: applied(&pb.ApplyTopologyRequest{Document: doc}),
		},
		{
			name: "stale", args: []string{"apply", "-f", "testdata/topology.yaml"},
			rpc:     map[string]handler{"ApplyTopology": fail(codes.FailedPrecondition, "the document is based on revision 7 but the store is at revision 9")},
			wantErr: "schedctl apply: the document is based on revision 7 but the store is at revision 9",
			sent:    applied(&pb.ApplyTopologyRequest{Document: doc}),
		},
		// Mistakes found before any RPC.
		{name: "no -f", args: []string{"apply", "--dry-run"}, wantErr: "schedctl apply: missing -f FILE", usage: true},
		{name: "-f without a value", args: []string{"apply", "-f"}, wantErr: "schedctl apply: flag needs an argument: -f", usage: true},
		{name: "file as an argument", args: []string{"apply", "topology.yaml"}, wantErr: `schedctl apply: unexpected argument "topology.yaml"`, usage: true},
		{name: "second file", args: []string{"apply", "-f", "testdata/topology.yaml", "other.yaml"}, wantErr: `schedctl apply: unexpected argument "other.yaml"`, usage: true},
		{name: "bad base revision", args: []string{"apply", "-f", "testdata/topology.yaml", "--base-revision", "latest"},
			wantErr: `schedctl apply: invalid value "latest" for flag -base-revision: parse error`, usage: true},
		{name: "missing file", args: []string{"apply", "-f", "testdata/missing.yaml"}, wantErr: "schedctl apply: -f: open testdata/missing.yaml: no such file or directory"},
		{name: "directory", args: []string{"apply", "-f", "testdata"}, wantErr: "schedctl apply: -f: read testdata: is a directory"},
		{name: "empty file", args: []string{"apply", "-f", empty}, wantErr: "schedctl apply: -f " + empty + ": the document is empty"},
		{name: "empty standard input", args: []string{"apply", "-f", "-"}, wantErr: "schedctl apply: -f -: the document is empty"},
	})
}
