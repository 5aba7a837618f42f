package drillwatch

import (
	"slices"
	"testing"

	"github.com/anysched/anysched/internal/province/opstate"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A drill first seen running (the console did not start it) learns the
// target's instances from the first status, and awaits only those that
// announce routes themselves.
func TestLearnsTheTarget(t *testing.T) {
	w, notes := New(opstate.RegionTarget("wuhu"), t0, at(3), nil, nil)
	if len(notes) != 0 || w.Instances() != nil {
		t.Fatalf("before any status: notes %v, instances %v", notes, w.Instances())
	}
	st := &pb.StatusResponse{Instances: []*pb.Instance{
		{Id: "center-1", Role: "central", Announced: true, UpdatedAt: timestamppb.New(at(1))},
		{Id: "wuhu-1", Role: "regional", Region: "wuhu", AnnounceReason: "drill", UpdatedAt: timestamppb.New(at(1))},
		{Id: "wuhu-2", Role: "regional", Region: "wuhu", AnnounceReason: "announce.mode none", UpdatedAt: timestamppb.New(at(1))},
	}}
	evs := w.Observe(st, at(1))
	if !slices.Equal(w.Instances(), []string{"wuhu-1", "wuhu-2"}) || !slices.Equal(w.Awaited(), []string{"wuhu-1"}) {
		t.Errorf("instances %v, awaited %v", w.Instances(), w.Awaited())
	}
	if len(evs) != 1 || evs[0].Text != "wuhu-1 withdrew its route (drill)" || !evs[0].At.Equal(at(1)) {
		t.Errorf("events %v", evs)
	}
	// None of the target's instances registered: learnt as none, once.
	w, _ = New(opstate.CenterTarget, t0, at(3), nil, nil)
	w.Observe(&pb.StatusResponse{}, at(1))
	w.Observe(st, at(2))
	if w.Instances() != nil || w.Awaited() != nil {
		t.Errorf("learnt again: %v %v", w.Instances(), w.Awaited())
	}
}
