package ctl

import (
	"testing"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
)

func TestExplain(t *testing.T) {
	decision := &pb.ExplainResponse{Revision: 7, Result: "CZ", Service: "live", Zone: "hefei-a", ClientRegion: "hefei", Region: "hefei", Node: "hefei-1",
		Server: "hefei-1-a", Address: "10.1.1.10:8080", BitrateKbps: 2500, Location: "http://10.1.1.10:8080/live/ch1",
		Steps: []string{"zone hefei-a", "nearest node hefei-1"},
		Candidates: []*pb.Candidate{
			{Server: "hefei-1-a", Node: "hefei-1", Region: "hefei", Address: "10.1.1.10:8080", DistanceKm: 2.345, Weight: 100, TopologyWeight: 100, Available: true, Chosen: true, Why: "chosen"},
			{Server: "hefei-1-b", Node: "hefei-1", Region: "hefei", Address: "10.1.1.11:8080", DistanceKm: 2.345, Weight: 50, TopologyWeight: 100, Why: "unavailable: drained: server hefei-1-b (disk swap)"},
		}}
	answers := map[string]handler{"Explain": reply(decision)}
	asked := func(req *pb.ExplainRequest) []call { return []call{{method: "Explain", req: req}} }
	stb := []string{"explain", "--client-ip", "100.64.0.9", "--host", "live.iptv.example"}
	runCases(t, []cmdCase{
		{
			name: "redirect", args: stb, rpc: answers,
			want: `revision 7: CZ -> hefei-1-a (10.1.1.10:8080) at 2500 kbps
  http://10.1.1.10:8080/live/ch1
  - zone hefei-a
  - nearest node hefei-1

SERVER     NODE     REGION  ADDRESS         KM   WEIGHT             AVAILABLE  WHY
hefei-1-a  hefei-1  hefei   10.1.1.10:8080  2.3  100                true       chosen
hefei-1-b  hefei-1  hefei   10.1.1.11:8080  2.3  50 (topology 100)  false      unavailable: drained: server hefei-1-b (disk swap)
`,
			sent: asked(&pb.ExplainRequest{ClientIp: "100.64.0.9", Host: "live.iptv.example"}),
		},
		{
			// A dual-stack STB given the other family's address.
			name: "families", args: stb,
			rpc: map[string]handler{"Explain": reply(&pb.ExplainResponse{Revision: 7, Result: "CZ", Server: "hefei-1-a", Address: "10.1.1.10:8080", BitrateKbps: 2500,
				Location: "http://10.1.1.10:8080/live/ch1", Family: "ipv6", AddressFamily: "ipv4"})},
			want: "revision 7: CZ -> hefei-1-a (10.1.1.10:8080, ipv4 for an ipv6 STB) at 2500 kbps\n  http://10.1.1.10:8080/live/ch1\n",
			sent: asked(&pb.ExplainRequest{ClientIp: "100.64.0.9", Host: "live.iptv.example"}),
		},
		{
			name: "no server", args: append(stb, "--path", "/ch1/index.m3u8", "--region", "wuhu"),
			rpc:  map[string]handler{"Explain": reply(&pb.ExplainResponse{Revision: 7, Result: "MISS", Reason: "no service for host", Steps: []string{"host live.iptv.example"}})},
			want: "revision 7: MISS: no service for host\n  - host live.iptv.example\n",
			sent: asked(&pb.ExplainRequest{ClientIp: "100.64.0.9", Host: "live.iptv.example", Path: "/ch1/index.m3u8", Region: "wuhu"}),
		},
		{
			name: "json", args: append(stb, "-o", "json"), rpc: answers, golden: "explain-json.golden",
			sent: asked(&pb.ExplainRequest{ClientIp: "100.64.0.9", Host: "live.iptv.example"}),
		},
		{
			name: "refused", args: []string{"explain", "--client-ip", "stb-1", "--host", "live.iptv.example"},
			rpc:     map[string]handler{"Explain": fail(codes.InvalidArgument, `client_ip: not an IP address: "stb-1"`)},
			wantErr: `schedctl explain: client_ip: not an IP address: "stb-1"`,
			sent:    asked(&pb.ExplainRequest{ClientIp: "stb-1", Host: "live.iptv.example"}),
		},
		// Mistakes found before any RPC.
		{name: "no host", args: []string{"explain", "--client-ip", "100.64.0.9"}, wantErr: "schedctl explain: missing --host", usage: true},
		{name: "nothing", args: []string{"explain"}, wantErr: "schedctl explain: missing --client-ip and --host", usage: true},
		{name: "yaml", args: append(stb, "-o", "yaml"), wantErr: `schedctl explain: invalid value "yaml" for flag -o: want table or json`, usage: true},
		{name: "address as an argument", args: []string{"explain", "100.64.0.9"}, wantErr: `schedctl explain: unexpected argument "100.64.0.9"`, usage: true},
	})
}
