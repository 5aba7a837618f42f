package adminapi

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/admin/authz"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// withUnknown is m as this build decodes it after a newer release's
// writer added field 99 to it: kept aside as unknown.
func withUnknown[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	b = protowire.AppendVarint(protowire.AppendTag(b, 99, protowire.VarintType), 1)
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNewerRequestRefused: a request with a field this center does not
// know, at its top or in a message inside it, is refused before the
// method runs (nothing done), naming the message and the field; one
// without runs.
func TestNewerRequestRefused(t *testing.T) {
	g := &guard{log: slog.New(slog.NewTextHandler(io.Discard, nil)), local: true, localRole: authz.Admin}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000}})
	info := &grpc.UnaryServerInfo{FullMethod: "/anysched.v1.Admin/Drain"}
	for _, tt := range []struct {
		name string
		req  *pb.DrainRequest
		want string // "" : runs
	}{
		{"known fields", &pb.DrainRequest{Kind: "server", Name: "hf-a", From: timestamppb.Now()}, ""},
		{"at the top", withUnknown(t, &pb.DrainRequest{Kind: "server", Name: "hf-a"}), "anysched.v1.DrainRequest field 99"},
		{"inside", &pb.DrainRequest{Kind: "server", Name: "hf-a", Until: withUnknown(t, timestamppb.Now())}, "google.protobuf.Timestamp field 99"},
	} {
		ran := false
		_, err := g.unary(ctx, tt.req, info, func(context.Context, any) (any, error) { ran = true; return &pb.DrainResponse{}, nil })
		if tt.want == "" {
			if err != nil || !ran {
				t.Errorf("%s: %v, ran %v", tt.name, err, ran)
			}
			continue
		}
		if ran || status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v (ran %v), want FailedPrecondition naming %q and nothing run", tt.name, err, ran, tt.want)
		}
		t.Logf("%s: %v", tt.name, err)
	}
}
