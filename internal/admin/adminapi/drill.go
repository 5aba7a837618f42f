package adminapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/etcd/etcdmember"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// DrillEtcdLoss stops the embedded etcd, or members of the lab's etcd
// cluster, for the drill's duration (lab only).
func (s *Service) DrillEtcdLoss(ctx context.Context, req *pb.DrillEtcdLossRequest) (*pb.DrillResponse, error) {
	audit.Annotate(ctx, func(n *audit.Note) {
		n.Target = "etcd"
		n.Detail = fmt.Sprintf("members %d, leader first %t, %gs", req.GetMembers(), req.GetLeaderFirst(), req.GetDurationSeconds())
	})
	d := time.Duration(req.GetDurationSeconds() * float64(time.Second))
	if d < time.Second || d > 10*time.Minute {
		return nil, status.Errorf(codes.InvalidArgument, "duration: %s is out of range [1s, 10m]", d)
	}
	if !s.Lab {
		return nil, status.Error(codes.FailedPrecondition, "refused: an etcd-loss drill runs only in a lab (lab: true)")
	}
	if len(s.LabEtcdMembers) > 0 {
		return s.drillEtcdMembers(ctx, d, int(req.GetMembers()), req.GetLeaderFirst())
	}
	if s.Etcd == nil {
		return nil, status.Error(codes.FailedPrecondition, "refused: this center uses an external etcd cluster; stop its members yourself")
	}
	if n := req.GetMembers(); n > 1 {
		return nil, status.Errorf(codes.InvalidArgument, "members: %d, but the center's embedded etcd is a single member", n)
	}
	until := time.Now().Add(d)
	s.Logger.Warn("etcd-loss drill: stopping the embedded etcd", "until", until)
	// The drill outlives this call: not the request's context. Stopping
	// takes a moment (etcd drains its clients): answer now, and hold the
	// member down for d from when it has stopped (until is the earliest).
	go func() { //nolint:gosec // G118: see above
		s.Etcd.Stop()
		time.Sleep(d)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Etcd.Start(ctx); err != nil {
			s.Logger.Error("etcd-loss drill: restarting the embedded etcd failed", "err", err)
			return
		}
		s.Logger.Info("etcd-loss drill over: embedded etcd running again")
	}()
	return &pb.DrillResponse{Until: timestamppb.New(until), EtcdMembersStopped: []string{s.Etcd.Name()}, EtcdMembers: 1}, nil
}

// drillEtcdMembers stops the first n (0: all) of the lab's etcd members
// through their control endpoints, the current leader first when asked,
// and once all have left the group releases them together d later
// (etcdmember.StopAll): the drill's outage is d whatever each member
// took to drain its clients. It answers when the members are down.
func (s *Service) drillEtcdMembers(ctx context.Context, d time.Duration, n int, leaderFirst bool) (*pb.DrillResponse, error) {
	total := len(s.LabEtcdMembers)
	if n == 0 {
		n = total
	}
	if n > total {
		return nil, status.Errorf(codes.InvalidArgument, "members: %d, but the lab's etcd cluster has %d", n, total)
	}
	addrs := slices.Clone(s.LabEtcdMembers)
	leader, lerr := s.etcdLeader(ctx)
	if leaderFirst {
		if lerr != nil {
			return nil, status.Errorf(codes.Unavailable, "leader first: cannot tell the leader: %v", lerr)
		}
		i := slices.IndexFunc(addrs, func(a string) bool {
			st, err := etcdmember.Get(ctx, a)
			return err == nil && st.Name == leader
		})
		if i < 0 {
			return nil, status.Errorf(codes.FailedPrecondition, "leader first: the leader %s is not behind any of lab_etcd_members", leader)
		}
		first := addrs[i] // before Delete shifts the rest down
		addrs = append([]string{first}, slices.Delete(addrs, i, i+1)...)
	}
	resp := &pb.DrillResponse{EtcdMembers: uint32(total), QuorumKept: total-n >= total/2+1, EtcdLeader: leader}
	s.Logger.Warn("etcd-loss drill: stopping lab etcd members", "members", n, "of", total, "leader", leader, "leader_first", leaderFirst, "order", addrs[:n], "quorum_kept", resp.QuorumKept, "for", d)
	// A member drains its clients for up to etcd's request timeout (~7 s)
	// before it leaves the group: 30 s is ample.
	names, until, err := etcdmember.StopAll(ctx, addrs[:n], d, 30*time.Second)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "etcd-loss drill: %v", err)
	}
	resp.EtcdMembersStopped, resp.Until = names, timestamppb.New(until)
	s.Logger.Warn("etcd-loss drill: lab etcd members down", "members", names, "until", until)
	return resp, nil
}

// etcdLeader names the etcd cluster's current leader, as the first
// endpoint that answers sees it.
func (s *Service) etcdLeader(ctx context.Context) (string, error) {
	if s.EtcdLeader != nil {
		return s.EtcdLeader(ctx)
	}
	if s.Store == nil {
		return "", errors.New("no store")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cli := s.Store.Client()
	members, err := cli.MemberList(ctx)
	if err != nil {
		return "", err
	}
	for _, ep := range cli.Endpoints() {
		st, err := cli.Status(ctx, ep)
		if err != nil || st.Leader == 0 {
			continue
		}
		for _, m := range members.Members {
			if m.ID == st.Leader {
				return m.Name, nil
			}
		}
	}
	return "", errors.New("no endpoint knows a leader")
}

// Drill starts a failover drill for a region ("center" drills the center).
// In production it needs the admin role, drills.allow_production and the
// caller's confirmation; anywhere, it is refused if it would leave a
// region without an announcing scheduler.
func (s *Service) Drill(ctx context.Context, req *pb.DrillRequest) (*pb.DrillResponse, error) {
	audit.Annotate(ctx, func(n *audit.Note) { n.Target = keyspace.Drill(req.GetRegion()) })
	d := time.Duration(req.GetDurationSeconds() * float64(time.Second))
	if d < time.Second || d > time.Hour {
		return nil, status.Errorf(codes.InvalidArgument, "duration: %s is out of range [1s, 1h]", d)
	}
	if !s.Lab {
		if c, ok := authz.FromContext(ctx); ok {
			if err := c.Check(pb.Admin_Drill_FullMethodName+" on a production center", authz.Admin); err != nil {
				return nil, status.Error(codes.PermissionDenied, err.Error())
			}
		}
	}
	target, err := opstate.ParseDrillTarget(req.GetRegion())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if !target.Center {
		if _, err := s.drainTarget(string(opstate.DrainRegion), target.Region); err != nil {
			return nil, err
		}
	}
	ins, err := s.Store.Instances(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	// Before the production switches: no confirmation makes such a drill
	// useful, so the operator should not be sent to collect them first.
	if why := withdrawsNothing(target, ins); why != "" {
		return nil, status.Error(codes.FailedPrecondition, "refused: "+why)
	}
	if !s.Lab {
		if !s.AllowProductionDrills {
			return nil, status.Error(codes.FailedPrecondition, "refused: failover drills on a production center are off; set drills.allow_production: true in the central scheduler's configuration to allow them")
		}
		if !req.GetProductionConfirmed() {
			return nil, status.Error(codes.FailedPrecondition, "refused: this central scheduler is not a lab (lab: false); a drill withdraws a city's route and moves its STBs to the center. Confirm with --i-know-this-is-production")
		}
	}
	cli, prefix := s.Store.Client(), s.Store.Prefix()
	drills, rev, err := opstate.ListDrills(ctx, cli, prefix)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if why := s.drillRefusal(target, drills, ins, time.Now()); why != "" {
		return nil, status.Error(codes.FailedPrecondition, "refused: "+why)
	}
	dr, err := opstate.StartDrillIf(ctx, cli, prefix, s.Apply.Signer, target, d, rev)
	if errors.Is(err, opstate.ErrDrillsChanged) {
		return nil, status.Error(codes.Aborted, "another drill started or ended meanwhile; try again")
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "store: %v", err)
	}
	resp := &pb.DrillResponse{Until: timestamppb.New(dr.Until)}
	for _, in := range ins {
		if (!target.Center && in.Region == target.Region) || (target.Center && in.Role == instance.Central) {
			resp.Instances = append(resp.Instances, in.ID)
		}
	}
	s.Logger.Warn("failover drill started", "target", target, "until", dr.Until, "instances", resp.Instances)
	return resp, nil
}

// withdrawsNothing says why a drill of target would withdraw no route, or
// "": every registered scheduler of the target announces nothing itself
// (announce.mode none), so the drill would change no routing, and the
// drill's watch would wait for announcements that never come.
func withdrawsNothing(target opstate.DrillTarget, ins []store.Instance) string {
	n := 0
	for _, in := range ins {
		if target.Center != (in.Role == instance.Central) || (!target.Center && in.Region != target.Region) {
			continue
		}
		if in.AnnounceWhy != store.NotAnnouncedModeNone {
			return ""
		}
		n++
	}
	if n == 0 {
		return ""
	}
	whose := "the schedulers of " + target.Region + " announce"
	if target.Center {
		whose = "the central schedulers announce"
	}
	return whose + " nothing themselves (" + store.NotAnnouncedModeNone + "): a drill would withdraw no route; drill a province whose schedulers announce (bgp/ospf)"
}

// drillRefusal says why drilling target now would be unsafe, or "": the
// same target already drilled, or a region that an announcing scheduler
// covers now and would not after (its own schedulers all drilled or not
// announcing, and the center drilled or not announcing). Regions are those
// of the topology and of the registered instances.
func (s *Service) drillRefusal(target opstate.DrillTarget, drills []opstate.Drill, ins []store.Instance, now time.Time) string {
	drilled := map[opstate.DrillTarget]bool{}
	for _, dr := range drills {
		if dr.Until.After(now) {
			drilled[dr.Target] = true
		}
	}
	if drilled[target] {
		return fmt.Sprintf("a drill of %s is already in force", target)
	}
	var regions []string
	if s.Engine != nil {
		if eng := s.Engine(); eng != nil {
			for _, r := range eng.Snapshot().Regions {
				regions = append(regions, r.Name)
			}
		}
	}
	for _, in := range ins {
		if in.Role != instance.Central && in.Region != "" && !slices.Contains(regions, in.Region) {
			regions = append(regions, in.Region)
		}
	}
	covered := func(region string, drilled map[opstate.DrillTarget]bool) (own, center bool) {
		for _, in := range ins {
			switch {
			case !in.Covers():
			case in.Role == instance.Central:
				center = center || !drilled[opstate.CenterTarget]
			case in.Region == region:
				own = own || !drilled[opstate.RegionTarget(region)]
			}
		}
		return own, center
	}
	after := maps.Clone(drilled)
	after[target] = true
	var lost []string
	for _, r := range regions {
		ownNow, centerNow := covered(r, drilled)
		ownAfter, centerAfter := covered(r, after)
		if !(ownNow || centerNow) || ownAfter || centerAfter {
			continue
		}
		own := "none of its own schedulers announces"
		switch {
		case target == opstate.RegionTarget(r):
			own = "its schedulers would be drilled"
		case drilled[opstate.RegionTarget(r)]:
			own = "its schedulers are drilled"
		}
		center := "the center does not announce"
		switch {
		case target.Center:
			center = "the center would be drilled"
		case drilled[opstate.CenterTarget]:
			center = "the center is drilled"
		}
		lost = append(lost, fmt.Sprintf("%s (%s, and %s)", r, own, center))
	}
	if len(lost) > 0 {
		return fmt.Sprintf("drilling %s would leave a region without an announcing scheduler: %s", target, strings.Join(lost, "; "))
	}
	return ""
}
