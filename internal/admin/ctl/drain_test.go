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
			want: "drained server hefei-1-a (1 server): no new STBs go there\n",
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
			name: "refused by the removal guard", args: []string{"drain", "region", "hefei"},
			rpc:     map[string]handler{"Drain": fail(codes.FailedPrecondition, "refused: draining region hefei takes 3 servers out of service: a, b, c; leaves region hefei with no serving server; check, then drain with --force as admin")},
			wantErr: "schedctl drain: refused: draining region hefei takes 3 servers out of service: a, b, c; leaves region hefei with no serving server; check, then drain with --force as admin",
			sent:    drain(&pb.DrainRequest{Kind: "region", Name: "hefei"}),
		},
		{
			name: "forced past the removal guard", args: []string{"drain", "region", "hefei", "--reason", "fibre cut", "--force"},
			rpc:  map[string]handler{"Drain": reply(&pb.DrainResponse{Servers: 3, Changed: true})},
			want: "drained region hefei (3 servers): no new STBs go there\n",
			sent: drain(&pb.DrainRequest{Kind: "region", Name: "hefei", Reason: "fibre cut", Force: true}),
		},
		{
			name: "dry run the removal guard would refuse", args: []string{"drain", "region", "hefei", "--dry-run"},
			rpc: map[string]handler{"Drain": reply(&pb.DrainResponse{Servers: 3, Changed: true,
				Refused: "refused: draining region hefei takes 3 servers out of service: a, b, c; leaves region hefei with no serving server; check, then drain with --force as admin"})},
			want: "dry run, nothing changed: draining region hefei (3 servers) would send no new STBs there\n" +
				"the drain would be refused: draining region hefei takes 3 servers out of service: a, b, c; leaves region hefei with no serving server; check, then drain with --force as admin\n" +
				"no QoE plan to forecast from: the region's services select servers by something other than qoe, or none of its schedulers has planned lately\n",
			sent: drain(&pb.DrainRequest{Kind: "region", Name: "hefei", DryRun: true}),
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
		{
			name: "dry run of a server: per scheduler, and the total", args: []string{"drain", "server", "edge-1", "--dry-run"},
			rpc: map[string]handler{"Drain": reply(&pb.DrainResponse{Servers: 1, Changed: true, Forecast: []*pb.DrainForecast{
				{Region: "hefei", Instance: "center-1", Server: "edge-1", Sessions: 1, SameRung: 1, ObjectiveDelta: -0.5, Objective: 20},
				{Region: "hefei", Instance: "hefei-1", Server: "edge-1", Sessions: 37, SameRung: 30, LowerRung: 5, ToFallback: 2, ObjectiveDelta: -4.2, Objective: 512.3},
				{Region: "hefei", Instance: "hefei-2", Server: "edge-1", Objective: 80},
			}})},
			want: "dry run, nothing changed: draining server edge-1 (1 server) would send no new STBs there\n" +
				"center-1: 1 viewer on edge-1 would move: 1 at the same bitrate, 0 lower, 0 to the fallback; QoE objective -0.5 (-2.5% of 20.0)\n" +
				"hefei-1: 37 viewers on edge-1 would move: 30 at the same bitrate, 5 lower, 2 to the fallback; QoE objective -4.2 (-0.8% of 512.3)\n" +
				"hefei-2: no viewers on edge-1\n" +
				"total: 38 viewers would move: 31 at the same bitrate, 5 lower, 2 to the fallback; QoE objective -4.7 (-0.8% of 612.3)\n",
			sent: drain(&pb.DrainRequest{Kind: "server", Name: "edge-1", DryRun: true}),
		},
		{
			name: "dry run of a node, with a reason", args: []string{"drain", "node", "hefei-1", "--reason", "power work", "--dry-run"},
			rpc: map[string]handler{"Drain": reply(&pb.DrainResponse{Servers: 4, Changed: true, Forecast: []*pb.DrainForecast{
				{Region: "hefei", Instance: "hefei-1", Server: "hefei-1", Sessions: 2, LowerRung: 1, ToFallback: 1, ObjectiveDelta: 0.04},
			}})},
			want: "dry run, nothing changed: draining node hefei-1 (4 servers) would send no new STBs there\n" +
				"hefei-1: 2 viewers on node hefei-1 would move: 0 at the same bitrate, 1 lower, 1 to the fallback; QoE objective +0.0\n" +
				"total: 2 viewers would move: 0 at the same bitrate, 1 lower, 1 to the fallback; QoE objective +0.0\n",
			sent: drain(&pb.DrainRequest{Kind: "node", Name: "hefei-1", Reason: "power work", DryRun: true}),
		},
		{
			name: "dry run of a region: to the fallback, the QoE change not forecast", args: []string{"drain", "region", "hefei", "--dry-run"},
			rpc: map[string]handler{"Drain": reply(&pb.DrainResponse{Servers: 8, Changed: true, Forecast: []*pb.DrainForecast{
				{Region: "hefei", Instance: "hefei-1", Server: "hefei", Sessions: 37, ToFallback: 37, Objective: 512.3},
			}})},
			want: "dry run, nothing changed: draining region hefei (8 servers) would send no new STBs there\n" +
				"hefei-1: 37 viewers in region hefei would go to the fallback; the change of the QoE objective is not forecast for a region\n" +
				"total: 37 viewers would go to the fallback; the change of the QoE objective is not forecast for a region\n",
			sent: drain(&pb.DrainRequest{Kind: "region", Name: "hefei", DryRun: true}),
		},
		{
			name: "dry run without a QoE plan", args: []string{"drain", "server", "vod-1", "--dry-run"},
			rpc: map[string]handler{"Drain": reply(&pb.DrainResponse{Servers: 1, Changed: true})},
			want: "dry run, nothing changed: draining server vod-1 (1 server) would send no new STBs there\n" +
				"no QoE plan to forecast from: the region's services select servers by something other than qoe, or none of its schedulers has planned lately\n",
			sent: drain(&pb.DrainRequest{Kind: "server", Name: "vod-1", DryRun: true}),
		},
		{
			name: "dry run of a drained server", args: []string{"drain", "server", "edge-1", "--dry-run"},
			rpc: map[string]handler{"Drain": reply(&pb.DrainResponse{Servers: 1, Forecast: []*pb.DrainForecast{
				{Region: "hefei", Instance: "hefei-1", Server: "edge-1", Objective: 512.3},
			}})},
			want: "dry run, nothing changed: server edge-1 is already drained\n" +
				"hefei-1: no viewers on edge-1\n" +
				"total: no viewers\n",
			sent: drain(&pb.DrainRequest{Kind: "server", Name: "edge-1", DryRun: true}),
		},
		{
			name: "dry run of an unknown target", args: []string{"drain", "server", "edge-9", "--dry-run"},
			rpc:     map[string]handler{"Drain": fail(codes.NotFound, `no server named "edge-9" in topology revision 7`)},
			wantErr: `schedctl drain: no server named "edge-9" in topology revision 7`,
			sent:    drain(&pb.DrainRequest{Kind: "server", Name: "edge-9", DryRun: true}),
		},
		// Mistakes found before any RPC.
		{name: "no name", args: []string{"drain", "server"}, wantErr: "schedctl drain: want server|node|region NAME before the flags", usage: true},
		{name: "flags first", args: []string{"drain", "--reason", "x", "server", "a"}, wantErr: "schedctl drain: want server|node|region NAME before the flags", usage: true},
		{name: "unquoted reason", args: []string{"drain", "server", "hefei-1-a", "--reason", "disk", "swap"}, wantErr: `schedctl drain: unexpected argument "swap"`, usage: true},
		{name: "undrain, no target", args: []string{"undrain"}, wantErr: "schedctl undrain: want server|node|region NAME before the flags", usage: true},
		{name: "undrain takes no reason", args: []string{"undrain", "server", "a", "--reason", "x"}, wantErr: "schedctl undrain: flag provided but not defined: -reason", usage: true},
		{name: "undrain takes no dry run", args: []string{"undrain", "server", "a", "--dry-run"}, wantErr: "schedctl undrain: flag provided but not defined: -dry-run", usage: true},
		{name: "undrain, two names", args: []string{"undrain", "server", "a", "b"}, wantErr: `schedctl undrain: unexpected argument "b"`, usage: true},
	})
}
