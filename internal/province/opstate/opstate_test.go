package opstate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/wait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const prefix = "/anysched/"

// One region, one node of four servers.
func snap(t *testing.T) *topology.Snapshot {
	t.Helper()
	return fixture.Compile(t, fixture.Shaped(t, topogen.Options{NodesPerRegion: 1, ServersPerNode: 4, ZonesPerRegion: 1, NetworksPerZone: 1}, fixture.Cities(1)...))
}

type watched struct {
	w      *opstate.Watcher
	mu     sync.Mutex
	drills []opstate.Drill
	stop   func()
}

func (x *watched) seen() []opstate.Drill {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]opstate.Drill(nil), x.drills...)
}

func watch(t *testing.T, cli *clientv3.Client) *watched {
	x := &watched{}
	x.w = &opstate.Watcher{Client: cli, Prefix: prefix, Logger: quiet, OnDrill: func(d opstate.Drill) {
		x.mu.Lock()
		x.drills = append(x.drills, d)
		x.mu.Unlock()
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.w.Run(ctx) }()
	var once sync.Once
	x.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(x.stop)
	wait.For(t, "first listing", wait.DefaultTimeout, x.w.Synced)
	return x
}

// TestDrainsApplyToAvailabilityAndSurviveRestarts: a drained server is
// unavailable while healthy, a node drain covers its servers, and a new
// watcher (a restarted scheduler) reads the drains back.
func TestDrainsApplyToAvailabilityAndSurviveRestarts(t *testing.T) {
	s := snap(t)
	e := etcdtest.Start(t)
	cli := e.Client()
	ctx := context.Background()
	x := watch(t, cli)
	m := &health.Merger{Client: cli, Prefix: prefix, Logger: quiet}
	merged := func() *avail.Availability { return m.Compute(s, x.w.DrainReasons(s)) }

	if err := opstate.SetDrain(ctx, cli, prefix, nil, opstate.Drain{Kind: opstate.DrainServer, Name: s.Servers[1].Name, Reason: "disk swap"}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "server drained", wait.DefaultTimeout, func() bool { return merged().Drained[1] })
	av := merged()
	if av.Available[1] || !av.Healthy[1] || !strings.Contains(av.Why[1], "disk swap") || av.Drained[0] {
		t.Fatalf("drained server: available %v healthy %v why %q; other server drained %v", av.Available[1], av.Healthy[1], av.Why[1], av.Drained[0])
	}
	// The node is the region's only one: forced, as by an admin, lest
	// the schedulers keep a server of it serving.
	if err := opstate.SetDrain(ctx, cli, prefix, nil, opstate.Drain{Kind: opstate.DrainNode, Name: s.Nodes[0].Name, Forced: true}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "node drained", wait.DefaultTimeout, func() bool { a := merged(); return a.Drained[0] && a.Drained[3] })
	x.stop()

	y := watch(t, cli)
	if got := y.w.Drains(); len(got) != 2 || got[0].Kind != opstate.DrainNode || got[1].Name != s.Servers[1].Name {
		t.Fatalf("drains read back after a restart = %+v, want the node drain then the server drain", got)
	}
	if _, err := opstate.ClearDrain(ctx, cli, prefix, opstate.DrainNode, s.Nodes[0].Name); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "node undrained", wait.DefaultTimeout, func() bool {
		r := y.w.DrainReasons(s)
		return r[0] == "" && r[3] == "" && r[1] != ""
	})
}

func TestSetDrainRejectsBadInput(t *testing.T) {
	cli := etcdtest.Start(t).Client()
	for _, d := range []opstate.Drain{{Kind: "rack", Name: "r1"}, {Kind: opstate.DrainServer}} {
		if err := opstate.SetDrain(context.Background(), cli, prefix, nil, d); err == nil {
			t.Errorf("SetDrain(%+v) succeeded", d)
		}
	}
	resp, err := cli.Get(context.Background(), prefix+keyspace.PrefixDrain, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("%d drain keys written after rejected drains (err %v)", resp.Count, err)
	}
}

// TestDrillsReachTheCallbackOnce: every drill is handed to OnDrill once,
// the center's separately from a region's, and a relisting (restart) hands
// a drill in force over again to the new watcher.
func TestDrillsReachTheCallbackOnce(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client()
	x := watch(t, cli)
	ctx := context.Background()
	if _, err := opstate.StartDrill(ctx, cli, prefix, nil, opstate.CenterTarget, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	hefei, err := opstate.ParseDrillTarget("hefei")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := opstate.StartDrill(ctx, cli, prefix, nil, hefei, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "two drills", wait.DefaultTimeout, func() bool { return len(x.seen()) == 2 })
	got := x.seen()
	if !got[0].Target.Center || got[1].Target != opstate.RegionTarget("hefei") {
		t.Fatalf("drills = %+v, want the center's then hefei's", got)
	}
	now := time.Now()
	if _, ok := x.w.Drill(opstate.RegionTarget("hefei"), now); !ok {
		t.Error("hefei's drill is not in force")
	}
	if _, ok := x.w.Drill(opstate.CenterTarget, now); ok {
		t.Error("the center's drill is in force beside hefei's: hefei would have no scheduler")
	}
	if _, ok := x.w.Drill(opstate.RegionTarget("wuhu"), now); ok {
		t.Error("a drill is in force for wuhu, which was never drilled")
	}
	if _, ok := x.w.Drill(opstate.RegionTarget("hefei"), now.Add(time.Minute)); ok {
		t.Error("hefei's 30s drill is still in force a minute later")
	}
	y := watch(t, cli)
	wait.For(t, "drills handed to a new watcher", wait.DefaultTimeout, func() bool { return len(y.seen()) == 2 })
	if n := len(x.seen()); n != 2 {
		t.Fatalf("the first watcher saw %d drills, want each once (2)", n)
	}
}

func TestParseDrillTarget(t *testing.T) {
	for _, c := range []struct {
		in     string
		center bool
		err    bool
	}{{"center", true, false}, {"hefei", false, false}, {"", false, true}} {
		got, err := opstate.ParseDrillTarget(c.in)
		if (err != nil) != c.err || (err == nil && (got.Center != c.center || got.String() != c.in)) {
			t.Errorf("ParseDrillTarget(%q) = %+v, %v", c.in, got, err)
		}
	}
}

// TestBalanceDocument: no document is the defaults; a valid one is in force
// at once; an invalid one keeps the defaults and says why.
func TestBalanceDocument(t *testing.T) {
	cli := etcdtest.Start(t).Client()
	x := watch(t, cli)
	if c, err := x.w.Balance(); err != nil || c.CHash.Epsilon != 0.25 {
		t.Fatalf("without a document: %+v, %v; want the defaults", c, err)
	}
	ctx := context.Background()
	if _, err := cli.Put(ctx, prefix+keyspace.KeyBalance, "chash: {epsilon: 0.5}\n"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "document in force", wait.DefaultTimeout, func() bool { c, _ := x.w.Balance(); return c.CHash.Epsilon == 0.5 })
	if _, err := cli.Put(ctx, prefix+keyspace.KeyBalance, "chash: {epsilon: 0.5}\nno_such_key: 1\n"); err != nil {
		t.Fatal(err)
	}
	wait.ForErr(t, "invalid document refused", wait.DefaultTimeout, func() error {
		c, err := x.w.Balance()
		if err == nil || c.CHash.Epsilon != 0.25 {
			return errNotYet
		}
		if !strings.Contains(err.Error(), "no_such_key") {
			t.Fatalf("the error does not name the bad key: %v", err)
		}
		return nil
	})
	if _, err := cli.Delete(ctx, prefix+keyspace.KeyBalance); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "defaults after delete", wait.DefaultTimeout, func() bool { _, err := x.w.Balance(); return err == nil })
}

var errNotYet = errors.New("not yet")

// TestSetBalanceGuarded: a balance policy is stored only over the document
// it was read at (none: revision 0), and the watcher follows it.
func TestSetBalanceGuarded(t *testing.T) {
	cli := etcdtest.Start(t).Client()
	x := watch(t, cli)
	ctx := context.Background()
	rev, err := opstate.SetBalance(ctx, cli, prefix, nil, []byte("chash: {epsilon: 0.5}\n"), 0)
	if err != nil || rev == 0 {
		t.Fatalf("first set: %d, %v", rev, err)
	}
	if _, err := opstate.SetBalance(ctx, cli, prefix, nil, []byte("chash: {epsilon: 0.1}\n"), 0); !errors.Is(err, opstate.ErrBalanceChanged) {
		t.Fatalf("set over a document read as absent: %v, want ErrBalanceChanged", err)
	}
	sb, err := opstate.ReadBalance(ctx, cli, prefix)
	if err != nil || sb.Revision != rev || string(sb.Document) != "chash: {epsilon: 0.5}\n" {
		t.Fatalf("read back %+v, %v", sb, err)
	}
	wait.For(t, "watcher follows", wait.DefaultTimeout, func() bool { c, _ := x.w.Balance(); return c.CHash.Epsilon == 0.5 })
	if _, err := opstate.SetBalance(ctx, cli, prefix, nil, nil, rev); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if sb, _ := opstate.ReadBalance(ctx, cli, prefix); sb.Revision != 0 {
		t.Fatalf("after reset %+v", sb)
	}
	wait.For(t, "defaults again", wait.DefaultTimeout, func() bool { c, _ := x.w.Balance(); return c.CHash.Epsilon == 0.25 })
}

// Anyone who can write etcd can write a drill, so every scheduler applies
// the admin API's guards itself: a drill ends at most an hour after its
// start whatever its end says, one starting in the future is not in
// force, deleting its key ends it, and the center's drill is not in force
// while a city's is (no city without a scheduler).
func TestDrillGuardsAtEveryScheduler(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client()
	x := watch(t, cli)
	ctx := context.Background()
	now := time.Now().UTC()
	put := func(target string, started, until time.Time) {
		t.Helper()
		v := fmt.Sprintf(`{"region":%q,"started":%q,"until":%q}`, target, started.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano))
		if _, err := cli.Put(ctx, prefix+keyspace.Drill(target), v); err != nil {
			t.Fatal(err)
		}
	}
	put("center", now, now.Add(10*365*24*time.Hour)) // withdraw the center for ten years
	put("wuhu", now.Add(24*time.Hour), now.Add(25*time.Hour))
	wait.For(t, "the drills seen", wait.DefaultTimeout, func() bool { return len(x.seen()) == 2 })
	if _, ok := x.w.Drill(opstate.CenterTarget, now.Add(time.Second)); !ok {
		t.Fatal("the center's drill is not in force at its start")
	}
	if _, ok := x.w.Drill(opstate.CenterTarget, now.Add(opstate.MaxDrill+time.Second)); ok {
		t.Error("a ten-year drill is in force past an hour from its start")
	}
	if _, ok := x.w.Drill(opstate.RegionTarget("wuhu"), now.Add(time.Second)); ok {
		t.Error("a drill starting tomorrow is in force now")
	}
	put("hefei", now, now.Add(30*time.Minute))
	wait.For(t, "hefei's drill seen", wait.DefaultTimeout, func() bool { return len(x.seen()) == 3 })
	if _, ok := x.w.Drill(opstate.CenterTarget, now.Add(time.Second)); ok {
		t.Error("the center's drill is in force beside hefei's")
	}
	if _, err := cli.Delete(ctx, prefix+keyspace.Drill("hefei")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "hefei's drill ended by its deletion", wait.DefaultTimeout, func() bool {
		_, ok := x.w.Drill(opstate.RegionTarget("hefei"), now.Add(time.Second))
		return !ok
	})
	if _, ok := x.w.Drill(opstate.CenterTarget, now.Add(time.Second)); !ok {
		t.Error("the center's drill is not in force again once hefei's ended")
	}
	if _, err := cli.Delete(ctx, prefix+keyspace.Drill("center")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the center's drill ended by its deletion", wait.DefaultTimeout, func() bool {
		_, ok := x.w.Drill(opstate.CenterTarget, now.Add(time.Second))
		return !ok
	})
}
