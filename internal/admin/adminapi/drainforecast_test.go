package adminapi

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const forecastProvince = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: hefei, location: {lat: 31.82, lon: 117.23}, fallback: [wuhu]}
  - {name: wuhu, location: {lat: 31.33, lon: 118.38}}
nodes:
  - name: hefei-1
    region: hefei
    location: {lat: 31.86, lon: 117.28}
    servers:
      - {name: a, address: 10.1.1.1:8080}
      - {name: b, address: 10.1.1.2:8080}
  - name: hefei-2
    region: hefei
    location: {lat: 31.87, lon: 117.29}
    servers:
      - {name: c, address: 10.1.2.1:8080}
  - name: wuhu-1
    region: wuhu
    location: {lat: 31.33, lon: 118.38}
    servers:
      - {name: w, address: 10.2.1.1:8080}
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/{bitrate}/index.m3u8"
    bitrates_kbps: [1200, 2500, 5000]
    selection: qoe
`

// TestDrainDryRun: a dry run checks the target as a drain does, changes
// nothing, and answers each fresh plan's forecast for the target: a city's
// own, and a center's for a city it plans; idle, stale and other regions'
// plans, and plans that forecast nothing, are left out.
func TestDrainDryRun(t *testing.T) {
	st := etcdtest.Start(t).Store()
	eng := steer.New(fixture.CompileYAML(t, forecastProvince, 1), steer.Options{})
	var drains []opstate.Drain
	svc := &Service{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Engine: func() *steer.Engine { return eng }, Drains: func() []opstate.Drain { return drains }}
	now := time.Now()
	hefei := func(madeAt time.Time) *store.QoEPlan {
		return &store.QoEPlan{Planned: 40, Fallback: 3, Objective: 500, MadeAt: madeAt, Drain: []store.DrainForecast{
			{Kind: opstate.DrainServer, Name: "a", Sessions: 20, SameRung: 15, LowerRung: 3, ToFallback: 2, ObjectiveDelta: -4.25},
			{Kind: opstate.DrainServer, Name: "b", Sessions: 17, SameRung: 17, ObjectiveDelta: -8.5},
			{Kind: opstate.DrainNode, Name: "hefei-1", Sessions: 37, SameRung: 30, LowerRung: 4, ToFallback: 3, ObjectiveDelta: -20},
			// c: not in the plan (it was down): no viewer there.
		}}
	}
	centre := center(true)
	centre.Planning = []store.QoEPlan{
		{Region: "wuhu", Planned: 9, Objective: 50, MadeAt: now, Drain: []store.DrainForecast{{Kind: opstate.DrainServer, Name: "w", Sessions: 9, ToFallback: 9, ObjectiveDelta: -3}}},
		{Region: "hefei", Planned: 5, Objective: 60, MadeAt: now, Drain: []store.DrainForecast{{Kind: opstate.DrainServer, Name: "a", Sessions: 5, SameRung: 5, ObjectiveDelta: -2.5}}},
	}
	fresh, stale, idle, bare, none, other := city("hefei", true), city("hefei", true), city("hefei", true), city("hefei", true), city("hefei", true), city("wuhu", true)
	stale.ID, idle.ID, bare.ID, none.ID = "hefei-2", "hefei-3", "hefei-4", "hefei-5"
	fresh.QoE, stale.QoE = hefei(now), hefei(now.Add(-time.Minute))
	idle.QoE = &store.QoEPlan{Idle: true, MadeAt: now}
	bare.QoE = &store.QoEPlan{Planned: 10, Objective: 70, MadeAt: now} // a scheduler that forecasts nothing
	other.QoE = hefei(now)
	register(t, st, centre, fresh, stale, idle, bare, none, other)

	tests := []struct {
		name, kind, target string
		want               []*pb.DrainForecast
	}{
		{"server", "server", "a", []*pb.DrainForecast{
			{Region: "hefei", Instance: "center-1", Server: "a", Sessions: 5, SameRung: 5, ObjectiveDelta: -2.5, Objective: 60},
			{Region: "hefei", Instance: "hefei-1", Server: "a", Sessions: 20, SameRung: 15, LowerRung: 3, ToFallback: 2, ObjectiveDelta: -4.25, Objective: 500},
		}},
		{"node", "node", "hefei-1", []*pb.DrainForecast{
			{Region: "hefei", Instance: "center-1", Server: "hefei-1", Objective: 60}, // the center's plan forecast no node: it keeps no viewer there
			{Region: "hefei", Instance: "hefei-1", Server: "hefei-1", Sessions: 37, SameRung: 30, LowerRung: 4, ToFallback: 3, ObjectiveDelta: -20, Objective: 500},
		}},
		{"server the plan does not use", "server", "c", []*pb.DrainForecast{
			{Region: "hefei", Instance: "center-1", Server: "c", Objective: 60},
			{Region: "hefei", Instance: "hefei-1", Server: "c", Objective: 500},
		}},
		{"region: every viewer on its servers to the fallback, the QoE change unknown", "region", "hefei", []*pb.DrainForecast{
			{Region: "hefei", Instance: "center-1", Server: "hefei", Sessions: 5, ToFallback: 5, Objective: 60},
			{Region: "hefei", Instance: "hefei-1", Server: "hefei", Sessions: 37, ToFallback: 37, Objective: 500},
			{Region: "hefei", Instance: "hefei-4", Server: "hefei", Sessions: 10, ToFallback: 10, Objective: 70},
		}},
		{"another region's server", "server", "w", []*pb.DrainForecast{
			{Region: "wuhu", Instance: "center-1", Server: "w", Sessions: 9, ToFallback: 9, ObjectiveDelta: -3, Objective: 50},
			{Region: "wuhu", Instance: "wuhu-1", Server: "w", Objective: 500},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, note := as(t, authz.Operator)
			before := etcdRevision(t, st)
			resp, err := svc.Drain(ctx, &pb.DrainRequest{Kind: tt.kind, Name: tt.target, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			if !resp.GetChanged() || resp.GetServers() == 0 {
				t.Errorf("a dry run of an undrained target: %v", resp)
			}
			if len(resp.GetForecast()) != len(tt.want) {
				t.Fatalf("forecasts %v, want %v", resp.GetForecast(), tt.want)
			}
			for i, w := range tt.want {
				if g := resp.GetForecast()[i]; !proto.Equal(g, w) {
					t.Errorf("forecast %d: %v, want %v", i, g, w)
				}
			}
			if after := etcdRevision(t, st); after != before {
				t.Errorf("a dry run wrote to etcd: revision %d -> %d", before, after)
			}
			if note.Target != tt.kind+"/"+tt.target || note.Detail != "dry run" {
				t.Errorf("audit note %+v", note)
			}
		})
	}

	// The target is checked as a drain checks it: the same errors.
	for _, req := range []*pb.DrainRequest{{Kind: "server", Name: "nope"}, {Kind: "rack", Name: "a"}, {Kind: "region", Name: ""}} {
		ctx, _ := as(t, authz.Operator)
		_, real := svc.drainTarget(req.GetKind(), req.GetName())
		dry := proto.Clone(req).(*pb.DrainRequest)
		dry.DryRun = true
		if _, err := svc.Drain(ctx, dry); err == nil || err.Error() != real.Error() || status.Code(err) != status.Code(real) {
			t.Errorf("dry run of %v: %v, the drain says %v", req, err, real)
		}
	}
	engine := svc.Engine
	svc.Engine = func() *steer.Engine { return nil }
	ctx, _ := as(t, authz.Operator)
	if _, err := svc.Drain(ctx, &pb.DrainRequest{Kind: "server", Name: "a", DryRun: true}); status.Code(err) != codes.Unavailable {
		t.Errorf("dry run without a snapshot: %v", err)
	}
	svc.Engine = engine

	// Already drained: the dry run says what the drain would (not changed).
	drains = []opstate.Drain{{Kind: opstate.DrainServer, Name: "a", Reason: "disk"}}
	resp, err := svc.Drain(ctx, &pb.DrainRequest{Kind: "server", Name: "a", Reason: "disk", DryRun: true})
	if err != nil || resp.GetChanged() || len(resp.GetForecast()) != 2 {
		t.Errorf("dry run of a drained server: %v, %v", resp, err)
	}
}

// etcdRevision is the etcd cluster's revision: any write moves it.
func etcdRevision(t *testing.T, st *store.Store) int64 {
	t.Helper()
	r, err := st.Client().Get(context.Background(), "anything")
	if err != nil {
		t.Fatal(err)
	}
	return r.Header.Revision
}
