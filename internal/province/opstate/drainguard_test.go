package opstate_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// TestDrainsNeverEmptyARegion: every scheduler keeps a region serving
// whatever the drains in etcd say, unless an admin forced the drain: the
// drains that would leave none of its servers undrained are not applied,
// latest first, the same at every scheduler; counted and logged.
func TestDrainsNeverEmptyARegion(t *testing.T) {
	s := snap(t) // one region, one node, four servers
	cli := etcdtest.Start(t).Client()
	ctx := context.Background()
	center := signer(t)
	v := watchVerified(t, cli, center, true)
	x := v.w
	drain := func(d opstate.Drain, want int) {
		t.Helper()
		if err := opstate.SetDrain(ctx, cli, prefix, center, d); err != nil {
			t.Fatal(err)
		}
		wait.For(t, "drain "+d.String()+" read", wait.DefaultTimeout, func() bool {
			ds := x.Drains()
			return len(ds) == want && slices.ContainsFunc(ds, func(g opstate.Drain) bool {
				return g.Kind == d.Kind && g.Name == d.Name && g.Reason == d.Reason && g.Forced == d.Forced
			})
		})
	}
	drained := func() (n int, r []string) {
		r = x.DrainReasons(s)
		for _, why := range r {
			if why != "" {
				n++
			}
		}
		return n, r
	}
	for i := range 3 {
		drain(opstate.Drain{Kind: opstate.DrainServer, Name: s.Servers[i].Name}, i+1)
	}
	if n, r := drained(); n != 3 {
		t.Fatalf("three of four servers drained: reasons %q", r)
	}
	drain(opstate.Drain{Kind: opstate.DrainServer, Name: s.Servers[3].Name}, 4)
	if n, r := drained(); n != 3 || r[3] != "" {
		t.Fatalf("after draining the region's last server: reasons %q, want the first three drained and the last serving", r)
	}
	drain(opstate.Drain{Kind: opstate.DrainNode, Name: s.Nodes[0].Name}, 5)
	drain(opstate.Drain{Kind: opstate.DrainRegion, Name: s.Regions[0].Name}, 6)
	if n, r := drained(); n != 3 || r[3] != "" {
		t.Fatalf("after draining the node and the region: reasons %q, want the region still served by server 3", r)
	}
	if got := metric(t, v.reg, "anysched_opstate_drains_overridden", nil); got != 3 {
		t.Errorf("anysched_opstate_drains_overridden = %v, want 3 (server 3's, the node's, the region's)", got)
	}
	if n := len(v.log.Containing(slog.LevelWarn, "would leave region")); n != 3 {
		t.Errorf("%d warnings about drains not applied, want 3 (one each): %v", n, v.log.Records(slog.LevelWarn))
	}
	x.DrainReasons(s) // asked again (every engine rebuild): not logged again
	if n := len(v.log.Containing(slog.LevelWarn, "would leave region")); n != 3 {
		t.Errorf("%d warnings after asking again, want still 3", n)
	}
	// An admin's forced drain empties the region: the fallback cities serve it.
	drain(opstate.Drain{Kind: opstate.DrainRegion, Name: s.Regions[0].Name, Reason: "evacuate", Forced: true}, 6)
	if n, r := drained(); n != 4 {
		t.Fatalf("after a forced region drain: reasons %q, want every server drained", r)
	}
	// Undrained, the overridden ones are applied again as far as they leave one serving.
	if _, err := opstate.ClearDrain(ctx, cli, prefix, opstate.DrainRegion, s.Regions[0].Name); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "region undrained", wait.DefaultTimeout, func() bool { return len(x.Drains()) == 5 })
	if n, r := drained(); n != 3 || r[3] != "" {
		t.Fatalf("after the forced drain's end: reasons %q, want the first three drained", r)
	}
}
