package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/statusview"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"gopkg.in/yaml.v3"
)

// province is a Status answer with every section: two centers (one
// answering live, one from its record), a regional scheduler behind and
// withdrawn with a QoE plan, health, a checker and a drain; at t0.
func province() *pb.StatusResponse {
	ago := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(-d)) }
	return &pb.StatusResponse{
		Revision: 7, CenterId: "center-1", Digest: "5f3a9c0d1e2b4a6f8c7d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d", Epoch: t0.Add(-24 * time.Hour).UnixNano(),
		CenterTraffic: []*pb.RegionTraffic{{ClientRegion: "wuhu", Answered: 12, Failed: 1, RunStart: ago(time.Minute), Last: ago(1500 * time.Millisecond)}},
		Instances: []*pb.Instance{
			{Id: "center-1", Role: "central", Version: "v1.2.3", SnapshotRevision: 7, SnapshotDigest: "5f3a9c0d1e2b4a6f8c7d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d", State: "ready", StartedAt: ago(90 * time.Second), SnapshotAgeSeconds: 0.25,
				Announced: true, Announces: "198.18.0.0/26",
				BgpPeers: []*pb.BGPPeer{{Address: "10.0.0.1", Asn: 64512, State: "established"}, {Address: "10.0.0.2", Asn: 64513, State: "active"}},
				Traffic:  []*pb.RegionTraffic{{ClientRegion: "wuhu", Answered: 1, Last: ago(time.Hour)}}}, // stale: the live count wins
			{Id: "center-2", Role: "central", Version: "v1.2.3", SnapshotRevision: 7, State: "ready", StartedAt: ago(2 * time.Hour), AnnounceReason: "announce.mode none",
				Traffic:  []*pb.RegionTraffic{{ClientRegion: "hefei", Answered: 3, Last: ago(10 * time.Second)}},
				Planning: []*pb.QoEPlan{{Region: "wuhu", Sessions: 12, Planned: 12, Objective: 40.5, Gap: 0.004, AgeSeconds: 0.5, AtDesired: 1, CapacityKbps: 20000, HeldKbps: 18000}}},
			{Id: "hefei-1", Role: "regional", Region: "hefei", Version: "v1.2.2", SnapshotRevision: 6, SnapshotDigest: "0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e", State: "stale", StartedAt: ago(3 * time.Minute), SnapshotAgeSeconds: 12.34,
				AnnounceReason: "snapshot stale",
				Qoe: &pb.QoEPlan{Sessions: 40, Planned: 38, Fallback: 2, Objective: 123.456, Gap: 0.0123, AgeSeconds: 1.5, Peers: 1,
					Starved: 2, AtDesired: 0.75, HeldKbps: 4250, CapacityKbps: 90000, SafeMode: true}},
		},
		Regions:  []*pb.RegionHealth{{Region: "hefei", Servers: 2, Healthy: 1, Unhealthy: 1, Available: 1}, {Region: "wuhu", Servers: 1, Drained: 1, PanicNodes: 1, Unchecked: 1}},
		Checkers: []*pb.CheckerStatus{{Id: "chk-1", Region: "hefei", Targets: 2, StartedAt: ago(time.Hour)}},
		Drains:   []*pb.DrainEntry{{Kind: "server", Name: "wuhu-1-a", Reason: "disk swap", At: timestamppb.New(time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC))}},
		// A cluster out of space: one member unreachable, live data over
		// what the housekeeper can recover.
		Etcd: &pb.EtcdStatus{ObservedAt: ago(time.Second), Leading: true, Revision: 912345, CompactedRevision: 912345, LastCompaction: ago(time.Second),
			Members: []*pb.EtcdMember{
				{Name: "etcd-1", Endpoint: "https://10.0.10.11:2379", Leader: true, DbSizeBytes: 4294963200, DbSizeInUseBytes: 3865470566, QuotaBytes: 4 << 30},
				{Name: "etcd-2", Endpoint: "https://10.0.10.12:2379", DbSizeBytes: 4294963200, DbSizeInUseBytes: 3865470566, QuotaBytes: 4 << 30},
				{Name: "etcd-3", Endpoint: "https://10.0.10.13:2379", Error: "context deadline exceeded"},
			},
			Alarms:   []*pb.EtcdAlarm{{Member: "etcd-1", Alarm: "NOSPACE"}, {Member: "etcd-2", Alarm: "NOSPACE"}},
			Problems: []string{"etcd is out of space (NOSPACE) and its live data fills it: ... member=etcd-1 db_size_bytes=3865470566 quota_bytes=4294967296"}},
	}
}

func TestStatus(t *testing.T) {
	asked := []call{{method: "Status", req: &pb.StatusRequest{}}}
	full := map[string]handler{"Status": reply(province())}
	runCases(t, []cmdCase{
		{name: "table", args: []string{"status"}, rpc: full, golden: "status.golden", sent: asked},
		{name: "json", args: []string{"status", "-o", "json"}, rpc: full, golden: "status-json.golden", sent: asked},
		{name: "yaml", args: []string{"status", "-o", "yaml"}, rpc: full, golden: "status-yaml.golden", sent: asked},
		{name: "nothing registered", args: []string{"status"}, rpc: map[string]handler{"Status": reply(&pb.StatusResponse{Revision: 3})},
			want: "topology revision 3, digest -, 0 scheduler instance(s)\nINSTANCE  ROLE  REGION  STATE  REVISION  DIGEST  SNAPSHOT_AGE  ROUTE  BGP  UPTIME  VERSION\n", sent: asked},
		{name: "nothing registered, json", args: []string{"status", "-o", "json"}, rpc: map[string]handler{"Status": reply(&pb.StatusResponse{})},
			want: "{\n  \"revision\": \"0\",\n  \"instances\": [],\n  \"regions\": [],\n  \"checkers\": [],\n  \"drains\": [],\n  \"center_id\": \"\",\n  \"center_traffic\": [],\n  \"etcd\": null,\n  \"digest\": \"\",\n  \"epoch\": \"0\"\n}\n", sent: asked},
		{name: "store unreachable", args: []string{"status"}, rpc: map[string]handler{"Status": fail(codes.Unavailable, "etcdserver: request timed out")},
			wantErr: "schedctl status: etcdserver: request timed out\n(is the central scheduler running and reachable? see --server)", sent: asked},
		{name: "unknown format", args: []string{"status", "-o", "wide"}, wantErr: `schedctl status: invalid value "wide" for flag -o: want table, yaml or json`, usage: true},
		{name: "argument", args: []string{"status", "hefei"}, wantErr: `schedctl status: unexpected argument "hefei"`, usage: true},
	})
}

// -o json and -o yaml are the Status response itself: read back, they give
// the very message the center sent.
func TestStatusIsTheMessage(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		var out bytes.Buffer
		f := &fakeAdmin{handlers: map[string]handler{"Status": reply(province())}}
		if err := run(context.Background(), []string{"status", "-o", format}, testEnv(f, &out, io.Discard)); err != nil {
			t.Fatal(err)
		}
		data := out.Bytes()
		if format == "yaml" {
			var v any
			if err := yaml.Unmarshal(data, &v); err != nil {
				t.Fatal(err)
			}
			var err error
			if data, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		got := &pb.StatusResponse{}
		if err := protojson.Unmarshal(data, got); err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, out.String())
		}
		if !proto.Equal(got, province()) {
			t.Errorf("-o %s reads back as\n%v\nwant\n%v", format, got, province())
		}
	}
}

func TestCentersTraffic(t *testing.T) {
	st := province()
	got := statusview.CentersTraffic(st)
	if len(got) != 2 || got["center-1"][0].GetAnswered() != 12 || got["center-2"][0].GetAnswered() != 3 {
		t.Errorf("centersTraffic = %v, want center-1's live 12 and center-2's recorded 3", got)
	}
	if c := statusview.CenterTraffic(st, "wuhu"); len(c) != 1 || c["center-1"].GetAnswered() != 12 {
		t.Errorf("statusview.CenterTraffic(wuhu) = %v, want center-1's 12 only", c)
	}
}

// TestStatusFamilies: a region with a dual-stack server whose IPv6 address
// is down shows IPV4_DOWN and IPV6_DOWN; a single-family province does not
// (TestStatus's golden).
func TestStatusFamilies(t *testing.T) {
	st := &pb.StatusResponse{Revision: 3, Regions: []*pb.RegionHealth{
		{Region: "hefei", Servers: 3, Healthy: 3, Available: 3, Ipv6Down: 1},
		{Region: "wuhu", Servers: 1, Healthy: 1, Available: 1},
	}}
	got := regionTable(st)
	var out bytes.Buffer
	if err := writeTables(&out, got); err != nil {
		t.Fatal(err)
	}
	want := "REGION  SERVERS  HEALTHY  UNHEALTHY  IPV4_DOWN  IPV6_DOWN  UNCHECKED  DRAINED  AVAILABLE  PANIC_NODES  CHECKERS\n" +
		"hefei   3        3        0          0          1          0          0        3          0            0\n" +
		"wuhu    1        1        0          0          0          0          0        1          0            0\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
