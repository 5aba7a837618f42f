package ctl

import (
	"strings"
	"testing"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestAudit(t *testing.T) {
	entries := &pb.AuditResponse{Entries: []*pb.AuditEntry{
		{At: timestamppb.New(t0), Identity: "otto", Role: "operator", Peer: "172.16.0.9:51000", Method: "/anysched.v1.Admin/Drain", Target: "region/hefei", Code: "OK", Detail: "disk swap"},
		{At: timestamppb.New(t0.Add(-time.Minute)), Identity: "vera", Role: "viewer", Peer: "172.16.0.7:41000", Method: "/anysched.v1.Admin/ApplyTopology", Code: "PermissionDenied", Message: "needs the operator role"},
	}}
	local := func(ts time.Time) string { return ts.Local().Format(time.DateTime) }
	runCases(t, []cmdCase{
		{
			name: "table", args: []string{"audit", "--limit", "2", "--since", "1h"},
			rpc: map[string]handler{"Audit": reply(entries)},
			want: "AT                   IDENTITY  ROLE      PEER              METHOD         TARGET        CODE              REVISION  DETAIL\n" +
				local(t0) + "  otto      operator  172.16.0.9:51000  Drain          region/hefei  OK                -         disk swap\n" +
				local(t0.Add(-time.Minute)) + "  vera      viewer    172.16.0.7:41000  ApplyTopology  -             PermissionDenied  -         needs the operator role\n",
			sent: []call{{method: "Audit", req: &pb.AuditRequest{Limit: 2, Since: timestamppb.New(t0.Add(-time.Hour))}}},
		},
		{
			name: "json", args: []string{"audit", "-o", "json"},
			rpc:  map[string]handler{"Audit": reply(&pb.AuditResponse{})},
			want: "{\n  \"entries\": []\n}\n",
			sent: []call{{method: "Audit", req: &pb.AuditRequest{Limit: 50}}},
		},
		{
			name: "denied", args: []string{"audit"},
			rpc:     map[string]handler{"Audit": fail(codes.PermissionDenied, "no anysched role in the client certificate of CN=eve")},
			wantErr: "schedctl audit: permission denied: no anysched role in the client certificate of CN=eve",
			sent:    []call{{method: "Audit", req: &pb.AuditRequest{Limit: 50}}},
		},
		{name: "bad limit", args: []string{"audit", "--limit", "0"}, wantErr: "schedctl audit: --limit 0: want at least 1", usage: true},
	})
}

func TestWhoAmI(t *testing.T) {
	runCases(t, []cmdCase{
		{
			name: "table", args: []string{"whoami"},
			rpc:  map[string]handler{"WhoAmI": reply(&pb.WhoAmIResponse{Identity: "ada", Role: "admin", Peer: "172.16.0.9:51000"})},
			want: "identity: ada\nrole:     admin\npeer:     172.16.0.9:51000\n",
			sent: []call{{method: "WhoAmI", req: &pb.WhoAmIRequest{}}},
		},
		{
			name: "unauthenticated", args: []string{"whoami"},
			rpc:     map[string]handler{"WhoAmI": fail(codes.Unauthenticated, "no verified client certificate")},
			wantErr: "schedctl whoami: not authenticated: no verified client certificate\n(the admin API wants a client certificate: --tls-ca, --tls-cert, --tls-key)",
			sent:    []call{{method: "WhoAmI", req: &pb.WhoAmIRequest{}}},
		},
	})
}

// TestPermissionDeniedReads: a refused change says so first.
func TestPermissionDeniedReads(t *testing.T) {
	err := wrap("apply", status.Error(codes.PermissionDenied, "/anysched.v1.Admin/ApplyTopology needs the operator role; CN=vera has the viewer role"))
	if want := "schedctl apply: permission denied: /anysched.v1.Admin/ApplyTopology needs the operator role; CN=vera has the viewer role"; err == nil || err.Error() != want {
		t.Errorf("%v\nwant %s", err, want)
	}
	if !strings.HasPrefix(err.Error(), "schedctl apply: ") {
		t.Error(err)
	}
}
