package ctl

import (
	"context"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc"
)

func (f *fakeAdmin) History(ctx context.Context, in *pb.HistoryRequest, _ ...grpc.CallOption) (*pb.HistoryResponse, error) {
	return answer[*pb.HistoryResponse](ctx, f, "History", in)
}

func (f *fakeAdmin) DiffTopology(ctx context.Context, in *pb.DiffTopologyRequest, _ ...grpc.CallOption) (*pb.DiffTopologyResponse, error) {
	return answer[*pb.DiffTopologyResponse](ctx, f, "DiffTopology", in)
}

func (f *fakeAdmin) Rollback(ctx context.Context, in *pb.RollbackRequest, _ ...grpc.CallOption) (*pb.ApplyTopologyResponse, error) {
	return answer[*pb.ApplyTopologyResponse](ctx, f, "Rollback", in)
}

func (f *fakeAdmin) Backup(ctx context.Context, in *pb.BackupRequest, _ ...grpc.CallOption) (*pb.BackupResponse, error) {
	return answer[*pb.BackupResponse](ctx, f, "Backup", in)
}

func (f *fakeAdmin) Restore(ctx context.Context, in *pb.RestoreRequest, _ ...grpc.CallOption) (*pb.RestoreResponse, error) {
	return answer[*pb.RestoreResponse](ctx, f, "Restore", in)
}
