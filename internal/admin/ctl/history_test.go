package ctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/security/signing"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestHistory(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 11, 30, 4, 0, 0, 0, time.Local))
	resp := &pb.HistoryResponse{Current: 12, Entries: []*pb.HistoryEntry{
		{Revision: 12, Digest: "0123456789abcdef", AppliedAt: at, Identity: "alice", Note: "rollback to 9: 1 server changed", Summary: &pb.TopologySummary{Servers: 400, Networks: 1000}, Kept: true},
		{Revision: 9, Digest: "fedcba9876543210", AppliedAt: at, Identity: "bob", Note: "apply: +2 servers", Summary: &pb.TopologySummary{Servers: 401, Networks: 1000}},
	}}
	runCases(t, []cmdCase{
		{
			name: "table", args: []string{"history", "--limit", "2"},
			rpc: map[string]handler{"History": reply(resp)},
			want: "current revision 12\n" +
				"REVISION  APPLIED              BY     SERVERS  NETWORKS  KEPT  DIGEST        NOTE\n" +
				"12*       2026-11-30 04:00:00  alice  400      1000      yes   0123456789ab  rollback to 9: 1 server changed\n" +
				"9         2026-11-30 04:00:00  bob    401      1000      no    fedcba987654  apply: +2 servers\n",
			sent: []call{{method: "History", req: &pb.HistoryRequest{Limit: 2}}},
		},
		{name: "negative limit", args: []string{"history", "--limit", "-1"}, wantErr: "schedctl history: --limit -1: want 0 or more", usage: true},
	})
}

func TestDiff(t *testing.T) {
	d := &pb.TopologyDiff{ServersBefore: 3, ServersAfter: 3, Sections: []*pb.DiffSection{{Kind: "servers", Changed: []*pb.DiffChange{{Name: "a", Fields: []string{"weight: 100 -> 200"}}}}}}
	text := ": 1 server changed\n  servers 3 -> 3, zone networks 0 -> 0\n  servers:\n    ~ a\n        weight: 100 -> 200\n"
	runCases(t, []cmdCase{
		{
			name: "two revisions", args: []string{"diff", "3", "5"},
			rpc:  map[string]handler{"DiffTopology": reply(&pb.DiffTopologyResponse{FromRevision: 3, ToRevision: 5, Diff: d})},
			want: "from revision 3 to revision 5" + text,
			sent: []call{{method: "DiffTopology", req: &pb.DiffTopologyRequest{FromRevision: 3, ToRevision: 5}}},
		},
		{
			name: "against the current one, flags after", args: []string{"diff", "3", "-o", "yaml"},
			rpc:  map[string]handler{"DiffTopology": reply(&pb.DiffTopologyResponse{FromRevision: 3, ToRevision: 5})},
			mask: func(s string) string { return strings.SplitN(s, "\n", 3)[0] },
			want: "from_revision: \"3\"",
			sent: []call{{method: "DiffTopology", req: &pb.DiffTopologyRequest{FromRevision: 3}}},
		},
		{
			name: "a document", args: []string{"diff", "-f", "-"}, stdin: "regions: []\n",
			rpc:  map[string]handler{"DiffTopology": reply(&pb.DiffTopologyResponse{FromRevision: 5, Diff: d})},
			want: "from revision 5 to the document" + text,
			sent: []call{{method: "DiffTopology", req: &pb.DiffTopologyRequest{Document: []byte("regions: []\n")}}},
		},
		{
			// Lists are cut for reading; the count stays right.
			name: "long lists", args: []string{"diff", "1"},
			rpc: map[string]handler{"DiffTopology": reply(&pb.DiffTopologyResponse{FromRevision: 1, ToRevision: 2, Diff: &pb.TopologyDiff{
				Sections: []*pb.DiffSection{{Kind: "networks", Added: append(names(1000), "... and 4000 more")}}}})},
			mask: func(s string) string { l := strings.Split(s, "\n"); return l[0] + "\n" + l[len(l)-2] },
			want: "from revision 1 to revision 2: +5000 networks\n    + ... and 4980 more",
			sent: []call{{method: "DiffTopology", req: &pb.DiffTopologyRequest{FromRevision: 1}}},
		},
		{name: "nothing to compare", args: []string{"diff"}, wantErr: "schedctl diff: missing REV (or -f FILE)", usage: true},
		{name: "both", args: []string{"diff", "-f", "x.yaml", "3"}, wantErr: "schedctl diff: give -f FILE or revisions, not both", usage: true},
		{name: "three revisions", args: []string{"diff", "1", "2", "3"}, wantErr: `schedctl diff: unexpected argument "3"`, usage: true},
		{name: "not a revision", args: []string{"diff", "latest"}, wantErr: `schedctl diff: "latest" is not a revision (a positive number; see schedctl history)`, usage: true},
		{
			name: "no such revision", args: []string{"diff", "2"},
			rpc:     map[string]handler{"DiffTopology": fail(codes.NotFound, "store: revision 2: no topology was applied at that revision; the kept revisions, newest first: 9, 7")},
			wantErr: "schedctl diff: store: revision 2: no topology was applied at that revision; the kept revisions, newest first: 9, 7",
			sent:    []call{{method: "DiffTopology", req: &pb.DiffTopologyRequest{FromRevision: 2}}},
		},
	})
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "n"
	}
	return out
}

func TestRollback(t *testing.T) {
	d := &pb.TopologyDiff{ServersBefore: 3, ServersAfter: 3, Sections: []*pb.DiffSection{{Kind: "servers", Changed: []*pb.DiffChange{{Name: "a", Fields: []string{"weight: 200 -> 100"}}}}}}
	planned := func(n int, req proto.Message) (proto.Message, error) {
		if req.(*pb.RollbackRequest).GetDryRun() {
			return &pb.ApplyTopologyResponse{Revision: 12, Changed: true, Diff: d}, nil
		}
		return &pb.ApplyTopologyResponse{Revision: 13, Applied: true, Changed: true, Summary: &pb.TopologySummary{Regions: 2, Nodes: 2, Servers: 3, Zones: 2, Networks: 6, Services: 2}}, nil
	}
	diffText := "changes against revision 12: 1 server changed\n  servers 3 -> 3, zone networks 0 -> 0\n  servers:\n    ~ a\n        weight: 200 -> 100\n"
	runCases(t, []cmdCase{
		{
			name: "with --yes after REV", args: []string{"rollback", "9", "--yes"},
			rpc:  map[string]handler{"Rollback": planned},
			want: diffText + "rolled back to 9 as revision 13: 2 regions, 2 nodes, 3 servers, 2 zones (6 networks), 2 services\n",
			sent: []call{
				{method: "Rollback", req: &pb.RollbackRequest{Revision: 9, DryRun: true}},
				{method: "Rollback", req: &pb.RollbackRequest{Revision: 9, BaseRevision: 12}},
			},
		},
		{
			name: "dry run", args: []string{"rollback", "--dry-run", "--force", "9"},
			rpc:  map[string]handler{"Rollback": planned},
			want: diffText,
			sent: []call{{method: "Rollback", req: &pb.RollbackRequest{Revision: 9, DryRun: true, Force: true}}},
		},
		{
			name: "no terminal, no --yes", args: []string{"rollback", "9"},
			rpc:     map[string]handler{"Rollback": planned},
			want:    diffText,
			wantErr: "schedctl rollback: not applied: no terminal to confirm on; check the diff above and pass --yes",
			sent:    []call{{method: "Rollback", req: &pb.RollbackRequest{Revision: 9, DryRun: true}}},
		},
		{
			name: "an operator", args: []string{"rollback", "9", "--yes"},
			rpc:     map[string]handler{"Rollback": fail(codes.PermissionDenied, "/anysched.v1.Admin/Rollback needs the admin role")},
			wantErr: "schedctl rollback: ...",
			sent:    []call{{method: "Rollback", req: &pb.RollbackRequest{Revision: 9, DryRun: true}}},
		},
		{name: "no REV", args: []string{"rollback", "--yes"}, wantErr: "schedctl rollback: missing REV (see schedctl history)", usage: true},
		{name: "two REVs", args: []string{"rollback", "9", "10"}, wantErr: `schedctl rollback: unexpected argument "10"`, usage: true},
	})
}

func TestKeygen(t *testing.T) {
	out := filepath.Join(t.TempDir(), "keys", "topology.key")
	runCases(t, []cmdCase{
		{name: "writes a pair", args: []string{"keygen", "--signing", out}, mask: func(s string) string { return s[:7] + s[23:] },
			want: "key id \nprivate key: " + out + " (apply.signing_key_file of the center; keep it 0600)\npublic key:  " + out + ".pub (snapshot.trusted_keys of every daemon)\n"},
		{name: "never overwrites", args: []string{"keygen", "--signing", out}, wantErr: "schedctl keygen: signing: open " + out + ": file exists"},
		{name: "no file", args: []string{"keygen"}, wantErr: "schedctl keygen: missing --signing FILE", usage: true},
	})
	if info, err := os.Stat(out); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("private key: %v, %v", info, err)
	}
	if _, err := signing.LoadVerifier([]string{out + ".pub"}); err != nil {
		t.Fatal(err)
	}
}
