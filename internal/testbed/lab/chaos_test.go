package lab_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/chaos"
	"github.com/anysched/anysched/internal/testbed/lab"
)

// TestPrivilegedChaos is the short chaos run: four cities (the first with
// a standby), a 3-member etcd cluster, edges and QoE; zapping storms over
// a steady STB load, a seeded schedule of faults (schedulers, the center,
// etcd members and the quorum, edges, a city link, an apply and a drain);
// then the invariants, and nothing left behind. ANYSCHED_CHAOS_SEED
// replays a seed (default 1), ANYSCHED_CHAOS_DURATION a length (75s);
// ANYSCHED_CHAOS_QOE=0 selects by the nearest policy (no claims to check).
func TestPrivilegedChaos(t *testing.T) {
	seed, d := uint64(1), 75*time.Second
	if s := os.Getenv("ANYSCHED_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ANYSCHED_CHAOS_SEED: %v", err)
		}
		seed = v
	}
	if s := os.Getenv("ANYSCHED_CHAOS_DURATION"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("ANYSCHED_CHAOS_DURATION: %v", err)
		}
		d = v
	}
	qoe := os.Getenv("ANYSCHED_CHAOS_QOE") != "0"
	const prefix = "asy"
	cities := lab.AllCities()[:4]
	l := provinceWith(t, prefix, lab.Options{Cities: cities, Standby: map[int]bool{0: true}, EtcdMembers: 3, Edges: true, QoE: qoe})
	for i, c := range cities {
		answeredBy(t, l, i, lab.PrimaryID(c), 60*time.Second)
	}
	var progress bytes.Buffer
	rep, err := l.RunChaos(context.Background(), lab.ChaosConfig{Seed: seed, Duration: d, Out: &progress})
	t.Logf("\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	dir := l.Dir()
	l.Down()
	rep.Invariants = append(rep.Invariants, chaos.Expect("nothing left behind (namespaces, interfaces, addresses, routes, processes)", 1, lab.Leftovers(prefix, dir)))
	var out bytes.Buffer
	rep.Write(&out)
	t.Logf("%s", out.String())
	for _, v := range rep.Invariants {
		if !v.Pass() {
			t.Errorf("FAIL %s: %d bad, e.g. %v", v.Name, v.Bad, v.Examples)
		}
	}
	for _, f := range rep.Done {
		if f.Err != "" {
			t.Errorf("fault #%d %s %s: %s", f.N, f.Kind, f.Target, f.Err)
		}
	}
}
