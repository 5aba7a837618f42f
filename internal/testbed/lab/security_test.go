package lab_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/testbed/lab"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// TestPrivilegedCompromisedHosts: a compromised city host (hefei's
// scheduler's etcd certificate) and a rogue health checker (a checker
// identity of wuhu) do their worst against the province's etcd while STBs
// of both cities ask for streams; the province keeps answering them all
// (0 failed after an STB's retry) from the right edges. The city cannot
// write the topology, drains, drills, balance, another region's keys or a
// center's registration; the checker's word on hefei's servers counts for
// nothing and its "down" on wuhu's is outvoted; the city's flood of its own
// plan-state keys is cut by the center's write guard, which status shows.
func TestPrivilegedCompromisedHosts(t *testing.T) {
	const rogueID = "anysched-checker.wuhu.rogue"
	cities := []string{"hefei", "wuhu"}
	l := provinceWith(t, "acx", lab.Options{Cities: cities, Edges: true, EtcdIdentities: []string{rogueID}})
	for i, c := range cities {
		answeredBy(t, l, i, lab.PrimaryID(c), 60*time.Second)
	}
	servers := map[string][]string{} // by region: names, and their edges' addresses
	addrs := map[string][]string{}
	for _, n := range l.Topo.Nodes {
		for _, sv := range n.Servers {
			servers[n.Region] = append(servers[n.Region], sv.Name)
			addrs[n.Region] = append(addrs[n.Region], sv.Address)
		}
	}
	loops := []*loopStats{loop(t, l, 0, 20*time.Millisecond), loop(t, l, 1, 20*time.Millisecond)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const p = "/anysched/"
	city, err := l.EtcdClientAs(ctx, "anysched-regional.hefei."+lab.PrimaryID("hefei")) // its CN (with a checker's keys: +checker in the provisioned identity)
	if err != nil {
		t.Fatal(err)
	}
	defer city.Close()
	rogue, err := l.EtcdClientAs(ctx, rogueID)
	if err != nil {
		t.Fatal(err)
	}
	defer rogue.Close()
	put := func(cli *clientv3.Client, key, val string) error {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		_, err := cli.Put(pctx, p+key, val)
		return err
	}

	// What the city's role refuses, every one of them a way to redirect
	// or stop the province once.
	drain, _ := json.Marshal(opstate.Drain{Kind: opstate.DrainRegion, Name: "wuhu", Forced: true})
	central, _ := json.Marshal(map[string]any{"id": "a-center", "role": "central", "state": "ready", "announced": true})
	for _, w := range []struct{ key, val string }{
		{keyspace.KeyTopologyCurrent, `{"revision":1}`},
		{keyspace.PrefixDrain + "region/wuhu", string(drain)},
		{keyspace.PrefixDrill + "wuhu", `{"target":"wuhu"}`},
		{keyspace.KeyBalance, "chash: {epsilon: 0.5}\n"},
		{keyspace.Instance(keyspace.ProvinceRegion, "a-center"), string(central)},
		{keyspace.Verdict("wuhu", lab.PrimaryID("hefei"), servers["wuhu"][0]), `{"up":false}`},
		{keyspace.AllocState("wuhu", lab.PrimaryID("wuhu")) + "0", "x"},
		{keyspace.AllocClaim("wuhu", lab.PrimaryID("wuhu")), "{}"},
	} {
		if err := put(city, w.key, w.val); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("the compromised city writes %s: %v, want permission denied", w.key, err)
		}
	}

	// The rogue checker, with the real publisher: every server of both
	// cities down, dated an hour ahead so that its figures would win.
	pub := &health.Publisher{Client: rogue, Prefix: p, Info: avail.CheckerInfo{ID: "rogue", Region: "wuhu", StartedAt: time.Now()},
		TTL: 3 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	pub.Register(prometheus.NewRegistry())
	pctx, pstop := context.WithCancel(ctx)
	pdone := make(chan error, 1)
	go func() { pdone <- pub.Run(pctx) }()
	defer func() { pstop(); <-pdone }()
	future := time.Now().Add(time.Hour)
	for _, region := range cities {
		for _, s := range servers[region] {
			pub.Publish(health.Report{Server: s, Checker: "rogue", Up: false, Reason: "rogue says down", Loss: 1, Since: future, At: future})
		}
	}
	wait.For(t, "the rogue checker's verdicts in etcd", 10*time.Second, func() bool {
		r, err := rogue.Get(ctx, p+keyspace.Verdicts("wuhu", "rogue"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && r.Count == int64(len(servers["hefei"])+len(servers["wuhu"]))
	})
	// Its reports stand for a while (the schedulers' merge runs on every
	// change): both cities' STBs still go to their own edges.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for i, c := range cities {
			loc, err := l.Redirect(ctx, i)
			if err != nil || !containsAny(loc, addrs[c]...) {
				t.Fatalf("%s's STB with the rogue checker's verdicts: redirected to %q (%v), want one of %s's edges %v", c, loc, err, c, addrs[c])
			}
		}
		time.Sleep(250 * time.Millisecond) // the pace of the look, not a wait for a condition
	}

	// The city floods its own plan-state keys, which its role allows:
	// the center's write guard cuts it within its bound (64 MiB a minute).
	part := strings.Repeat("x", 200<<10)
	n := 0
	d := wait.For(t, "the flooding city's writes revoked", 60*time.Second, func() bool {
		n++
		return errors.Is(put(city, fmt.Sprintf("%sflood-%d", keyspace.AllocState("hefei", lab.PrimaryID("hefei")), n), part), rpctypes.ErrPermissionDenied)
	})
	t.Logf("the city's writes revoked after %d parts of 200 KiB (%.1f MiB), %s", n, float64(n)*0.2, d.Round(time.Millisecond))
	if n > 400 {
		t.Errorf("cut after %d parts of 200 KiB: past the 64 MiB a minute", n)
	}
	var out bytesBuf
	wait.ForErr(t, "status shows the revocation", 15*time.Second, func() error {
		out = bytesBuf{}
		runCtl(l, &out, "status")
		if !strings.Contains(out.String(), "etcd writes of anysched-regional.hefei."+lab.PrimaryID("hefei")+" revoked") {
			return fmt.Errorf("status:\n%s", out.String())
		}
		return nil
	})
	// The cut city keeps answering its STBs from what it holds, still to
	// its own edges.
	from := time.Now()
	loops[0].waitAnswers(t, lab.PrimaryID("hefei"), 20, from, 30*time.Second)
	if loc, err := l.Redirect(ctx, 0); err != nil || !containsAny(loc, addrs["hefei"]...) {
		t.Errorf("hefei's STB after the cut: redirected to %q (%v)", loc, err)
	}
	for i, st := range loops {
		st.stop()
		st.check(t, cities[i]+" under a compromised city host and a rogue checker")
	}
}
