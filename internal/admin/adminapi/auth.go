package adminapi

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/audit"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
)

// rule is what a method needs and whether it only reads.
type rule struct {
	need authz.Role
	// read: a pure read is not audited (unless refused); everything else is.
	read bool
}

// methodRule is the role table: every method the server carries, with the
// least role that may call it. A method missing here is refused, so a new
// RPC is closed until someone decides who may call it. Drill is listed at
// operator (lab drills); the handler asks admin of a production drill.
// Maintenance empties a region and withdraws its route: admin. Backup
// reads the whole province out and Restore writes it: admin, both audited.
func methodRule(method string) (rule, bool) {
	switch method {
	case pb.Admin_GetTopology_FullMethodName, pb.Admin_Status_FullMethodName, pb.Admin_Explain_FullMethodName,
		pb.Admin_History_FullMethodName, pb.Admin_DiffTopology_FullMethodName, pb.Admin_Audit_FullMethodName,
		pb.Admin_WhoAmI_FullMethodName, pb.Admin_GetBalance_FullMethodName, pb.Admin_ListMaintenance_FullMethodName,
		pb.Admin_PlanFailures_FullMethodName,
		healthpb.Health_Check_FullMethodName, healthpb.Health_Watch_FullMethodName, healthpb.Health_List_FullMethodName,
		reflectionv1.ServerReflection_ServerReflectionInfo_FullMethodName,
		reflectionv1alpha.ServerReflection_ServerReflectionInfo_FullMethodName:
		return rule{need: authz.Viewer, read: true}, true
	case pb.Admin_ApplyTopology_FullMethodName, pb.Admin_Drain_FullMethodName, pb.Admin_Undrain_FullMethodName,
		pb.Admin_Drill_FullMethodName, pb.Admin_DrillEtcdLoss_FullMethodName, pb.Admin_SetBalance_FullMethodName,
		pb.Admin_CancelMaintenance_FullMethodName:
		return rule{need: authz.Operator}, true
	case pb.Admin_Rollback_FullMethodName, pb.Admin_Maintenance_FullMethodName, pb.Admin_Backup_FullMethodName, pb.Admin_Restore_FullMethodName:
		return rule{need: authz.Admin}, true
	}
	return rule{}, false
}

// guard authenticates, authorizes, logs and audits every call.
type guard struct {
	log   *slog.Logger
	trail *audit.Trail // nil: the log only
	// local: the listener is on loopback, so a caller without a
	// certificate from a loopback address is "local" with localRole.
	local     bool
	localRole authz.Role
	// docs bounds the calls carrying a document (nil: unbounded, the
	// in-process Gate, whose callers' requests are already decoded).
	docs *admission
}

// identify says who the caller is: its verified client certificate, or
// "local" on a loopback listener; an empty identity is nobody.
func (g *guard) identify(ctx context.Context) authz.Caller {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return authz.Caller{}
	}
	addr := p.Addr.String()
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
		return authz.FromCertificate(ti.State.VerifiedChains[0][0], addr)
	}
	if g.local && loopbackAddr(p.Addr) {
		return authz.Caller{Identity: authz.Local, Role: g.localRole, Peer: addr}
	}
	return authz.Caller{Peer: addr}
}

func loopbackAddr(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// authorize is nil when c may call method.
func (g *guard) authorize(method string, c authz.Caller) error {
	r, ok := methodRule(method)
	if !ok {
		return status.Errorf(codes.PermissionDenied, "%s is not in the admin API's role table: refused", method)
	}
	if c.Identity == "" {
		return status.Errorf(codes.Unauthenticated, "%s: no verified client certificate from %s", method, c.Peer)
	}
	if err := c.Check(method, r.need); err != nil {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return nil
}

func (g *guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	c := g.identify(ctx)
	ctx, note := audit.WithNote(authz.NewContext(ctx, c))
	var resp any
	err := g.authorize(info.FullMethod, c)
	if err == nil {
		err = newerRequest(req)
	}
	if err == nil {
		resp, err = h(ctx, req)
	}
	g.record(ctx, info.FullMethod, c, note, err, start)
	return resp, err
}

func (g *guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	c := g.identify(ss.Context())
	ctx, note := audit.WithNote(authz.NewContext(ss.Context(), c))
	err := g.authorize(info.FullMethod, c)
	if err == nil {
		err = h(srv, &callerStream{ServerStream: ss, ctx: ctx})
	}
	g.record(ctx, info.FullMethod, c, note, err, start)
	return err
}

// callerStream carries the caller in its context.
type callerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *callerStream) Context() context.Context { return s.ctx }

// auditTimeout bounds writing one audit record.
const auditTimeout = 5 * time.Second

// record logs the call, and audits it unless it is a read that went
// through. The record is written before the reply leaves: a caller who got
// an answer to a change has been recorded, or the failure to record it is
// in the log and anysched_audit_write_failures_total. The change itself
// stands either way (it happened; failing its reply would lie).
func (g *guard) record(ctx context.Context, method string, c authz.Caller, n *audit.Note, err error, start time.Time) {
	code := status.Code(err)
	r, _ := methodRule(method)
	refused := code == codes.PermissionDenied || code == codes.Unauthenticated
	audited := !r.read || refused
	lv := slog.LevelDebug
	if audited || err != nil {
		lv = slog.LevelInfo
	}
	attrs := []any{"method", method, "identity", c.Identity, "role", c.Role.String(), "peer", c.Peer, "code", code.String(),
		"took", time.Since(start).Round(time.Microsecond).String()}
	if n.Target != "" {
		attrs = append(attrs, "target", n.Target)
	}
	if n.Revision != 0 {
		attrs = append(attrs, "revision", n.Revision)
	}
	if n.Detail != "" {
		attrs = append(attrs, "detail", n.Detail)
	}
	if err != nil {
		attrs = append(attrs, "message", status.Convert(err).Message())
	}
	g.log.Log(ctx, lv, "admin call", attrs...)
	if !audited || g.trail == nil {
		return
	}
	rec := audit.Record{
		At: start, Identity: c.Identity, Role: c.Role.String(), Peer: c.Peer, Method: method,
		Target: n.Target, Code: code.String(), Revision: n.Revision, Detail: n.Detail,
	}
	if err != nil {
		rec.Message = status.Convert(err).Message()
	}
	// Not the call's context: a caller hanging up must not skip its record.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	_ = g.trail.Write(wctx, rec) // logged and counted by the trail
}

// WhoAmI tells the caller who the server takes it for.
func (s *Service) WhoAmI(ctx context.Context, _ *pb.WhoAmIRequest) (*pb.WhoAmIResponse, error) {
	c, ok := authz.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no authenticated caller (called outside the admin server)")
	}
	return &pb.WhoAmIResponse{Identity: c.Identity, Role: c.Role.String(), Peer: c.Peer}, nil
}
