package adminapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/backup"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Backup reads what rebuilding the province needs (internal/province/backup).
func (s *Service) Backup(ctx context.Context, _ *pb.BackupRequest) (*pb.BackupResponse, error) {
	b, err := backup.Take(ctx, s.Store.Client(), s.Store.Prefix())
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	var buf bytes.Buffer
	if err := b.Encode(&buf); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	drains := 0
	for _, kv := range b.Keys {
		if backup.IsDrain(kv.Key) {
			drains++
		}
	}
	audit.Annotate(ctx, func(n *audit.Note) { n.Target = fmt.Sprintf("seq/%d", b.Seq) })
	return &pb.BackupResponse{Backup: buf.Bytes(), Revision: b.Revision, Seq: b.Seq, Digest: b.Digest, Keys: int32(len(b.Keys)),
		Drains: int32(drains), KeyIds: b.KeyIDs, Roles: int32(len(b.Roles))}, nil
}

// Restore validates a backup whole, then writes it into the store, which
// must hold no topology or operator state unless forced; the topology
// is made current as a new apply in a new epoch, signed by this center.
func (s *Service) Restore(ctx context.Context, req *pb.RestoreRequest) (*pb.RestoreResponse, error) {
	b, err := backup.Decode(req.GetBackup())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	audit.Annotate(ctx, func(n *audit.Note) { n.Target = fmt.Sprintf("seq/%d", b.Seq) })
	c, err := backup.Check(b, s.Store.Prefix(), s.Limits)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	caller, _ := authz.FromContext(ctx)
	res, err := backup.Restore(ctx, s.Store, c, backup.Options{Force: req.GetForce(), Signer: s.Apply.Signer, Identity: caller.Identity, Keep: s.Apply.HistoryKeep})
	if errors.Is(err, backup.ErrNotEmpty) {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	audit.Annotate(ctx, func(n *audit.Note) { n.Revision = res.Revision })
	out := &pb.RestoreResponse{Keys: int32(res.Keys), Revision: res.Revision, Seq: res.Seq, Epoch: res.Epoch, Digest: b.Digest, Drains: int32(c.Drains)}
	if roles, err := backup.Roles(ctx, s.Store.Client()); err == nil {
		out.RoleDifferences = backup.RoleDiff(b.Roles, roles)
	} else {
		out.RoleDifferences = []string{"roles not compared: " + err.Error()}
	}
	for _, id := range b.KeyIDs {
		if s.Apply.Signer == nil || id != s.Apply.Signer.KeyID() {
			out.ForeignKeyIds = append(out.ForeignKeyIds, id)
		}
	}
	s.Logger.Warn("store restored from a backup", "identity", caller.Identity, "taken_at", b.TakenAt, "keys", res.Keys,
		"revision", res.Revision, "seq", res.Seq, "epoch", res.Epoch, "digest", b.Digest)
	return out, nil
}
