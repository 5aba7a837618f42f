package adminapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A city's maintenance window is no state of its own: it is the region's
// drain and a maintenance drill of the region with the same window, both
// signed, both followed by every scheduler on its own clock, both ended
// by themselves (the drain by the schedulers' clocks and the center's
// housekeeping, the drill by its clock and its lease). These calls only
// write, list and delete the two together.

// Maintenance schedules region's maintenance window (admin: the role
// table). The removal guard judges it like a drain's window, except that
// the region itself may be left with no serving server: that is the point.
func (s *Service) Maintenance(ctx context.Context, req *pb.MaintenanceRequest) (*pb.MaintenanceResponse, error) {
	region := req.GetRegion()
	audit.Annotate(ctx, func(n *audit.Note) { n.Target = "maintenance/" + region; n.Detail = req.GetReason() })
	if region == "" {
		return nil, status.Error(codes.InvalidArgument, "region: required")
	}
	if req.GetUntil() == nil {
		return nil, status.Error(codes.InvalidArgument, "until: required (a maintenance window ends)")
	}
	n, err := s.drainTarget(string(opstate.DrainRegion), region)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	d, err := s.drainWindow(ctx, noForce{req}, now) // the drill's bound, MaxWindow, is every scheduler's: no forcing past it
	if err != nil {
		return nil, err
	}
	// Forced: emptying the region is the window's purpose, and the caller
	// is an admin (the role table), so every scheduler applies it.
	d.Kind, d.Name, d.Reason, d.Forced = opstate.DrainRegion, region, maintenanceReason(req.GetReason()), true
	audit.Annotate(ctx, func(n *audit.Note) { n.Detail = "window " + d.Window() + "; " + d.Reason })
	start := now.UTC()
	if !d.From.IsZero() {
		start = d.From
	}
	dr := opstate.Drill{Target: opstate.RegionTarget(region), Started: start, Until: d.Until, Maintenance: true}
	resp := &pb.MaintenanceResponse{Servers: n, Window: &pb.MaintenanceWindow{Region: region, From: optionalTime(start), Until: optionalTime(d.Until),
		Reason: d.Reason, State: string(d.State(now))}}

	ins, err := s.Store.Instances(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	withdraw := true
	if why := withdrawsNothing(dr.Target, ins); why != "" {
		withdraw, resp.Route = false, "not withdrawn: "+why
	} else {
		for _, in := range ins {
			if in.Role == instance.Regional && in.Region == region {
				resp.Instances = append(resp.Instances, in.ID)
			}
		}
		resp.Route = "withdrawn by the region's schedulers in the window; the central scheduler answers the city's STBs"
	}
	cli, prefix := s.Store.Client(), s.Store.Prefix()
	drills, rev, err := opstate.ListDrills(ctx, cli, prefix)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	sameDrill := false
	for _, o := range drills {
		if o.Target == dr.Target && o.Until.After(now) {
			if !o.Maintenance || !o.Started.Equal(dr.Started) || !o.Until.Equal(dr.Until) {
				return nil, status.Errorf(codes.FailedPrecondition, "refused: a drill of %s is stored, from %s until %s; cancel it first", region, o.Started.UTC().Format(time.RFC3339), o.Until.UTC().Format(time.RFC3339))
			}
			sameDrill = true
		}
	}
	if withdraw && !sameDrill {
		// Judged as if every drill stored were in force throughout: the
		// window overlaps them or not, a region must keep a scheduler.
		if why := s.drillRefusal(dr.Target, drills, ins, now); why != "" {
			return nil, status.Error(codes.FailedPrecondition, "refused: "+why)
		}
	}
	sameDrain, err := s.sameDrain(d, now)
	if err != nil {
		return nil, err
	}
	if req.GetDryRun() {
		return s.maintenanceDryRun(ctx, req, d, ins, resp)
	}
	resp.Window.Drained, resp.Window.Withdrawn = true, withdraw
	if sameDrain && (sameDrill || !withdraw) {
		return resp, nil
	}
	if err := s.guardDrainExcept(ctx, d, req.GetForce(), false, "maintenance", region); err != nil {
		return nil, err
	}
	if !sameDrain {
		if err := opstate.SetDrain(ctx, cli, prefix, s.Apply.Signer, d); err != nil {
			return nil, status.Errorf(codes.Unavailable, "store: %v", err)
		}
	}
	if withdraw && !sameDrill {
		if err := opstate.ScheduleDrill(ctx, cli, prefix, s.Apply.Signer, dr, rev); err != nil {
			// Not half a window: the drain goes with the drill.
			if !sameDrain {
				_, _ = opstate.ClearDrain(ctx, cli, prefix, opstate.DrainRegion, region)
			}
			if errors.Is(err, opstate.ErrDrillsChanged) {
				return nil, status.Error(codes.Aborted, "another drill started or ended meanwhile; try again")
			}
			return nil, status.Errorf(codes.Unavailable, "store: %v", err)
		}
	}
	resp.Changed = true
	s.Logger.Warn("maintenance window scheduled", "region", region, "window", d.Window(), "reason", d.Reason, "route_withdrawn", withdraw, "instances", resp.Instances)
	return resp, nil
}

// noForce is a maintenance request as drainWindow reads it: a window longer
// than opstate.MaxWindow cannot be forced, since every scheduler ends a
// maintenance drill by then.
type noForce struct{ *pb.MaintenanceRequest }

func (noForce) GetForce() bool { return false }

// maintenanceReason is the region drain's reason: status and explain say
// it is maintenance.
func maintenanceReason(reason string) string {
	if reason == "" {
		return "maintenance"
	}
	return "maintenance: " + reason
}

// maintenanceDryRun answers what the window would do: the region drain's
// forecast and refusal (as a drain's dry run), the instances withdrawing.
func (s *Service) maintenanceDryRun(ctx context.Context, req *pb.MaintenanceRequest, d opstate.Drain, ins []store.Instance, resp *pb.MaintenanceResponse) (*pb.MaintenanceResponse, error) {
	if err := s.guardDrainExcept(ctx, d, req.GetForce(), true, "maintenance", d.Name); err != nil {
		if c := status.Code(err); c != codes.FailedPrecondition && c != codes.PermissionDenied {
			return nil, err
		}
		resp.Refused = status.Convert(err).Message()
	}
	resp.Forecast = drainForecasts(ins, opstate.DrainRegion, d.Name, d.Name, time.Now())
	resp.Changed = true
	return resp, nil
}

// ListMaintenance lists the maintenance windows stored: each region with a
// scheduled region drain or a maintenance drill.
func (s *Service) ListMaintenance(ctx context.Context, _ *pb.ListMaintenanceRequest) (*pb.ListMaintenanceResponse, error) {
	ws, err := s.maintenanceWindows(ctx, time.Now())
	if err != nil {
		return nil, err
	}
	resp := &pb.ListMaintenanceResponse{Windows: slices.Collect(maps.Values(ws))}
	sort.Slice(resp.Windows, func(i, j int) bool { return resp.Windows[i].GetRegion() < resp.Windows[j].GetRegion() })
	return resp, nil
}

// maintenanceWindows are the windows stored, by region.
func (s *Service) maintenanceWindows(ctx context.Context, now time.Time) (map[string]*pb.MaintenanceWindow, error) {
	out := map[string]*pb.MaintenanceWindow{}
	for _, d := range s.drains() {
		if d.Kind != opstate.DrainRegion || !d.Scheduled() {
			continue
		}
		from := d.From
		if from.IsZero() {
			from = d.At
		}
		out[d.Name] = &pb.MaintenanceWindow{Region: d.Name, From: optionalTime(from), Until: optionalTime(d.Until), Reason: d.Reason, State: string(d.State(now)), Drained: true}
	}
	drills, _, err := opstate.ListDrills(ctx, s.Store.Client(), s.Store.Prefix())
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	for _, dr := range drills {
		if !dr.Maintenance || dr.Target.Center {
			continue
		}
		w, ok := out[dr.Target.Region]
		if !ok {
			state := opstate.Drain{From: dr.Started, Until: dr.Until}.State(now)
			w = &pb.MaintenanceWindow{Region: dr.Target.Region, From: optionalTime(dr.Started), Until: optionalTime(dr.Until), State: string(state)}
			out[dr.Target.Region] = w
		}
		w.Withdrawn = true
	}
	return out, nil
}

// CancelMaintenance deletes region's maintenance window: its scheduled
// region drain and its maintenance drill (a failover drill or a drain
// without a window is not the window's, and stays).
func (s *Service) CancelMaintenance(ctx context.Context, req *pb.CancelMaintenanceRequest) (*pb.MaintenanceResponse, error) {
	region := req.GetRegion()
	audit.Annotate(ctx, func(n *audit.Note) { n.Target = "maintenance/" + region })
	if region == "" {
		return nil, status.Error(codes.InvalidArgument, "region: required")
	}
	now := time.Now()
	ws, err := s.maintenanceWindows(ctx, now)
	if err != nil {
		return nil, err
	}
	w, ok := ws[region]
	if !ok {
		return &pb.MaintenanceResponse{Window: &pb.MaintenanceWindow{Region: region}}, nil
	}
	audit.Annotate(ctx, func(n *audit.Note) {
		n.Detail = fmt.Sprintf("cancelled the maintenance window %s – %s (%s)", w.GetFrom().AsTime().UTC().Format(time.RFC3339), w.GetUntil().AsTime().UTC().Format(time.RFC3339), w.GetState())
	})
	cli, prefix := s.Store.Client(), s.Store.Prefix()
	if w.GetWithdrawn() {
		if _, err := opstate.ClearDrill(ctx, cli, prefix, opstate.RegionTarget(region)); err != nil {
			return nil, status.Errorf(codes.Unavailable, "store: %v", err)
		}
	}
	if w.GetDrained() {
		if _, err := opstate.ClearDrain(ctx, cli, prefix, opstate.DrainRegion, region); err != nil {
			return nil, status.Errorf(codes.Unavailable, "store: %v", err)
		}
	}
	s.Logger.Warn("maintenance window cancelled", "region", region, "state", w.GetState())
	return &pb.MaintenanceResponse{Window: w, Changed: true}, nil
}
