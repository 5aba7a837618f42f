package adminapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/anysched/anysched/internal/store"
	"github.com/anysched/anysched/internal/topology"
	"github.com/anysched/anysched/internal/yamlstrict"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

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
