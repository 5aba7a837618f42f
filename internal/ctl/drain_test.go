package ctl

import (
	"testing"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
)

func TestDrain(t *testing.T) {
	drain := func(req *pb.DrainRequest) []call { return []call{{method: "Drain", req: req}} }
	undrain := func(req *pb.UndrainRequest) []call { return []call{{method: "Undrain", req: req}} }
	runCases(t, []cmdCase{
		{
			name: "drain a server", args: []string{"drain", "server", "hefei-1-a", "--reason", "disk swap"},
			rpc:  map[string]handler{"Drain": reply(&pb.DrainResponse{Servers: 1, Changed: true})},
			want: "drained server hefei-1-a (1 servers): no new STBs go there\n",
			sent: drain(&pb.DrainRequest{Kind: "server", Name: "hefei-1-a", Reason: "disk swap"}),
		},
		{
			name: "already drained", args: []string{"drain", "node", "hefei-1"},
			rpc:  map[string]handler{"Drain": reply(&pb.DrainResponse{Servers: 4})},
			want: "node hefei-1 was already drained\n",
			sent: drain(&pb.DrainRequest{Kind: "node", Name: "hefei-1"}),
		},
		{
			name: "unknown target", args: []string{"drain", "region", "hefie"},
			rpc:     map[string]handler{"Drain": fail(codes.NotFound, `region "hefie" is not in revision 7`)},
			wantErr: `schedctl drain: region "hefie" is not in revision 7`,
			sent:    drain(&pb.DrainRequest{Kind: "region", Name: "hefie"}),
		},
		{
			name: "undrain", args: []string{"undrain", "region", "hefei"},
			rpc:  map[string]handler{"Undrain": reply(&pb.DrainResponse{Servers: 8, Changed: true})},
			want: "undrained region hefei (8 servers)\n",
			sent: undrain(&pb.UndrainRequest{Kind: "region", Name: "hefei"}),
		},
		{
			name: "undrain, not drained", args: []string{"undrain", "server", "hefei-1-a"},
			rpc:  map[string]handler{"Undrain": reply(&pb.DrainResponse{Servers: 1})},
			want: "server hefei-1-a was not drained\n",
			sent: undrain(&pb.UndrainRequest{Kind: "server", Name: "hefei-1-a"}),
		},
		// Mistakes found before any RPC.
		{name: "no name", args: []string{"drain", "server"}, wantErr: "schedctl drain: want server|node|region NAME before the flags", usage: true},
		{name: "flags first", args: []string{"drain", "--reason", "x", "server", "a"}, wantErr: "schedctl drain: want server|node|region NAME before the flags", usage: true},
		{name: "unquoted reason", args: []string{"drain", "server", "hefei-1-a", "--reason", "disk", "swap"}, wantErr: `schedctl drain: unexpected argument "swap"`, usage: true},
		{name: "undrain, no target", args: []string{"undrain"}, wantErr: "schedctl undrain: want server|node|region NAME before the flags", usage: true},
		{name: "undrain takes no reason", args: []string{"undrain", "server", "a", "--reason", "x"}, wantErr: "schedctl undrain: flag provided but not defined: -reason", usage: true},
		{name: "undrain, two names", args: []string{"undrain", "server", "a", "b"}, wantErr: `schedctl undrain: unexpected argument "b"`, usage: true},
	})
}
