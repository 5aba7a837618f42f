package adminapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// maxDiffNames caps each list of a diff in a response: a province's
// 100,000 networks, all renamed, are a count to read, not a list.
const maxDiffNames = 1000

// History lists the recorded applies and rollbacks, newest first.
func (s *Service) History(ctx context.Context, req *pb.HistoryRequest) (*pb.HistoryResponse, error) {
	if req.GetLimit() < 0 {
		return nil, status.Error(codes.InvalidArgument, "limit: must be >= 0")
	}
	rev, err := s.Store.CurrentRevision(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error()) // "store: ..."
	}
	es, err := s.Store.History(ctx, int(req.GetLimit()))
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := &pb.HistoryResponse{Current: rev}
	for _, e := range es {
		note := e.Note
		if e.Change != "" {
			note += ": " + e.Change
		}
		resp.Entries = append(resp.Entries, &pb.HistoryEntry{
			Revision: e.Revision, Digest: e.Digest, AppliedAt: timestamppb.New(e.AppliedAt),
			Identity: e.Identity, Note: note, Summary: countsPB(e.Counts, e.Digest), Kept: e.Kept,
		})
	}
	return resp, nil
}

// DiffTopology compares two kept revisions, or the current topology with a
// document.
func (s *Service) DiffTopology(ctx context.Context, req *pb.DiffTopologyRequest) (*pb.DiffTopologyResponse, error) {
	if len(req.GetDocument()) > 0 {
		if req.GetFromRevision() != 0 || req.GetToRevision() != 0 {
			return nil, status.Error(codes.InvalidArgument, "document: compared with the current topology; give no revisions with it")
		}
		t, _, _, err := s.Limits.Load(req.GetDocument())
		if err != nil {
			return nil, invalid(err)
		}
		cur, err := s.Store.Current(ctx)
		if err != nil && !errors.Is(err, store.ErrNoTopology) {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		var from *topology.Topology
		var rev int64
		if cur != nil {
			from, rev = cur.Topology, cur.Revision
		}
		return &pb.DiffTopologyResponse{FromRevision: rev, Diff: diffPB(topology.Diff(from, t))}, nil
	}
	if req.GetFromRevision() <= 0 || req.GetToRevision() < 0 {
		return nil, status.Error(codes.InvalidArgument, "from_revision: required, a kept revision (see schedctl history), or a document")
	}
	from, err := s.revision(ctx, req.GetFromRevision())
	if err != nil {
		return nil, err
	}
	var to *store.Stored
	if req.GetToRevision() == 0 {
		to, err = s.Store.Current(ctx)
		if err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
	} else if to, err = s.revision(ctx, req.GetToRevision()); err != nil {
		return nil, err
	}
	return &pb.DiffTopologyResponse{FromRevision: from.Revision, ToRevision: to.Revision, Diff: diffPB(topology.Diff(from.Topology, to.Topology))}, nil
}

func (s *Service) revision(ctx context.Context, rev int64) (*store.Stored, error) {
	st, err := s.Store.Revision(ctx, rev)
	switch {
	case errors.Is(err, store.ErrNotKept) || errors.Is(err, store.ErrNoRevision):
		return nil, status.Error(codes.NotFound, err.Error())
	case err != nil:
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return st, nil
}

// diffPB converts a diff, each list capped at maxDiffNames (its last entry
// then says how many more there are).
func diffPB(d *topology.Changes) *pb.TopologyDiff {
	out := &pb.TopologyDiff{
		ServersBefore: int32(d.ServersBefore), ServersAfter: int32(d.ServersAfter),
		NetworksBefore: int32(d.NetworksBefore), NetworksAfter: int32(d.NetworksAfter),
		EmptiedRegions: d.EmptiedRegions,
	}
	for _, sec := range d.Sections {
		ps := &pb.DiffSection{Kind: sec.Kind, Added: capNames(sec.Added), Removed: capNames(sec.Removed)}
		for i, c := range sec.Changed {
			if i == maxDiffNames {
				ps.Changed = append(ps.Changed, &pb.DiffChange{Name: fmt.Sprintf("... and %d more", len(sec.Changed)-i)})
				break
			}
			ps.Changed = append(ps.Changed, &pb.DiffChange{Name: c.Name, Fields: c.Fields})
		}
		out.Sections = append(out.Sections, ps)
	}
	return out
}

func capNames(names []string) []string {
	if len(names) <= maxDiffNames {
		return names
	}
	return append(names[:maxDiffNames:maxDiffNames], fmt.Sprintf("... and %d more", len(names)-maxDiffNames))
}
