package ctl

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

var (
	applySummary = &pb.TopologySummary{Regions: 2, Nodes: 2, Servers: 3, Zones: 2, Networks: 6, Services: 2}
	applyDiff    = &pb.TopologyDiff{
		ServersBefore: 3, ServersAfter: 3, NetworksBefore: 6, NetworksAfter: 6,
		Sections: []*pb.DiffSection{
			{Kind: "servers", Added: []string{"hefei-1-c"}, Removed: []string{"hefei-1-b"}, Changed: []*pb.DiffChange{{Name: "hefei-1-a", Fields: []string{"bandwidth_mbps: 1000 -> 2000"}}}},
			{Kind: "zones", Changed: []*pb.DiffChange{{Name: "hefei-a", Fields: []string{"networks: +1 -1"}}}},
		},
	}
	applyDiffText = "changes against revision 7: +1 server, -1 server, 1 server changed, 1 zone changed\n" +
		"  servers 3 -> 3, zone networks 6 -> 6\n" +
		"  servers:\n" +
		"    - hefei-1-b\n" +
		"    + hefei-1-c\n" +
		"    ~ hefei-1-a\n" +
		"        bandwidth_mbps: 1000 -> 2000\n" +
		"  zones:\n" +
		"    ~ hefei-a\n" +
		"        networks: +1 -1\n"
)

// plan answers the dry run with a diff against revision 7, then the apply.
func plan(applied *pb.ApplyTopologyResponse) handler {
	return func(n int, req proto.Message) (proto.Message, error) {
		if req.(*pb.ApplyTopologyRequest).GetDryRun() {
			return &pb.ApplyTopologyResponse{Revision: 7, Changed: true, Summary: applySummary, Diff: applyDiff}, nil
		}
		return applied, nil
	}
}

func TestApply(t *testing.T) {
	doc, err := os.ReadFile("testdata/topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, []byte("\n  \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dryRun := call{method: "ApplyTopology", req: &pb.ApplyTopologyRequest{Document: doc, DryRun: true}}
	refusal, _ := status.New(codes.FailedPrecondition, "refused: the change removes every node (2); check the diff, then apply with --force as admin").WithDetails(
		&pb.TopologyDiff{ServersBefore: 3, NetworksBefore: 6, NetworksAfter: 6, EmptiedRegions: []string{"hefei", "wuhu"},
			Sections: []*pb.DiffSection{{Kind: "nodes", Removed: []string{"hefei-1", "wuhu-1"}}, {Kind: "servers", Removed: []string{"hefei-1-a", "hefei-1-b", "wuhu-1-a"}}}})
	runCases(t, []cmdCase{
		{
			name: "applied with --yes, guarded by the revision the diff was made against", args: []string{"apply", "--yes", "-f", "testdata/topology.yaml"},
			rpc:  map[string]handler{"ApplyTopology": plan(&pb.ApplyTopologyResponse{Revision: 8, Applied: true, Changed: true, Summary: applySummary})},
			want: applyDiffText + "applied revision 8: 2 regions, 2 nodes, 3 servers, 2 zones (6 networks), 2 services\n",
			sent: []call{dryRun, {method: "ApplyTopology", req: &pb.ApplyTopologyRequest{Document: doc, BaseRevision: 7}}},
		},
		{
			// The finding: a script's apply used to go through unseen.
			name: "no terminal, no --yes: refused after the diff", args: []string{"apply", "-f", "testdata/topology.yaml"},
			rpc:     map[string]handler{"ApplyTopology": plan(nil)},
			want:    applyDiffText,
			wantErr: "schedctl apply: not applied: no terminal to confirm on; check the diff above and pass --yes",
			sent:    []call{dryRun},
		},
		{
			name: "unchanged: nothing to confirm", args: []string{"apply", "-f", "testdata/topology.yaml"},
			rpc:  map[string]handler{"ApplyTopology": reply(&pb.ApplyTopologyResponse{Revision: 7, Summary: applySummary, Diff: &pb.TopologyDiff{ServersBefore: 3, ServersAfter: 3}})},
			want: "changes against revision 7: no change\nunchanged: revision 7 already holds this topology\n",
			sent: []call{dryRun},
		},
		{
			name: "dry run, would change", args: []string{"apply", "--dry-run", "-f", "testdata/topology.yaml"},
			rpc:  map[string]handler{"ApplyTopology": plan(nil)},
			want: applyDiffText + "valid: 2 regions, 2 nodes, 3 servers, 2 zones (6 networks), 2 services; would replace revision 7\n",
			sent: []call{dryRun},
		},
		{
			name: "dry run, identical", args: []string{"apply", "-f", "testdata/topology.yaml", "--dry-run"},
			rpc:  map[string]handler{"ApplyTopology": reply(&pb.ApplyTopologyResponse{Revision: 6, Summary: applySummary})},
			want: "changes against revision 6: no change\nvalid: 2 regions, 2 nodes, 3 servers, 2 zones (6 networks), 2 services; identical to revision 6\n",
			sent: []call{dryRun},
		},
		{
			name: "first apply", args: []string{"apply", "--dry-run", "-f", "-"}, stdin: "regions: []\n",
			rpc:  map[string]handler{"ApplyTopology": reply(&pb.ApplyTopologyResponse{Changed: true})},
			want: "changes (nothing applied yet): no change\nvalid: 0 regions, 0 nodes, 0 servers, 0 zones (0 networks), 0 services; would replace revision 0\n",
			sent: []call{{method: "ApplyTopology", req: &pb.ApplyTopologyRequest{Document: []byte("regions: []\n"), DryRun: true}}},
		},
		{
			name: "forced, from a base revision, with the guard's warning", args: []string{"apply", "--yes", "--force", "--base-revision", "5", "-f", "testdata/topology.yaml"},
			rpc: map[string]handler{"ApplyTopology": func(n int, req proto.Message) (proto.Message, error) {
				return &pb.ApplyTopologyResponse{Revision: int64(9 + n), Applied: n == 1, Changed: true, Summary: applySummary, Warnings: []string{"forced past the removal guard: removes 2 of 3 servers (66.7% > 20%)"}}, nil
			}},
			want: "changes against revision 9: no change\nwarning: forced past the removal guard: removes 2 of 3 servers (66.7% > 20%)\napplied revision 10: 2 regions, 2 nodes, 3 servers, 2 zones (6 networks), 2 services\n",
			sent: []call{
				{method: "ApplyTopology", req: &pb.ApplyTopologyRequest{Document: doc, DryRun: true, Force: true, BaseRevision: 5}},
				{method: "ApplyTopology", req: &pb.ApplyTopologyRequest{Document: doc, Force: true, BaseRevision: 5}},
			},
		},
		{
			name: "refused by the removal guard: the refused diff, then why", args: []string{"apply", "--yes", "-f", "testdata/topology.yaml"},
			rpc: map[string]handler{"ApplyTopology": func(int, proto.Message) (proto.Message, error) { return nil, refusal.Err() }},
			want: "refused change: -2 nodes, -3 servers\n  servers 3 -> 0, zone networks 6 -> 6\n  nodes:\n    - hefei-1\n    - wuhu-1\n  servers:\n    - hefei-1-a\n    - hefei-1-b\n    - wuhu-1-a\n" +
				"  regions left with no server: hefei, wuhu\n",
			wantErr: "schedctl apply: refused: the change removes every node (2); check the diff, then apply with --force as admin",
			sent:    []call{dryRun},
		},
		{
			name: "json", args: []string{"apply", "--yes", "-o", "json", "-f", "testdata/topology.yaml"},
			rpc:  map[string]handler{"ApplyTopology": plan(&pb.ApplyTopologyResponse{Revision: 8, Applied: true, Changed: true})},
			mask: func(s string) string { return strings.Join(strings.Fields(s), " ") },
			want: `{ "revision": "7", "applied": false, "summary": { "regions": 2, "nodes": 2, "servers": 3, "zones": 2, "networks": 6, "services": 2, "digest": "" }, "changed": true, "diff": { "sections": [ { "kind": "servers", "added": [ "hefei-1-c" ], "removed": [ "hefei-1-b" ], "changed": [ { "name": "hefei-1-a", "fields": [ "bandwidth_mbps: 1000 -> 2000" ] } ] }, { "kind": "zones", "added": [], "removed": [], "changed": [ { "name": "hefei-a", "fields": [ "networks: +1 -1" ] } ] } ], "servers_before": 3, "servers_after": 3, "networks_before": 6, "networks_after": 6, "emptied_regions": [] }, "warnings": [] } ` +
				`{ "revision": "8", "applied": true, "summary": null, "changed": true, "diff": null, "warnings": [] }`,
			sent: []call{dryRun, {method: "ApplyTopology", req: &pb.ApplyTopologyRequest{Document: doc, BaseRevision: 7}}},
		},
		{
			name: "rejected, every problem on its line", args: []string{"apply", "-f", "testdata/topology.yaml"},
			rpc: map[string]handler{"ApplyTopology": badRequest("topology rejected: 3 problem(s), nothing was applied",
				"nodes[0].servers[0].weight", "must be positive (line 12)", "regions[0].location.lat", "131.82 is not a latitude (line 7)", "", "... and 1 more")},
			wantErr: "schedctl apply: topology rejected: 3 problem(s), nothing was applied\n" +
				"  nodes[0].servers[0].weight: must be positive (line 12)\n" +
				"  regions[0].location.lat: 131.82 is not a latitude (line 7)\n" +
				"  ... and 1 more",
			sent: []call{dryRun},
		},
		{
			name: "stale", args: []string{"apply", "-f", "testdata/topology.yaml"},
			rpc:     map[string]handler{"ApplyTopology": fail(codes.FailedPrecondition, "the document is based on revision 7 but the store is at revision 9")},
			wantErr: "schedctl apply: the document is based on revision 7 but the store is at revision 9",
			sent:    []call{dryRun},
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

// On a terminal apply asks, and only "y" applies.
func TestApplyConfirmsOnATerminal(t *testing.T) {
	for _, c := range []struct {
		answer  string
		applied bool
	}{{"y\n", true}, {"yes\n", true}, {"n\n", false}, {"\n", false}, {"", false}} {
		f := &fakeAdmin{handlers: map[string]handler{"ApplyTopology": plan(&pb.ApplyTopologyResponse{Revision: 8, Applied: true, Summary: applySummary})}}
		var out, errOut bytes.Buffer
		e := testEnv(f, &out, &errOut)
		e.stdin = strings.NewReader(c.answer)
		e.isTerminal = func() bool { return true }
		err := run(context.Background(), []string{"apply", "-f", "testdata/topology.yaml"}, e)
		if got := errOut.String(); got != "apply this change over revision 7? [y/N] " {
			t.Errorf("%q: prompt %q", c.answer, got)
		}
		if applied := len(f.sent()) == 2; applied != c.applied || (err == nil) != c.applied {
			t.Errorf("answer %q: %d calls, %v; want applied %v", c.answer, len(f.sent()), err, c.applied)
		}
		if !c.applied && (err == nil || !strings.Contains(err.Error(), "not confirmed: nothing was changed")) {
			t.Errorf("answer %q: %v", c.answer, err)
		}
	}
}
