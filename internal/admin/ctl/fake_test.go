package ctl

import (
	"context"
	"sync"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// fakeAdmin is the admin API as a test scripts it: each method answers from
// its handler (Unimplemented without one) and every request is recorded, in
// order, so a test asserts what a command sent as well as what it printed.
type fakeAdmin struct {
	mu       sync.Mutex
	handlers map[string]handler // by method name, e.g. "Status"
	calls    []call
}

// handler answers one RPC; n counts the calls of that method before this one.
type handler func(n int, req proto.Message) (proto.Message, error)

type call struct {
	method   string
	req      proto.Message
	deadline time.Time // of the call's context; zero for none
}

// reply answers every call with resp.
func reply(resp proto.Message) handler {
	return func(int, proto.Message) (proto.Message, error) { return resp, nil }
}

// fail answers every call with a gRPC error.
func fail(code codes.Code, msg string) handler {
	return func(int, proto.Message) (proto.Message, error) { return nil, status.Error(code, msg) }
}

// sent is every call so far, in order.
func (f *fakeAdmin) sent() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// answer records req and runs the method's handler.
func answer[T proto.Message](ctx context.Context, f *fakeAdmin, method string, req proto.Message) (T, error) {
	deadline, _ := ctx.Deadline()
	f.mu.Lock()
	n := 0
	for _, c := range f.calls {
		if c.method == method {
			n++
		}
	}
	f.calls = append(f.calls, call{method, proto.Clone(req), deadline})
	h := f.handlers[method]
	f.mu.Unlock()
	var zero T
	if h == nil {
		return zero, status.Error(codes.Unimplemented, "fake: no "+method)
	}
	resp, err := h(n, req)
	if err != nil || resp == nil {
		return zero, err
	}
	return resp.(T), nil
}

func (f *fakeAdmin) ApplyTopology(ctx context.Context, in *pb.ApplyTopologyRequest, _ ...grpc.CallOption) (*pb.ApplyTopologyResponse, error) {
	return answer[*pb.ApplyTopologyResponse](ctx, f, "ApplyTopology", in)
}

func (f *fakeAdmin) GetTopology(ctx context.Context, in *pb.GetTopologyRequest, _ ...grpc.CallOption) (*pb.GetTopologyResponse, error) {
	return answer[*pb.GetTopologyResponse](ctx, f, "GetTopology", in)
}

func (f *fakeAdmin) Status(ctx context.Context, in *pb.StatusRequest, _ ...grpc.CallOption) (*pb.StatusResponse, error) {
	return answer[*pb.StatusResponse](ctx, f, "Status", in)
}

func (f *fakeAdmin) Explain(ctx context.Context, in *pb.ExplainRequest, _ ...grpc.CallOption) (*pb.ExplainResponse, error) {
	return answer[*pb.ExplainResponse](ctx, f, "Explain", in)
}

func (f *fakeAdmin) Drain(ctx context.Context, in *pb.DrainRequest, _ ...grpc.CallOption) (*pb.DrainResponse, error) {
	return answer[*pb.DrainResponse](ctx, f, "Drain", in)
}

func (f *fakeAdmin) Undrain(ctx context.Context, in *pb.UndrainRequest, _ ...grpc.CallOption) (*pb.DrainResponse, error) {
	return answer[*pb.DrainResponse](ctx, f, "Undrain", in)
}

func (f *fakeAdmin) Drill(ctx context.Context, in *pb.DrillRequest, _ ...grpc.CallOption) (*pb.DrillResponse, error) {
	return answer[*pb.DrillResponse](ctx, f, "Drill", in)
}

func (f *fakeAdmin) DrillEtcdLoss(ctx context.Context, in *pb.DrillEtcdLossRequest, _ ...grpc.CallOption) (*pb.DrillResponse, error) {
	return answer[*pb.DrillResponse](ctx, f, "DrillEtcdLoss", in)
}

func (f *fakeAdmin) Audit(ctx context.Context, in *pb.AuditRequest, _ ...grpc.CallOption) (*pb.AuditResponse, error) {
	return answer[*pb.AuditResponse](ctx, f, "Audit", in)
}

func (f *fakeAdmin) WhoAmI(ctx context.Context, in *pb.WhoAmIRequest, _ ...grpc.CallOption) (*pb.WhoAmIResponse, error) {
	return answer[*pb.WhoAmIResponse](ctx, f, "WhoAmI", in)
}

func (f *fakeAdmin) PlanFailures(ctx context.Context, in *pb.PlanFailuresRequest, _ ...grpc.CallOption) (*pb.PlanFailuresResponse, error) {
	return answer[*pb.PlanFailuresResponse](ctx, f, "PlanFailures", in)
}

func (f *fakeAdmin) GetBalance(ctx context.Context, in *pb.GetBalanceRequest, _ ...grpc.CallOption) (*pb.BalanceResponse, error) {
	return answer[*pb.BalanceResponse](ctx, f, "GetBalance", in)
}

func (f *fakeAdmin) SetBalance(ctx context.Context, in *pb.SetBalanceRequest, _ ...grpc.CallOption) (*pb.BalanceResponse, error) {
	return answer[*pb.BalanceResponse](ctx, f, "SetBalance", in)
}

func (f *fakeAdmin) Maintenance(ctx context.Context, in *pb.MaintenanceRequest, _ ...grpc.CallOption) (*pb.MaintenanceResponse, error) {
	return answer[*pb.MaintenanceResponse](ctx, f, "Maintenance", in)
}

func (f *fakeAdmin) ListMaintenance(ctx context.Context, in *pb.ListMaintenanceRequest, _ ...grpc.CallOption) (*pb.ListMaintenanceResponse, error) {
	return answer[*pb.ListMaintenanceResponse](ctx, f, "ListMaintenance", in)
}

func (f *fakeAdmin) CancelMaintenance(ctx context.Context, in *pb.CancelMaintenanceRequest, _ ...grpc.CallOption) (*pb.MaintenanceResponse, error) {
	return answer[*pb.MaintenanceResponse](ctx, f, "CancelMaintenance", in)
}

var _ pb.AdminClient = (*fakeAdmin)(nil)

// fakeClock moves only when slept on: a drill's polling runs through at
// once, and the times in its report are exact.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return nil
}
