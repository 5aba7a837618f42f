package adminapi

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/testbed/syncbuf"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestAuthorize: the exported check is the role table's.
func TestAuthorize(t *testing.T) {
	for _, tt := range []struct {
		c      authz.Caller
		method string
		want   codes.Code
	}{
		{authz.Caller{Identity: "vera", Role: authz.Viewer}, pb.Admin_Status_FullMethodName, codes.OK},
		{authz.Caller{Identity: "vera", Role: authz.Viewer}, pb.Admin_Drain_FullMethodName, codes.PermissionDenied},
		{authz.Caller{Identity: "otto", Role: authz.Operator}, pb.Admin_Drain_FullMethodName, codes.OK},
		{authz.Caller{Identity: "otto", Role: authz.Operator}, pb.Admin_Rollback_FullMethodName, codes.PermissionDenied},
		{authz.Caller{Peer: "10.0.0.1:5"}, pb.Admin_Status_FullMethodName, codes.Unauthenticated},
		{authz.Caller{Identity: "root", Role: authz.Admin}, "/anysched.v1.Admin/Future", codes.PermissionDenied},
	} {
		if got := status.Code(Authorize(tt.c, tt.method)); got != tt.want {
			t.Errorf("%s %s: %s, want %s", tt.c.Identity, tt.method, got, tt.want)
		}
	}
	if !ReadOnlyMethod(pb.Admin_Status_FullMethodName) || ReadOnlyMethod(pb.Admin_Drain_FullMethodName) || ReadOnlyMethod("/x/Y") {
		t.Error("ReadOnlyMethod disagrees with the role table")
	}
}

// TestGateCall: an in-process call gets the caller in its context, is
// refused without the role (do is not run), and is logged as a gRPC call.
func TestGateCall(t *testing.T) {
	var log syncbuf.Buffer
	g := NewGate(nil, slog.New(slog.NewTextHandler(&log, nil)))
	otto := authz.Caller{Identity: "otto", Role: authz.Operator, Peer: "127.0.0.1:9"}
	var seen authz.Caller
	err := g.Call(context.Background(), otto, pb.Admin_Drain_FullMethodName, func(ctx context.Context) error {
		seen, _ = authz.FromContext(ctx)
		return nil
	})
	if err != nil || seen != otto {
		t.Fatalf("operator's drain: %v, caller in context %+v", err, seen)
	}
	ran := false
	err = g.Call(context.Background(), authz.Caller{Identity: "vera", Role: authz.Viewer}, pb.Admin_Drain_FullMethodName, func(context.Context) error { ran = true; return nil })
	if status.Code(err) != codes.PermissionDenied || ran {
		t.Fatalf("viewer's drain: %v, ran %t", err, ran)
	}
	l := log.String()
	for _, want := range []string{`msg="admin call" method=/anysched.v1.Admin/Drain identity=otto role=operator peer=127.0.0.1:9 code=OK`, "identity=vera role=viewer", "code=PermissionDenied"} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %q:\n%s", want, l)
		}
	}
}
