// Package adminapi implements the central scheduler's admin gRPC API
// (proto/anysched/v1) over the store, and builds the gRPC server that carries
// it with health and reflection services.
package adminapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/stb/netutil"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/etcd/etcdhousekeep"
	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/security/tlsutil"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/wiring/config"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// maxViolations caps the field errors returned in one response.
const maxViolations = 1000

// EmbeddedEtcd is the center's embedded etcd member as the etcd-loss drill
// stops and restarts it (etcdserver.Embedded); an interface so that this
// package, which a city scheduler's console links too, links no etcd server.
type EmbeddedEtcd interface {
	Name() string
	Stop()
	Start(context.Context) error
}

// Service implements pb.AdminServer.
type Service struct {
	pb.UnimplementedAdminServer
	Store  *store.Store
	Logger *slog.Logger
	// Engine is the center's current routing engine (nil before a snapshot).
	Engine func() *steer.Engine
	// Health is the merged availability behind that engine (nil before one).
	Health func() *avail.Availability
	// Drains lists the operator drains in force.
	Drains func() []opstate.Drain
	// Lab is true when the center runs in a lab: drills need no confirmation.
	Lab bool
	// Etcd is the center's embedded etcd, nil with an external cluster.
	Etcd EmbeddedEtcd
	// LabEtcdMembers are the control endpoints of a lab's etcd members
	// (config lab_etcd_members): the etcd-loss drill stops members there.
	LabEtcdMembers []string
	// ID is this center's instance id; Traffic what it answered to each
	// region's STBs (nil: not reported).
	ID      string
	Traffic func() []store.RegionTraffic
	// EtcdLeader names the etcd cluster's leader; nil: asked of Store.
	EtcdLeader func(context.Context) (string, error)
	// Trail is the audit trail (nil: calls are only logged).
	Trail *audit.Trail
	// Apply guards, signs and keeps topology changes (apply.go).
	Apply ApplyPolicy
	// Limits are the route-safety limits documents are validated with
	// (anycast.center_prefix_min_length); zero: the defaults.
	Limits topology.Limits
	// AllowProductionDrills is drills.allow_production: without it a
	// failover drill on a production center (Lab false) is refused.
	AllowProductionDrills bool
	// EtcdHousekeeping is what the center's etcd housekeeper last saw: the
	// store's size against its quota, the alarms (nil: not reported).
	EtcdHousekeeping func() etcdhousekeep.Status
	// QoEModel is the QoE model failure plans solve with (the center's
	// alloc.model; zero: qoe.DefaultParams).
	QoEModel qoe.Params

	failPlanning sync.Mutex // one failure plan at a time
}

// Drain records an operator drain after checking the target exists; a dry
// run changes nothing and forecasts what the drain would do
// (drainforecast.go). A drain with a window is checked as window.go says.
func (s *Service) Drain(ctx context.Context, req *pb.DrainRequest) (*pb.DrainResponse, error) {
	if req.GetDryRun() {
		return s.drainDryRun(ctx, req)
	}
	audit.Annotate(ctx, func(n *audit.Note) { n.Target = req.GetKind() + "/" + req.GetName(); n.Detail = req.GetReason() })
	n, err := s.drainTarget(req.GetKind(), req.GetName())
	if err != nil {
		return nil, err
	}
	kind := opstate.DrainKind(req.GetKind()) // checked by drainTarget
	d, err := s.drainWindow(ctx, req, time.Now())
	if err != nil {
		return nil, err
	}
	// Forced by an admin: every scheduler then applies it even where it
	// leaves a region with no server (opstate.Watcher's drain guard).
	caller, _ := authz.FromContext(ctx)
	d.Kind, d.Name, d.Reason, d.Forced = kind, req.GetName(), req.GetReason(), req.GetForce() && caller.Role >= authz.Admin
	resp := &pb.DrainResponse{Servers: n, From: optionalTime(d.From), Until: optionalTime(d.Until)}
	if same, err := s.sameDrain(d, time.Now()); same || err != nil {
		return resp, err
	}
	if err := s.guardDrain(ctx, d, req.GetForce(), false); err != nil {
		return nil, err
	}
	if err := opstate.SetDrain(ctx, s.Store.Client(), s.Store.Prefix(), s.Apply.Signer, d); err != nil {
		return nil, status.Errorf(codes.Unavailable, "store: %v", err)
	}
	s.Logger.Info("drained", "kind", req.GetKind(), "name", req.GetName(), "reason", req.GetReason(), "servers", n, "window", d.Window())
	resp.Changed = true
	return resp, nil
}

// guardDrain refuses a drain past the removal guard (removalguard.go) at
// any moment of its window (window.go), unless forced by an admin; a
// forced one is logged and audited as such. The target was checked by
// drainTarget: the engine has a snapshot.
func (s *Service) guardDrain(ctx context.Context, d opstate.Drain, force, dryRun bool) error {
	return s.guardDrainExcept(ctx, d, force, dryRun, "drain", "")
}

// guardDrainExcept is guardDrain, retried by retry, leaving region
// emptied out of the regions that must keep a serving server.
func (s *Service) guardDrainExcept(ctx context.Context, d opstate.Drain, force, dryRun bool, retry, emptied string) error {
	snap := s.engine().Snapshot()
	weights, err := s.weightsInForce(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, at := range guardInstants(d, s.drains(), now) {
		ds := drainsAt(s.drains(), at)
		before := inService(snap, ds, weights)
		after := inService(snap, append(ds, d), weights)
		what := fmt.Sprintf("draining %s %s", d.Kind, d.Name)
		if at.After(now) {
			what += " from " + at.UTC().Format(time.RFC3339)
		}
		forced, err := s.guardRemoval(ctx, what, snap, before, after, force, retry, emptied)
		if err != nil {
			return err
		}
		if forced == "" {
			continue
		}
		audit.Annotate(ctx, func(n *audit.Note) {
			n.Detail = strings.TrimPrefix(n.Detail+"; forced past the removal guard: "+forced, "; ")
		})
		s.Logger.Warn("drain forced past the removal guard", "kind", d.Kind, "name", d.Name, "dry_run", dryRun, "what", forced)
		return nil
	}
	return nil
}

// Undrain removes an operator drain; a scheduled one is thereby
// cancelled, which the audit record says.
func (s *Service) Undrain(ctx context.Context, req *pb.UndrainRequest) (*pb.DrainResponse, error) {
	audit.Annotate(ctx, func(n *audit.Note) { n.Target = req.GetKind() + "/" + req.GetName() })
	kind, err := opstate.ParseDrainKind(req.GetKind())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	for _, d := range s.drains() {
		if d.Kind == kind && d.Name == req.GetName() && d.Scheduled() {
			audit.Annotate(ctx, func(n *audit.Note) {
				n.Detail = fmt.Sprintf("cancelled a scheduled drain (%s, %s)", d.Window(), d.State(time.Now()))
			})
		}
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

// explainChannel stands for the channel in a URL explained without a path.
const explainChannel = "CHANNEL"

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
	noPath := path == ""
	if noPath {
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
	// The family of the STB's address, as the HTTP front end decides.
	x := eng.Explain(steer.Request{Client: client, Host: req.GetHost(), Path: p, Query: q, Family: steer.FamilyOf(client)})
	loc := eng.AppendLocation(nil, &x.Decision, p, q)
	if noPath {
		// An STB always asks for a channel: "/" would render {channel} empty
		// ("live//6000"), a URL no STB gets. Show the URL's shape instead.
		if shaped := eng.AppendLocation(nil, &x.Decision, "/"+explainChannel, q); !bytes.Equal(shaped, loc) {
			loc = shaped
			x.Steps = append(x.Steps, fmt.Sprintf("no path given: the URL shows the channel as %s (--path /CHANNEL/index.m3u8 explains a real request)", explainChannel))
		}
	}
	resp := &pb.ExplainResponse{
		Revision: snap.Revision, Result: x.Result, Reason: x.Reason,
		Service: x.Names.Service, Zone: x.Names.Zone, ClientRegion: x.Names.ClientRegion, Region: x.Names.Region,
		Node: x.Names.Node, Server: x.Names.Server, Address: x.Names.Address, BitrateKbps: int32(x.Decision.BitrateKbps),
		Location: string(loc), Steps: x.Steps, Family: x.Family, AddressFamily: x.GivenFamily,
	}
	for _, c := range x.Candidates {
		resp.Candidates = append(resp.Candidates, &pb.Candidate{
			Server: c.Server, Node: c.Node, Region: c.Region, Address: c.Address, DistanceKm: c.DistanceKm,
			Weight: int32(math.Round(c.Effective)), TopologyWeight: int32(c.Weight), Available: c.Available, Chosen: c.Chosen, Why: c.Why,
		})
	}
	return resp, nil
}

func b2i32(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// Status lists the registered scheduler instances.
func (s *Service) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	resp := &pb.StatusResponse{CenterId: s.ID}
	switch p, err := s.Store.CurrentPointer(ctx); {
	case err == nil:
		resp.Revision, resp.Digest, resp.Epoch = p.Revision, p.Digest, p.Epoch
	case errors.Is(err, store.ErrNoTopology):
	case errors.Is(err, store.ErrCorrupt):
		// The revision alone: the digest of a pointer that cannot be read
		// is no one's.
		if resp.Revision, err = s.Store.CurrentRevision(ctx); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error()) // "store: ..."
		}
	default:
		return nil, status.Error(codes.Unavailable, err.Error()) // "store: ..."
	}
	ins, err := s.Store.Instances(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error()) // "store: ..."
	}
	s.healthStatus(resp)
	if s.Traffic != nil {
		resp.CenterTraffic = trafficPB(s.Traffic())
	}
	if s.EtcdHousekeeping != nil {
		resp.Etcd = etcdPB(s.EtcdHousekeeping())
	}
	for _, in := range ins {
		resp.Instances = append(resp.Instances, &pb.Instance{
			Id: in.ID, Role: in.Role.String(), Region: in.Region, Version: in.Version,
			SnapshotRevision: in.SnapshotRevision, SnapshotDigest: in.SnapshotDigest, State: in.State.String(),
			StartedAt: timestamppb.New(in.StartedAt), UpdatedAt: timestamppb.New(in.UpdatedAt),
			SnapshotAgeSeconds: in.SnapshotAge, Hostname: in.Hostname, AdminAddress: in.AdminAddress,
			Announced: in.Announced, AnnounceReason: in.AnnounceWhy, Announces: in.Announces, BgpPeers: peersPB(in.Peers),
			Qoe: qoePB(in.QoE), Traffic: trafficPB(in.Traffic), Planning: planningPB(in.Planning),
		})
	}
	return resp, nil
}

// etcdPB is the housekeeper's status; nil before its first reading.
func etcdPB(st etcdhousekeep.Status) *pb.EtcdStatus {
	if st.At.IsZero() {
		return nil
	}
	out := &pb.EtcdStatus{ObservedAt: timestamppb.New(st.At), Leading: st.Leading, Revision: st.Revision, CompactedRevision: st.Compacted,
		Problems: st.Problems, LastCompaction: optionalTime(st.LastCompaction), LastDefrag: optionalTime(st.LastDefrag)}
	for _, m := range st.Members {
		out.Members = append(out.Members, &pb.EtcdMember{Name: m.Name, Endpoint: m.Endpoint, Leader: m.Leader,
			DbSizeBytes: m.DBSize, DbSizeInUseBytes: m.DBSizeInUse, QuotaBytes: m.Quota, Error: m.Err})
	}
	for _, a := range st.Alarms {
		out.Alarms = append(out.Alarms, &pb.EtcdAlarm{Member: a.Member, Alarm: a.Type})
	}
	return out
}

func optionalTime(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
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

func planningPB(ps []store.QoEPlan) []*pb.QoEPlan {
	var out []*pb.QoEPlan
	for i := range ps {
		out = append(out, qoePB(&ps[i]))
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
		Region: q.Region, AtDesired: q.AtDesired, Switches: int64(q.Switches), Drops: int64(q.Drops),
		Starved: int64(q.Starved), SafeMode: q.SafeMode, Idle: q.Idle, HeldKbps: q.HeldKbps, CapacityKbps: q.CapacityKbps,
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
			// Drained is the operator's decision, health is measured: a
			// drained server counts in both. A server no live checker
			// reports on is unchecked, not healthy.
			switch {
			case !av.Healthy[si]:
				rh.Unhealthy++
			case !av.Figures[si].Measured:
				rh.Unchecked++
			default:
				rh.Healthy++
			}
			if av.Drained[si] {
				rh.Drained++
			}
			if av.Available[si] {
				rh.Available++
			}
			if fd := av.FamilyDown; fd != nil {
				rh.Ipv4Down += b2i32(fd[0][si])
				rh.Ipv6Down += b2i32(fd[1][si])
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
	now := time.Now()
	for _, d := range s.drains() {
		resp.Drains = append(resp.Drains, &pb.DrainEntry{Kind: string(d.Kind), Name: d.Name, Reason: d.Reason, At: timestamppb.New(d.At),
			From: optionalTime(d.From), Until: optionalTime(d.Until), State: string(d.State(now)), Forced: d.Forced})
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

// NewServer builds the gRPC server: the admin service, gRPC health (SERVING
// while the process runs) and reflection for grpcurl, every call
// authenticated (client certificate, or "local" on loopback), checked
// against the role table, logged and audited (svc.Trail).
func NewServer(c config.GRPC, svc *Service, log *slog.Logger) (*grpc.Server, *grpchealth.Server, error) {
	g := &guard{log: log, trail: svc.Trail}
	if host, _, err := net.SplitHostPort(c.Listen); err == nil {
		g.local = netutil.LoopbackHost(host)
	}
	if c.LocalRole != "" {
		r, err := authz.ParseRole(c.LocalRole)
		if err != nil {
			return nil, nil, fmt.Errorf("grpc.local_role: %w", err)
		}
		g.localRole = r
	}
	maxReq := c.MaxRequestBytes
	if maxReq <= 0 {
		maxReq = config.DefaultMaxRequestBytes
	}
	g.docs = newAdmission(maxDocumentCalls)
	opts := []grpc.ServerOption{
		// Checked against the message's length prefix, before it is read
		// or decoded: ResourceExhausted.
		grpc.MaxRecvMsgSize(maxReq),
		grpc.MaxSendMsgSize(pb.MaxMessageBytes),
		// A connection's calls each may receive a message of maxReq.
		grpc.MaxConcurrentStreams(maxStreamsPerConn),
		// The role check and the bound on documents, on the call's
		// headers: before gRPC reads the message (admission.go).
		grpc.InTapHandle(g.tap),
		grpc.StatsHandler(g.docs),
		grpc.ChainUnaryInterceptor(g.unary),
		grpc.ChainStreamInterceptor(g.stream),
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
