package opstate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/prometheus/client_golang/prometheus"
)

// TestNewerFormatRefusedAsAbsent: a drain or drill a newer release wrote
// in a format this build does not read is refused whole, as if absent (a
// drain it replaced no longer holds either), and counted; a drill of that
// format never fires.
func TestNewerFormatRefusedAsAbsent(t *testing.T) {
	s := snap(t)
	cli := etcdtest.Start(t).Client()
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	x := &watched{}
	x.w = &opstate.Watcher{Client: cli, Prefix: prefix, Logger: quiet, OnDrill: func(d opstate.Drill) {
		x.mu.Lock()
		x.drills = append(x.drills, d)
		x.mu.Unlock()
	}}
	x.w.Register(reg)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- x.w.Run(wctx) }()
	defer func() { cancel(); <-done }()
	wait.For(t, "first listing", wait.DefaultTimeout, x.w.Synced)

	server := s.Servers[1].Name
	if err := opstate.SetDrain(ctx, cli, prefix, nil, opstate.Drain{Kind: opstate.DrainServer, Name: server, Reason: "disk swap"}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "server drained", wait.DefaultTimeout, func() bool { return len(x.w.Drains()) == 1 })
	// The same drain rewritten by a later release: a window this build
	// would not know to wait for, say.
	newer := fmt.Sprintf(`{"kind":"server","name":%q,"at":%q,"format":%d,"after_event":"rollout"}`, server, time.Now().Format(time.RFC3339), opstate.Format+1)
	if _, err := cli.Put(ctx, prefix+keyspace.Drain("server", server), newer); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the newer drain refused", wait.DefaultTimeout, func() bool { return len(x.w.Drains()) == 0 })
	if r := x.w.DrainReasons(s); r[1] != "" {
		t.Fatalf("the server is drained by a refused drain: %q", r[1])
	}

	region := s.Regions[0].Name
	drill := fmt.Sprintf(`{"region":%q,"until":%q,"started":%q,"format":%d}`, region, time.Now().Add(time.Minute).Format(time.RFC3339Nano), time.Now().Format(time.RFC3339Nano), opstate.Format+1)
	if _, err := cli.Put(ctx, prefix+keyspace.Drill(region), drill); err != nil {
		t.Fatal(err)
	}
	refused := func() (drain, drill float64) {
		return newerRefusals(t, reg, "drain"), newerRefusals(t, reg, "drill")
	}
	wait.For(t, "both refusals counted", wait.DefaultTimeout, func() bool { a, b := refused(); return a == 1 && b == 1 })
	if d, ok := x.w.Drill(opstate.RegionTarget(region), time.Now()); ok {
		t.Fatalf("a drill in force from a refused value: %+v", d)
	}
	if got := x.seen(); len(got) != 0 {
		t.Fatalf("refused drills fired: %+v", got)
	}
}

// newerRefusals is anysched_opstate_refused_total{kind, reason="newer_format"}.
func newerRefusals(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "anysched_opstate_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["kind"] == kind && l["reason"] == "newer_format" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
