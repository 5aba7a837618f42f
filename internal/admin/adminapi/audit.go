package adminapi

import (
	"context"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Bounds of one Audit answer; limit 0 asks for the default.
const (
	defaultAuditList = 100
	maxAuditList     = 10000
)

// Audit lists the audit trail, newest first.
func (s *Service) Audit(ctx context.Context, req *pb.AuditRequest) (*pb.AuditResponse, error) {
	if s.Trail == nil {
		return nil, status.Error(codes.FailedPrecondition, "this center keeps no audit trail")
	}
	limit := int(req.GetLimit())
	switch {
	case limit < 0:
		return nil, status.Errorf(codes.InvalidArgument, "limit: %d must be >= 0", limit)
	case limit == 0:
		limit = defaultAuditList
	case limit > maxAuditList:
		limit = maxAuditList
	}
	var since time.Time // zero: any age
	if req.GetSince() != nil {
		since = req.GetSince().AsTime()
	}
	recs, err := s.Trail.List(ctx, limit, since)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := &pb.AuditResponse{Entries: make([]*pb.AuditEntry, 0, len(recs))}
	for _, r := range recs {
		resp.Entries = append(resp.Entries, &pb.AuditEntry{
			At: timestamppb.New(r.At), Identity: r.Identity, Role: r.Role, Peer: r.Peer, Method: r.Method,
			Target: r.Target, Code: r.Code, Message: r.Message, Revision: r.Revision, Detail: r.Detail,
		})
	}
	return resp, nil
}
