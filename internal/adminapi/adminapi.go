// Package adminapi implements the central scheduler's admin gRPC API
// (proto/anysched/v1) over the store, and builds the gRPC server that carries
// it with health and reflection services.
package adminapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/health"
	"github.com/anysched/anysched/internal/opstate"
	"github.com/anysched/anysched/internal/steer"
	"github.com/anysched/anysched/internal/store"
	"github.com/anysched/anysched/internal/tlsutil"
	"github.com/anysched/anysched/internal/topology"
	"github.com/anysched/anysched/internal/yamlstrict"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// MaxMessageBytes bounds one admin message: a province-scale topology
// (10,000 servers, 100,000 networks) is about 10 MB of YAML.
const MaxMessageBytes = 128 << 20

// maxViolations caps the field errors returned in one response.
const maxViolations = 1000

// Service implements pb.AdminServer.
type Service struct {
	pb.UnimplementedAdminServer
	Store  *store.Store
	Logger *slog.Logger
	// Engine is the center's current routing engine (nil before a snapshot).
	Engine func() *steer.Engine
	// Health is the merged availability behind that engine (nil before one).
	Health func() *health.Availability
	// Drains lists the operator drains in force.
	Drains func() []opstate.Drain
	// Lab is true when the center runs in a lab: drills need no confirmation.
	Lab bool
	// Etcd is the center's embedded etcd, nil with an external cluster.
	Etcd *store.Embedded
	// LabEtcdMembers are the control endpoints of a lab's etcd members
	// (config lab_etcd_members): the etcd-loss drill stops members there.
	LabEtcdMembers []string
	// ID is this center's instance id; Traffic what it answered to each
	// region's STBs (nil: not reported).
	ID      string
	Traffic func() []store.RegionTraffic
	// EtcdLeader names the etcd cluster's leader; nil: asked of Store.
	EtcdLeader func(context.Context) (string, error)
}

// DrillEtcdLoss stops the embedded etcd, or members of the lab's etcd
// cluster, for the drill's duration (lab only).
func (s *Service) DrillEtcdLoss(ctx context.Context, req *pb.DrillEtcdLossRequest) (*pb.DrillResponse, error) {
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
	go func() { // stopping etcd takes a moment (it closes its listeners): answer now
		s.Etcd.Stop()
		time.Sleep(time.Until(until))
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
// through their control endpoints, the current leader first when asked;
// each starts again by itself after d.
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
			st, err := store.GetMember(ctx, a)
			return err == nil && st.Name == leader
		})
		if i < 0 {
			return nil, status.Errorf(codes.FailedPrecondition, "leader first: the leader %s is not behind any of lab_etcd_members", leader)
		}
		first := addrs[i] // before Delete shifts the rest down
		addrs = append([]string{first}, slices.Delete(addrs, i, i+1)...)
	}
	until := time.Now().Add(d)
	resp := &pb.DrillResponse{Until: timestamppb.New(until), EtcdMembers: uint32(total), QuorumKept: total-n >= total/2+1, EtcdLeader: leader}
	s.Logger.Warn("etcd-loss drill: stopping lab etcd members", "members", n, "of", total, "leader", leader, "leader_first", leaderFirst, "order", addrs[:n], "quorum_kept", resp.QuorumKept, "until", until)
	names, errs := make([]string, n), make([]error, n)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i, addr := range addrs[:n] { // together: the quorum goes at once
		wg.Go(func() {
			st, err := store.StopMember(ctx, addr, d)
			names[i], errs[i] = st.Name, err
		})
	}
	wg.Wait()
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", addrs[i], err))
			continue
		}
		resp.EtcdMembersStopped = append(resp.EtcdMembersStopped, names[i])
	}
	if len(failed) > 0 {
		return nil, status.Errorf(codes.Unavailable, "stopped %v; could not stop %s", resp.EtcdMembersStopped, strings.Join(failed, "; "))
	}
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
func (s *Service) Drill(ctx context.Context, req *pb.DrillRequest) (*pb.DrillResponse, error) {
	d := time.Duration(req.GetDurationSeconds() * float64(time.Second))
	if d < time.Second || d > time.Hour {
		return nil, status.Errorf(codes.InvalidArgument, "duration: %s is out of range [1s, 1h]", d)
	}
	if !s.Lab && !req.GetProductionConfirmed() {
		return nil, status.Error(codes.FailedPrecondition, "refused: this central scheduler is not a lab (lab: false); a drill withdraws a city's route and moves its STBs to the center. Confirm with --i-know-this-is-production")
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
	dr, err := opstate.StartDrill(ctx, s.Store.Client(), s.Store.Prefix(), target, d)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "store: %v", err)
	}
	resp := &pb.DrillResponse{Until: timestamppb.New(dr.Until)}
	if ins, err := s.Store.Instances(ctx); err == nil {
		for _, in := range ins {
			if (!target.Center && in.Region == target.Region) || (target.Center && in.Role == "central") {
				resp.Instances = append(resp.Instances, in.ID)
			}
		}
	}
	s.Logger.Warn("failover drill started", "target", target, "until", dr.Until, "instances", resp.Instances)
	return resp, nil
}

// Drain records an operator drain after checking the target exists.
func (s *Service) Drain(ctx context.Context, req *pb.DrainRequest) (*pb.DrainResponse, error) {
	n, err := s.drainTarget(req.GetKind(), req.GetName())
	if err != nil {
		return nil, err
	}
	kind := opstate.DrainKind(req.GetKind()) // checked by drainTarget
	for _, d := range s.drains() {
		if d.Kind == kind && d.Name == req.GetName() && d.Reason == req.GetReason() {
			return &pb.DrainResponse{Servers: n, Changed: false}, nil
		}
	}
	if err := opstate.SetDrain(ctx, s.Store.Client(), s.Store.Prefix(), opstate.Drain{Kind: kind, Name: req.GetName(), Reason: req.GetReason()}); err != nil {
		return nil, status.Errorf(codes.Unavailable, "store: %v", err)
	}
	s.Logger.Info("drained", "kind", req.GetKind(), "name", req.GetName(), "reason", req.GetReason(), "servers", n)
	return &pb.DrainResponse{Servers: n, Changed: true}, nil
}

// Undrain removes an operator drain.
func (s *Service) Undrain(ctx context.Context, req *pb.UndrainRequest) (*pb.DrainResponse, error) {
	kind, err := opstate.ParseDrainKind(req.GetKind())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	existed, err := opstate.ClearDrain(ctx, s.Store.Client(), s.Store.Prefix(), kind, req.GetName())
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "store: %v", err)
	}
	n, _ := s.drainTarget(req.GetKind(), req.GetName())
	if existed {
		s.Logger.Info("undrained", "kind", req.GetKind(), "name", req.GetName())
	}
	return &pb.DrainResponse{Servers: n, Changed: existed}, nil
}

func (s *Service) drains() []opstate.Drain {
	if s.Drains == nil {
		return nil
	}
	return s.Drains()
}

// drainTarget checks kind and name against the current topology and counts
// the servers they cover.
func (s *Service) drainTarget(kind, name string) (int32, error) {
	k, err := opstate.ParseDrainKind(kind)
	if err != nil {
		return 0, status.Error(codes.InvalidArgument, err.Error())
	}
	var eng *steer.Engine
	if s.Engine != nil {
		eng = s.Engine()
	}
	if eng == nil {
		return 0, status.Error(codes.Unavailable, "the center has no topology snapshot yet")
	}
	snap := eng.Snapshot()
	switch k {
	case opstate.DrainServer:
		if _, ok := snap.Server(name); ok {
			return 1, nil
		}
	case opstate.DrainNode:
		if i, ok := snap.Node(name); ok {
			return int32(len(snap.Nodes[i].Servers)), nil
		}
	case opstate.DrainRegion:
		if i, ok := snap.Region(name); ok {
			return int32(len(snap.Regions[i].Servers)), nil
		}
	}
	return 0, status.Errorf(codes.NotFound, "no %s named %q in topology revision %d", kind, name, snap.Revision)
}

// Explain answers as the center (or, with region, as that region's
// scheduler) would answer the request, with the reasoning.
func (s *Service) Explain(_ context.Context, req *pb.ExplainRequest) (*pb.ExplainResponse, error) {
	client, err := netip.ParseAddr(req.GetClientIp())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "client_ip: not an IP address: %q", req.GetClientIp())
	}
	if req.GetHost() == "" {
		return nil, status.Error(codes.InvalidArgument, "host: required")
	}
	path := req.GetPath()
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") {
		return nil, status.Errorf(codes.InvalidArgument, "path: must start with '/': %q", path)
	}
	var eng *steer.Engine
	if s.Engine != nil {
		eng = s.Engine()
	}
	if eng == nil {
		return nil, status.Error(codes.Unavailable, "the center has no topology snapshot yet")
	}
	snap := eng.Snapshot()
	if r := req.GetRegion(); r != "" {
		if _, ok := snap.Region(r); !ok {
			return nil, status.Errorf(codes.InvalidArgument, "region: unknown region %q in revision %d", r, snap.Revision)
		}
		// The center's own engine, answering as that region's scheduler:
		// the same build every scheduler makes (steer.Build), not a rebuild.
		eng, _ = eng.AsRegion(r)
	}
	p, q, _ := strings.Cut(path, "?")
	x := eng.Explain(steer.Request{Client: client, Host: req.GetHost(), Path: p, Query: q})
	resp := &pb.ExplainResponse{
		Revision: snap.Revision, Result: x.Result, Reason: x.Reason,
		Service: x.Names.Service, Zone: x.Names.Zone, ClientRegion: x.Names.ClientRegion, Region: x.Names.Region,
		Node: x.Names.Node, Server: x.Names.Server, Address: x.Names.Address, BitrateKbps: int32(x.Decision.BitrateKbps),
		Location: string(eng.AppendLocation(nil, &x.Decision, p, q)), Steps: x.Steps,
	}
	for _, c := range x.Candidates {
		resp.Candidates = append(resp.Candidates, &pb.Candidate{
			Server: c.Server, Node: c.Node, Region: c.Region, Address: c.Address, DistanceKm: c.DistanceKm,
			Weight: int32(c.Weight), Available: c.Available, Chosen: c.Chosen, Why: c.Why,
		})
	}
	return resp, nil
}

// ApplyTopology validates and stores a document.
func (s *Service) ApplyTopology(ctx context.Context, req *pb.ApplyTopologyRequest) (*pb.ApplyTopologyResponse, error) {
	t, err := topology.Decode(req.GetDocument())
	if err == nil {
		err = topology.Validate(t)
	}
	if err != nil {
		return nil, invalid(err)
	}
	base := req.GetBaseRevision()
	if base == 0 {
		base = t.Revision
	}
	_, digest, err := store.Canonical(t)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	summary := summarize(t, digest)
	if req.GetDryRun() {
		cur, err := s.Store.Current(ctx)
		if err != nil && !errors.Is(err, store.ErrNoTopology) {
			return nil, status.Errorf(codes.Unavailable, "read current topology: %v", err)
		}
		var rev int64
		var curDigest string
		if cur != nil {
			rev, curDigest = cur.Revision, cur.Digest
		}
		if base != 0 && !req.GetForce() && base != rev {
			return nil, status.Error(codes.FailedPrecondition, (&store.StaleError{Base: base, Current: rev}).Error())
		}
		return &pb.ApplyTopologyResponse{Revision: rev, Applied: false, Summary: summary, Changed: curDigest != digest}, nil
	}
	res, err := s.Store.Apply(ctx, t, store.ApplyOptions{BaseRevision: base, Force: req.GetForce()})
	var stale *store.StaleError
	switch {
	case errors.As(err, &stale):
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, store.ErrConflict):
		return nil, status.Error(codes.Aborted, err.Error())
	case err != nil:
		s.Logger.Error("apply failed", "err", err)
		return nil, status.Error(codes.Unavailable, err.Error()) // "store: ..."
	}
	return &pb.ApplyTopologyResponse{Revision: res.Revision, Applied: res.Changed, Summary: summary, Changed: res.Changed}, nil
}

// GetTopology returns the stored document with its revision.
func (s *Service) GetTopology(ctx context.Context, _ *pb.GetTopologyRequest) (*pb.GetTopologyResponse, error) {
	st, err := s.Store.Current(ctx)
	if errors.Is(err, store.ErrNoTopology) {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error()) // "store: ..."
	}
	st.Topology.Revision = st.Revision
	doc, err := st.Topology.YAML()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pb.GetTopologyResponse{Revision: st.Revision, Document: doc, Summary: summarize(st.Topology, st.Digest), AppliedAt: timestamppb.New(st.AppliedAt)}, nil
}

// Status lists the registered scheduler instances.
func (s *Service) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	rev, err := s.Store.CurrentRevision(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error()) // "store: ..."
	}
	ins, err := s.Store.Instances(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error()) // "store: ..."
	}
	resp := &pb.StatusResponse{Revision: rev, CenterId: s.ID}
	s.healthStatus(resp)
	if s.Traffic != nil {
		resp.CenterTraffic = trafficPB(s.Traffic())
	}
	for _, in := range ins {
		resp.Instances = append(resp.Instances, &pb.Instance{
			Id: in.ID, Role: in.Role, Region: in.Region, Version: in.Version,
			SnapshotRevision: in.SnapshotRevision, State: in.State,
			StartedAt: timestamppb.New(in.StartedAt), UpdatedAt: timestamppb.New(in.UpdatedAt),
			SnapshotAgeSeconds: in.SnapshotAge, Hostname: in.Hostname, AdminAddress: in.AdminAddress,
			Announced: in.Announced, AnnounceReason: in.AnnounceWhy, Announces: in.Announces, BgpPeers: peersPB(in.Peers),
			Qoe: qoePB(in.QoE), Traffic: trafficPB(in.Traffic),
		})
	}
	return resp, nil
}

func trafficPB(ts []store.RegionTraffic) []*pb.RegionTraffic {
	var out []*pb.RegionTraffic
	for _, t := range ts {
		out = append(out, &pb.RegionTraffic{
			ClientRegion: t.ClientRegion, Answered: t.Answered, Failed: t.Failed,
			RunStart: timestamppb.New(t.RunStart), Last: timestamppb.New(t.Last),
		})
	}
	return out
}

func qoePB(q *store.QoEPlan) *pb.QoEPlan {
	if q == nil {
		return nil
	}
	return &pb.QoEPlan{
		Sessions: int64(q.Sessions), Planned: int64(q.Planned), Fallback: int64(q.Fallback),
		Objective: q.Objective, Gap: q.Gap, AgeSeconds: time.Since(q.MadeAt).Seconds(), Peers: int32(q.Peers),
	}
}

// healthStatus adds per-region health counts, live checkers and drains.
func (s *Service) healthStatus(resp *pb.StatusResponse) {
	if s.Engine == nil || s.Health == nil {
		return
	}
	eng, av := s.Engine(), s.Health()
	if eng == nil || av == nil || len(av.Available) != len(eng.Snapshot().Servers) {
		return
	}
	snap := eng.Snapshot()
	for ri, rv := range snap.Regions {
		rh := &pb.RegionHealth{Region: rv.Name, Servers: int32(len(rv.Servers))}
		for _, si := range rv.Servers {
			switch {
			case av.Drained[si]:
				rh.Drained++
			case av.Healthy[si]:
				rh.Healthy++
			default:
				rh.Unhealthy++
			}
			if av.Available[si] {
				rh.Available++
			}
		}
		for _, ni := range snap.Regions[ri].Nodes {
			if av.Panic[ni] {
				rh.PanicNodes++
			}
		}
		resp.Regions = append(resp.Regions, rh)
	}
	for _, c := range av.Checkers {
		resp.Checkers = append(resp.Checkers, &pb.CheckerStatus{Id: c.ID, Region: c.Region, Targets: int32(c.Targets), StartedAt: timestamppb.New(c.StartedAt)})
	}
	sort.Slice(resp.Checkers, func(i, j int) bool { return resp.Checkers[i].Id < resp.Checkers[j].Id })
	for _, d := range s.drains() {
		resp.Drains = append(resp.Drains, &pb.DrainEntry{Kind: string(d.Kind), Name: d.Name, Reason: d.Reason, At: timestamppb.New(d.At)})
	}
	sort.Slice(resp.Drains, func(i, j int) bool {
		return resp.Drains[i].Kind+resp.Drains[i].Name < resp.Drains[j].Kind+resp.Drains[j].Name
	})
}

func peersPB(ps []store.Peer) []*pb.BGPPeer {
	var out []*pb.BGPPeer
	for _, p := range ps {
		out = append(out, &pb.BGPPeer{Address: p.Address, Asn: p.ASN, State: p.State})
	}
	return out
}

func summarize(t *topology.Topology, digest string) *pb.TopologySummary {
	c := t.Counts()
	return &pb.TopologySummary{
		Regions: int32(c.Regions), Nodes: int32(c.Nodes), Servers: int32(c.Servers),
		Zones: int32(c.Zones), Networks: int32(c.Networks), Services: int32(c.Services), Digest: digest,
	}
}

// invalid turns validation errors into INVALID_ARGUMENT with one field
// violation per problem.
func invalid(err error) error {
	fes, ok := yamlstrict.AsErrors(err)
	if !ok {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	br := &errdetails.BadRequest{}
	for i, fe := range fes {
		if i == maxViolations {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: "", Description: fmt.Sprintf("... and %d more", len(fes)-maxViolations)})
			break
		}
		desc := fe.Msg
		if fe.Line > 0 {
			desc = fmt.Sprintf("%s (line %d)", fe.Msg, fe.Line)
		}
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: fe.Path, Description: desc})
	}
	st, derr := status.New(codes.InvalidArgument, fmt.Sprintf("topology rejected: %d problem(s), nothing was applied", len(fes))).WithDetails(br)
	if derr != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return st.Err()
}

// NewServer builds the gRPC server: the admin service, gRPC health (SERVING
// while the process runs) and reflection for grpcurl.
func NewServer(c config.GRPC, svc *Service, log *slog.Logger) (*grpc.Server, *grpchealth.Server, error) {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.ChainUnaryInterceptor(logCalls(log)),
	}
	if c.TLS.Enabled() {
		tc, err := tlsutil.Server(c.TLS)
		if err != nil {
			return nil, nil, fmt.Errorf("grpc.tls: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	srv := grpc.NewServer(opts...)
	pb.RegisterAdminServer(srv, svc)
	hs := grpchealth.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	return srv, hs, nil
}

func logCalls(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := h(ctx, req)
		lv := slog.LevelDebug
		if _, isApply := req.(*pb.ApplyTopologyRequest); isApply || err != nil {
			lv = slog.LevelInfo
		}
		log.Log(ctx, lv, "admin call", "method", info.FullMethod, "code", status.Code(err).String(), "took", time.Since(start).Round(time.Microsecond).String())
		return resp, err
	}
}
