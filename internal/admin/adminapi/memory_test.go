package adminapi

import (
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/heapuse"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// A 2 MB dry-run apply once took the center from 47 MB to 361 MB. The whole
// call (decoding in chunks, compiling, the canonical form, reading the
// current province, the diff) must hold at most 10x the document at once
// above what was live before.
func TestDryRunApplyMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("applies a 2 MB province")
	}
	s, _ := applyService(t)
	o := topogen.LargeOptions{Regions: 16, Nodes: 200, Servers: 5_000, Zones: 400, Networks: 50_000, FallbackPerRegion: 2}
	cur := topogen.Large(nil, o)
	ctx, _ := as(t, authz.Admin)
	if _, err := s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: yamlDoc(t, cur)}); err != nil {
		t.Fatal(err)
	}
	next := topogen.Large(nil, o)
	next.Nodes[0].Servers[0].Weight = 7 // one change for the diff to find
	doc := yamlDoc(t, next)
	next, cur = nil, nil //nolint:ineffassign // drops the references so that the collector frees them before the measurement
	var resp *pb.ApplyTopologyResponse
	var err error
	u := heapuse.MeasureLive(func() {
		resp, err = s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: doc, DryRun: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetChanged() || len(resp.GetDiff().GetSections()) == 0 {
		t.Fatalf("the dry run found no change: %v", resp)
	}
	t.Logf("dry run of a %.1f MB document: peak heap %.1f MB (%.1fx), allocated %.1f MB (%.1fx), %v",
		heapuse.MB(uint64(len(doc))), heapuse.MB(u.Peak), heapuse.Ratio(u.Peak, len(doc)),
		heapuse.MB(u.Allocated), heapuse.Ratio(u.Allocated, len(doc)), u.Took.Round(time.Millisecond))
	if heapuse.Ratio(u.Peak, len(doc)) > 10 {
		t.Errorf("peak heap %.1fx the document, more than 10x", heapuse.Ratio(u.Peak, len(doc)))
	}
}
