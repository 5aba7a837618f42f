package lab

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/testbed/chaos"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
)

// TestClaimHistoryInitialState: the claims already in etcd when the
// history starts are replayed at the revisions they were committed at. A
// standby's claims committed before its primary started taking STBs are
// then no commit that ignored the primary (replayed at the start revision
// they were, and the chaos check failed on them).
func TestClaimHistoryInitialState(t *testing.T) {
	cli := etcdtest.Start(t).Client()
	ctx := context.Background()
	prefix := etcdPrefix + keyspace.PrefixAllocClaims + "hefei/"
	put := func(instance string, c store.Claims) int64 {
		t.Helper()
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		r, err := cli.Put(ctx, prefix+instance, string(b))
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	claim := map[string]store.Claim{"hefei-1-a": {BandwidthKbps: 1000, Compute: 1}}
	standby := put("hefei-2", store.Claims{Rank: 1, Made: 1_000, Servers: claim, Sessions: 1})
	primary := put("hefei-1", store.Claims{Rank: 0, Made: 2_000, Servers: claim, Sessions: 1})

	changes, err := claimHistory(ctx, cli, primary, primary)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, c := range changes {
		got[c.Key] = c.Revision
	}
	if want := map[string]int64{prefix + "hefei-2": standby, prefix + "hefei-1": primary}; !maps.Equal(got, want) {
		t.Fatalf("history %v, want each claim at its commit revision %v", got, want)
	}
	capacity := map[string]chaos.Capacity{"hefei-1-a": {Kbps: 10_000, Compute: 10}}
	if v := chaos.CheckClaims(changes, capacity, 5*time.Second); !v.Pass() {
		t.Errorf("claims invariant on the initial state: %d bad, e.g. %v", v.Bad, v.Examples)
	}
}
