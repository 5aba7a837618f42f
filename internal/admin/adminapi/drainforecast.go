package adminapi

import (
	"context"
	"time"

	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// forecastMaxAge is how old a plan may be for a dry run to answer from it:
// three periods of the default 10 s. An older one is a scheduler that
// stopped planning, whose viewers the forecast would not describe.
const forecastMaxAge = 30 * time.Second

// drainDryRun answers a drain with dry_run: the target is checked as a
// drain checks it (the same errors), nothing is written, and the answer
// carries what the drain would do to the viewers of the QoE services, per
// instance planning the target's region, as the instances registered it
// with their plans. Region drains are not priced by the schedulers: every
// viewer the region's servers carry would go to the fallback, at a QoE
// change the forecast leaves at 0 (unknown). A drain the removal guard
// would refuse is answered too, with the refusal (refused).
func (s *Service) drainDryRun(ctx context.Context, req *pb.DrainRequest) (*pb.DrainResponse, error) {
	audit.Annotate(ctx, func(n *audit.Note) { n.Target = req.GetKind() + "/" + req.GetName(); n.Detail = "dry run" })
	n, err := s.drainTarget(req.GetKind(), req.GetName())
	if err != nil {
		return nil, err
	}
	kind := opstate.DrainKind(req.GetKind()) // checked by drainTarget
	d, err := s.drainWindow(ctx, req, time.Now())
	if err != nil {
		return nil, err
	}
	d.Kind, d.Name, d.Reason = kind, req.GetName(), req.GetReason()
	resp := &pb.DrainResponse{Servers: n, Changed: true, From: optionalTime(d.From), Until: optionalTime(d.Until)}
	same, err := s.sameDrain(d, time.Now())
	if err != nil {
		return nil, err
	}
	resp.Changed = !same // what the drain would answer
	// What the removal guard would answer, beside the forecast: the
	// forecast is what an operator weighs before asking an admin to force.
	if err := s.guardDrain(ctx, d, req.GetForce(), true); err != nil {
		if c := status.Code(err); c != codes.FailedPrecondition && c != codes.PermissionDenied {
			return nil, err
		}
		resp.Refused = status.Convert(err).Message()
	}
	region := s.drainRegion(kind, req.GetName())
	if region == "" {
		return resp, nil // a server of no region: no scheduler plans it
	}
	ins, err := s.Store.Instances(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error()) // "store: ..."
	}
	resp.Forecast = drainForecasts(ins, kind, req.GetName(), region, time.Now())
	return resp, nil
}

// drainRegion is the region of a drain target drainTarget accepted, "" for
// none.
func (s *Service) drainRegion(kind opstate.DrainKind, name string) string {
	eng := s.Engine()
	if eng == nil {
		return ""
	}
	snap := eng.Snapshot()
	r := int32(-1)
	switch kind {
	case opstate.DrainServer:
		if i, ok := snap.Server(name); ok {
			r = snap.Servers[i].Region
		}
	case opstate.DrainNode:
		if i, ok := snap.Node(name); ok {
			r = snap.Nodes[i].Region
		}
	case opstate.DrainRegion:
		if i, ok := snap.Region(name); ok {
			r = i
		}
	}
	if r < 0 || int(r) >= len(snap.Regions) {
		return ""
	}
	return snap.Regions[r].Name
}

// drainForecasts picks, from the registered instances, the fresh plans of
// region (a regional scheduler's own, a center's for a city it plans while
// the city's schedulers are gone) and reads each one's forecast for the
// target: one entry per plan that knows it.
func drainForecasts(ins []store.Instance, kind opstate.DrainKind, name, region string, now time.Time) []*pb.DrainForecast {
	var out []*pb.DrainForecast
	add := func(id string, q *store.QoEPlan) {
		if q == nil || q.Idle || now.Sub(q.MadeAt) > forecastMaxAge {
			return
		}
		if f := forecastOf(q, kind, name); f != nil {
			f.Region, f.Instance, f.Server, f.Objective = region, id, name, q.Objective
			out = append(out, f)
		}
	}
	for _, in := range ins {
		if in.Role == instance.Regional && in.Region == region {
			add(in.ID, in.QoE)
		}
		for i := range in.Planning {
			if in.Planning[i].Region == region {
				add(in.ID, &in.Planning[i])
			}
		}
	}
	return out
}

// forecastOf is q's forecast for draining the target, nil when q cannot
// tell.
func forecastOf(q *store.QoEPlan, kind opstate.DrainKind, name string) *pb.DrainForecast {
	if kind == opstate.DrainRegion {
		// Every viewer on the region's servers leaves the region.
		moved := int64(q.Planned - q.Fallback)
		return &pb.DrainForecast{Sessions: moved, ToFallback: moved}
	}
	for _, d := range q.Drain {
		if d.Kind == kind && d.Name == name {
			return &pb.DrainForecast{
				Sessions: int64(d.Sessions), SameRung: int64(d.SameRung), LowerRung: int64(d.LowerRung),
				ToFallback: int64(d.ToFallback), ObjectiveDelta: d.ObjectiveDelta,
			}
		}
	}
	// Not in the forecasts: the plan keeps no viewer there (the target
	// was unavailable when it was made), unless the plan forecasts nothing
	// at all while it puts viewers on servers (a scheduler that does not
	// forecast drains).
	if len(q.Drain) == 0 && q.Planned > q.Fallback {
		return nil
	}
	return &pb.DrainForecast{}
}
