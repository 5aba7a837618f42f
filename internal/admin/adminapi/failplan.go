package adminapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/anysched/anysched/internal/allocation/failplan"
	"github.com/anysched/anysched/internal/province/topology"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Failure plans' solve budgets: the default and the most a caller may ask.
const (
	failPlanBudget    = time.Second
	failPlanMaxBudget = 10 * time.Second
	// failPlanStale: a region's published plan state older than this is
	// a planner that stopped publishing; its viewers are as last seen.
	failPlanStale = time.Minute
)

// PlanFailures plans for the loss of each city (internal/allocation/failplan)
// on the current topology, the servers the center's engine has available,
// and the plan states the regions' planners last published. One at a
// time: each city costs a few solves of its budget.
func (s *Service) PlanFailures(ctx context.Context, req *pb.PlanFailuresRequest) (*pb.PlanFailuresResponse, error) {
	budget := failPlanBudget
	switch ms := req.GetBudgetMs(); {
	case ms < 0 || time.Duration(ms)*time.Millisecond > failPlanMaxBudget:
		return nil, status.Errorf(codes.InvalidArgument, "budget_ms: %d is not within 0..%d", ms, failPlanMaxBudget.Milliseconds())
	case ms > 0:
		budget = time.Duration(ms) * time.Millisecond
	}
	eng := s.Engine()
	if eng == nil {
		return nil, status.Error(codes.Unavailable, "no topology yet")
	}
	snap := eng.Snapshot()
	for i, r := range req.GetRegions() {
		if _, ok := snap.Region(r); !ok {
			return nil, status.Errorf(codes.InvalidArgument, "regions[%d]: no region %q in topology revision %d", i, r, snap.Revision)
		}
	}
	if !s.failPlanning.TryLock() {
		return nil, status.Error(codes.ResourceExhausted, "a failure plan is already being made: try again when it is done")
	}
	defer s.failPlanning.Unlock()
	in := failplan.Input{Snap: snap, Viewers: map[string]*failplan.Viewers{}, Params: s.QoEModel, Budget: budget, Up: eng.Available, Regions: req.GetRegions()}
	resp := &pb.PlanFailuresResponse{Revision: snap.Revision}
	now := time.Now()
	for _, r := range in.Reads() {
		st, err := s.Store.AllocState(ctx, r, "")
		if err != nil {
			return nil, status.Error(codes.Unavailable, err.Error()) // "store: ..."
		}
		if st == nil || now.Sub(st.Made) > failPlanStale {
			if st != nil || plansByQoE(snap) {
				resp.Stale = append(resp.Stale, r)
			}
		}
		if st != nil { // grouped at once: a province's sessions are millions
			in.Viewers[r] = failplan.Summarize(snap, st, s.QoEModel.OriginCost > 0)
		}
	}
	rep, err := failplan.Plan(ctx, in)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, status.FromContextError(err).Err()
		}
		return nil, status.Error(codes.Internal, fmt.Sprintf("failure plan: %v", err))
	}
	resp.Made = timestamppb.New(rep.Made)
	for _, c := range rep.Cities {
		resp.Cities = append(resp.Cities, &pb.FailurePlan{Region: c.Region, Viewers: int64(c.Viewers), Order: c.Order,
			Configured: outcomePB(c.Configured), Proposed: c.Proposed, ProposedOutcome: outcomePB(c.ProposedOutcome),
			Reserves: reservesPB(c.Reserves), ShortKbps: c.ShortKbps})
	}
	return resp, nil
}

// plansByQoE says whether any service of snap plans by QoE (else no
// region publishes plan state, and none is stale for lacking one).
func plansByQoE(snap *topology.Snapshot) bool {
	for _, sv := range snap.Services {
		if sv.Selection.OrDefault() == topology.SelectQoE {
			return true
		}
	}
	return false
}

func outcomePB(o failplan.Outcome) *pb.FailureOutcome {
	out := &pb.FailureOutcome{Planned: int64(o.Planned), Unplanned: int64(o.Unplanned), AtDesired: int64(o.AtDesired),
		MeanKbps: o.MeanKbps, HostsAtDesired: o.HostsAtDesired, Gap: o.Gap}
	for _, t := range o.Taken {
		out.Taken = append(out.Taken, &pb.FailureTake{Region: t.Region, Viewers: int64(t.Viewers), Kbps: t.Kbps})
	}
	return out
}

func reservesPB(rs []failplan.Reserve) []*pb.FailureReserve {
	var out []*pb.FailureReserve
	for _, r := range rs {
		out = append(out, &pb.FailureReserve{Region: r.Region, SpareKbps: r.SpareKbps, ReserveKbps: r.ReserveKbps})
	}
	return out
}
