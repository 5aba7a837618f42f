package adminapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// DefaultMaxRemovalShare is the removal guard's default (apply.max_removal_share).
const DefaultMaxRemovalShare = 0.2

// ApplyPolicy is how topology changes are guarded, signed and kept.
type ApplyPolicy struct {
	// MaxRemovalShare: a change removing more than this share of the
	// servers or of the zone networks is refused unless forced by an
	// admin; 0: DefaultMaxRemovalShare.
	MaxRemovalShare float64
	// HistoryKeep is how many revisions' documents stay for diff and
	// rollback; 0: store.DefaultHistoryKeep.
	HistoryKeep int
	// Signer signs each applied document, and each drain, drill and
	// balance policy document the admin API writes (opstate); nil stores
	// them unsigned.
	Signer *signing.Signer
}

func (p ApplyPolicy) share() float64 {
	if p.MaxRemovalShare <= 0 {
		return DefaultMaxRemovalShare
	}
	return p.MaxRemovalShare
}

// ApplyTopology validates a document, shows what it changes against the
// current topology, guards against large removals and stores it.
func (s *Service) ApplyTopology(ctx context.Context, req *pb.ApplyTopologyRequest) (*pb.ApplyTopologyResponse, error) {
	t, _, warnings, err := s.Limits.Load(req.GetDocument())
	if err != nil {
		return nil, invalid(err)
	}
	base := req.GetBaseRevision()
	if base == 0 {
		base = t.Revision
	}
	return s.change(ctx, t, change{base: base, forceStale: req.GetForce(), forceGuard: req.GetForce(), dryRun: req.GetDryRun(), note: "apply",
		source: req.GetDocument(), warnings: warnings})
}

// Rollback makes a kept revision's document current again, as a new
// revision: guarded like an apply, refused when base_revision is stale.
func (s *Service) Rollback(ctx context.Context, req *pb.RollbackRequest) (*pb.ApplyTopologyResponse, error) {
	audit.Annotate(ctx, func(n *audit.Note) { n.Target = fmt.Sprintf("revision/%d", req.GetRevision()) })
	if req.GetRevision() <= 0 {
		return nil, status.Error(codes.InvalidArgument, "revision: required (see schedctl history)")
	}
	old, err := s.Store.Revision(ctx, req.GetRevision())
	if errors.Is(err, store.ErrNotKept) || errors.Is(err, store.ErrNoRevision) {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error()) // "store: ..."
	}
	// Rules may have tightened since it was applied.
	snap, err := s.Limits.Compile(old.Topology, 0)
	if err != nil {
		return nil, invalid(fmt.Errorf("revision %d no longer validates: %w", req.GetRevision(), err))
	}
	// The document as it was written, comments and all, when it is kept.
	src, err := s.Store.Source(ctx, old)
	if err != nil {
		s.Logger.Warn("the document as written is unreadable; rolling back to the canonical form", "revision", old.Revision, "err", err)
	}
	if src != nil && !sameDocument(src, old.Digest) {
		s.Logger.Warn("the document as written does not match its revision; rolling back to the canonical form", "revision", old.Revision)
		src = nil
	}
	return s.change(ctx, old.Topology, change{
		base: req.GetBaseRevision(), forceGuard: req.GetForce(), dryRun: req.GetDryRun(),
		note: fmt.Sprintf("rollback to %d", req.GetRevision()), source: src, warnings: topology.Warnings(snap),
	})
}

// sameDocument reports whether a document as written decodes to the
// canonical document of digest: the kept text is not signed, so it is
// trusted only as far as it says what the signed form says.
func sameDocument(src []byte, digest string) bool {
	t, err := topology.Decode(src)
	if err != nil {
		return false
	}
	_, d, err := store.Canonical(t)
	return err == nil && d == digest
}

// change is one apply or rollback.
type change struct {
	base int64
	// forceStale applies over a newer revision than base (operator);
	// forceGuard past the removal guard (admin).
	forceStale, forceGuard bool
	dryRun                 bool
	note                   string // "apply", "rollback to N"
	// source is the document as written (nil: not known), kept beside
	// the canonical form.
	source []byte
	// warnings are the document's own (topology.Warnings).
	warnings []string
}

func (s *Service) change(ctx context.Context, t *topology.Topology, c change) (*pb.ApplyTopologyResponse, error) {
	_, digest, err := store.Canonical(t)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	cur, err := s.Store.Current(ctx)
	if err != nil && !errors.Is(err, store.ErrNoTopology) {
		return nil, status.Errorf(codes.Unavailable, "read current topology: %v", err)
	}
	var rev int64
	var curDigest string
	var curTop *topology.Topology
	if cur != nil {
		rev, curDigest, curTop = cur.Revision, cur.Digest, cur.Topology
	}
	if c.base != 0 && !c.forceStale && c.base != rev {
		return nil, status.Error(codes.FailedPrecondition, (&store.StaleError{Base: c.base, Current: rev}).Error())
	}
	d := topology.Diff(curTop, t)
	summary := d.Summary()
	audit.Annotate(ctx, func(n *audit.Note) {
		n.Target, n.Revision = "topology", rev
		if n.Detail = summary; c.note != "apply" {
			n.Detail = c.note + ": " + summary
		}
		if c.dryRun {
			n.Detail = "dry run: " + n.Detail
		}
	})
	diff := diffPB(d)
	warnings := slices.Clone(c.warnings)
	if dangers := d.Dangers(s.Apply.share()); len(dangers) > 0 {
		what := strings.Join(dangers, "; ")
		if err := forcePast(ctx, what, c.forceGuard, func() error {
			return withDiff(status.New(codes.FailedPrecondition, fmt.Sprintf("refused: the change %s; check the diff, then apply with --force as admin", what)), diff)
		}); err != nil {
			return nil, err
		}
		warnings = append(warnings, "forced past the removal guard: "+what)
	}
	changed := curDigest != digest
	if signer := s.Apply.Signer; !changed && cur != nil && signer != nil && cur.KeyID != signer.KeyID() {
		changed = true // a key rotation: the same document, signed anew
		warnings = append(warnings, fmt.Sprintf("the same document, signed again with key %s (was %s)", signer.KeyID(), orNone(cur.KeyID)))
	} else if !changed && cur != nil && signer != nil && !cur.SignedPointer {
		changed = true // signed by a center from before pointers were signed
		warnings = append(warnings, "the same document, its pointer signed (it was signed in the old format, the digest alone, which the schedulers of this release refuse)")
	}
	if !changed && cur != nil && c.source != nil && !sameText(c.source, cur) {
		// A new revision for comments alone would make every scheduler
		// reload an identical topology.
		warnings = append(warnings, fmt.Sprintf("the document differs from revision %d only in comments or layout: nothing is applied, and get topology keeps the text of revision %d", rev, rev))
	}
	if c.dryRun {
		return &pb.ApplyTopologyResponse{Revision: rev, Summary: summarize(t, digest), Changed: changed, Diff: diff, Warnings: warnings}, nil
	}
	caller, _ := authz.FromContext(ctx)
	res, err := s.Store.Apply(ctx, t, store.ApplyOptions{
		BaseRevision: c.base, Force: c.forceStale, Expect: &rev,
		Signer: s.Apply.Signer, Identity: caller.Identity, Note: c.note, Change: summary, Keep: s.Apply.HistoryKeep,
		Source: c.source,
	})
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
	audit.Annotate(ctx, func(n *audit.Note) { n.Revision = res.Revision })
	if res.Changed {
		s.Logger.Info("topology changed", "revision", res.Revision, "previous", rev, "by", caller.Identity, "note", c.note, "change", summary)
	}
	return &pb.ApplyTopologyResponse{Revision: res.Revision, Applied: res.Changed, Summary: summarize(t, digest), Changed: res.Changed, Diff: diff, Warnings: warnings}, nil
}

// sameText reports whether src is the text kept for cur (the canonical
// JSON when none is kept).
func sameText(src []byte, cur *store.Stored) bool {
	if cur.SourceDigest == "" {
		return store.SourceDigest(src) == cur.Digest
	}
	return store.SourceDigest(src) == cur.SourceDigest
}

func orNone(s string) string {
	if s == "" {
		return "unsigned"
	}
	return s
}

func orNobody(id string) string {
	if id == "" {
		return "an unauthenticated caller"
	}
	return id
}

// withDiff attaches the diff to a refusal, so that the operator sees what
// was refused.
func withDiff(st *status.Status, d *pb.TopologyDiff) error {
	if withD, err := st.WithDetails(d); err == nil {
		return withD.Err()
	}
	return st.Err()
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
	doc, err := s.asWritten(ctx, st)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pb.GetTopologyResponse{Revision: st.Revision, Document: doc, Summary: summarize(st.Topology, st.Digest), AppliedAt: timestamppb.New(st.AppliedAt)}, nil
}

// asWritten is the stored document as the operator wrote it, with its
// revision: line set to st's revision; the canonical form rendered as YAML
// when no text is kept or it cannot be edited.
func (s *Service) asWritten(ctx context.Context, st *store.Stored) ([]byte, error) {
	src, err := s.Store.Source(ctx, st)
	if err != nil {
		s.Logger.Warn("the document as written is unreadable; returning the canonical form", "revision", st.Revision, "err", err)
	}
	if src != nil {
		if doc, ok := topology.WithRevision(src, st.Revision); ok {
			// What is returned must say what the signed form says, and
			// carry the revision for the stale check.
			if t, err := topology.Decode(doc); err == nil && t.Revision == st.Revision {
				if _, d, err := store.Canonical(t); err == nil && d == st.Digest {
					return doc, nil
				}
			}
			s.Logger.Warn("the document as written does not match its revision; returning the canonical form", "revision", st.Revision)
		}
	}
	t := *st.Topology
	t.Revision = st.Revision
	return t.YAML()
}

func summarize(t *topology.Topology, digest string) *pb.TopologySummary {
	return countsPB(t.Counts(), digest)
}

func countsPB(c topology.Counts, digest string) *pb.TopologySummary {
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
