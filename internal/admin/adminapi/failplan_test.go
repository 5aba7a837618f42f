package adminapi

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestPlanFailures: the center plans each city's loss from the plan states
// in the store: hefei's viewers fall back to wuhu's server; wuhu, which
// published none, is named stale; bad requests name what was wrong.
func TestPlanFailures(t *testing.T) {
	st := etcdtest.Start(t).Store()
	eng := steer.New(fixture.CompileYAML(t, forecastProvince, 1), steer.Options{})
	svc := &Service{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Engine: func() *steer.Engine { return eng }}
	ctx, _ := as(t, authz.Viewer)
	state := &store.AllocState{Instance: "hefei-1", Made: time.Now(), Services: []store.ServiceState{{Name: "live"}}, Servers: []string{"a"}}
	for i := range 3 {
		state.Sessions = append(state.Sessions, store.SessionState{User: fmt.Sprint("v", i), Addr: netip.AddrFrom4([4]byte{100, 64, 1, byte(i)}),
			Channel: "ch1", Desired: 2500, Danmaku: 1, Lat: 31.86, Lon: 117.28, Server: 0, Kbps: 2500})
	}
	if err := st.PutAllocState(ctx, "hefei", state); err != nil {
		t.Fatal(err)
	}
	resp, err := svc.PlanFailures(ctx, &pb.PlanFailuresRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetRevision() != 1 || len(resp.GetCities()) != 2 || strings.Join(resp.GetStale(), ",") != "wuhu" {
		t.Fatalf("revision %d, %d cities, stale %v; want 1, 2, [wuhu]", resp.GetRevision(), len(resp.GetCities()), resp.GetStale())
	}
	hefei := resp.GetCities()[0]
	k := hefei.GetConfigured()
	if hefei.GetRegion() != "hefei" || hefei.GetViewers() != 3 || k.GetPlanned() != 3 || k.GetAtDesired() != 3 ||
		len(k.GetTaken()) != 1 || k.GetTaken()[0].GetRegion() != "wuhu" || k.GetTaken()[0].GetViewers() != 3 {
		t.Errorf("hefei's loss: %v", hefei)
	}
	if w := resp.GetCities()[1]; w.GetRegion() != "wuhu" || w.GetViewers() != 0 {
		t.Errorf("wuhu's loss: %v, want no viewers", w)
	}
	one, err := svc.PlanFailures(ctx, &pb.PlanFailuresRequest{Regions: []string{"wuhu"}, BudgetMs: 200})
	if err != nil || len(one.GetCities()) != 1 || one.GetCities()[0].GetRegion() != "wuhu" {
		t.Errorf("wuhu alone: %v, %v", one, err)
	}

	for _, tc := range []struct {
		req  *pb.PlanFailuresRequest
		code codes.Code
		msg  string
	}{
		{&pb.PlanFailuresRequest{BudgetMs: -1}, codes.InvalidArgument, "budget_ms: -1 is not within 0..10000"},
		{&pb.PlanFailuresRequest{BudgetMs: 10001}, codes.InvalidArgument, "budget_ms: 10001 is not within 0..10000"},
		{&pb.PlanFailuresRequest{Regions: []string{"hefei", "atlantis"}}, codes.InvalidArgument, `regions[1]: no region "atlantis" in topology revision 1`},
	} {
		_, err := svc.PlanFailures(ctx, tc.req)
		if s := status.Convert(err); s.Code() != tc.code || s.Message() != tc.msg {
			t.Errorf("%v: %v, want %v %q", tc.req, err, tc.code, tc.msg)
		}
	}
	svc.failPlanning.Lock() // one plan at a time
	if _, err := svc.PlanFailures(ctx, &pb.PlanFailuresRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a second plan at once: %v, want RESOURCE_EXHAUSTED", err)
	}
	svc.failPlanning.Unlock()
	svc.Engine = func() *steer.Engine { return nil }
	if _, err := svc.PlanFailures(ctx, &pb.PlanFailuresRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("without a topology: %v, want UNAVAILABLE", err)
	}
}
