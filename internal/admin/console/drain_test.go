package console

import (
	"testing"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestDrainOf: the console's drains carry a scheduled drain's window and
// state, as status shows them; one without a window carries none.
func TestDrainOf(t *testing.T) {
	at := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	d := drainOf(&pb.DrainEntry{Kind: "region", Name: "hefei", At: timestamppb.New(at), State: "pending",
		From: timestamppb.New(at.Add(time.Hour)), Until: timestamppb.New(at.Add(3 * time.Hour))})
	if d.State != "pending" || d.From != at.Add(time.Hour).UnixMilli() || d.Until != at.Add(3*time.Hour).UnixMilli() {
		t.Errorf("scheduled drain %+v", d)
	}
	if d := drainOf(&pb.DrainEntry{Kind: "server", Name: "a", At: timestamppb.New(at), State: "active"}); d.From != 0 || d.Until != 0 || d.State != "active" {
		t.Errorf("drain without a window %+v", d)
	}
}
