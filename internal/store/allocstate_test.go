package store_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	. "github.com/anysched/anysched/internal/store"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func allocState(inst string, made time.Time, n int) *AllocState {
	st := &AllocState{Instance: inst, Made: made, Revision: 3, Servers: []string{"a", "b"},
		Services: []ServiceState{{Name: "live", Prices: [][2]float64{{0.001, 0}, {0, 0.5}}}}}
	for i := range n {
		st.Sessions = append(st.Sessions, SessionState{User: fmt.Sprintf("u%d", i), Addr: netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)}),
			Channel: "ch1", Desired: 5000, Lat: 31.8, Lon: 117.2, Server: int32(i % 2), Kbps: 2500, Seen: made.UnixMilli()})
	}
	return st
}

// States are stored in parts and read back whole, the freshest complete
// one of another instance first; a generation being written is skipped.
func TestAllocStateRoundTrip(t *testing.T) {
	e := etcdtest.Start(t)
	s, cli, prefix := e.Store(), e.Client(), e.Prefix+"alloc/state/hefei/"
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Microsecond)
	if got, err := s.AllocState(ctx, "hefei", ""); err != nil || got != nil {
		t.Fatalf("empty store: %v %v", got, err)
	}
	big := allocState("hefei-1", t0, 2*10_000+5) // three parts
	if err := s.PutAllocState(ctx, "hefei", big); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAllocState(ctx, "hefei", allocState("center-1", t0.Add(-time.Minute), 3)); err != nil {
		t.Fatal(err)
	}
	got, err := s.AllocState(ctx, "hefei", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Instance != "hefei-1" || len(got.Sessions) != len(big.Sessions) || got.Sessions[len(got.Sessions)-1] != big.Sessions[len(big.Sessions)-1] ||
		len(got.Servers) != 2 || got.Services[0].Prices[1][1] != 0.5 || !got.Made.Equal(t0) {
		t.Fatalf("read back %s with %d sessions made %v", got.Instance, len(got.Sessions), got.Made)
	}
	// Except: the instance's own state is not what it starts from.
	if got, err := s.AllocState(ctx, "hefei", "hefei-1"); err != nil || got.Instance != "center-1" {
		t.Fatalf("except hefei-1: %+v %v", got, err)
	}
	// A smaller generation removes the extra parts of the previous one.
	if err := s.PutAllocState(ctx, "hefei", allocState("hefei-1", t0.Add(time.Second), 7)); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, prefix+"hefei-1/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("%d parts stored for one part's state (%v)", len(resp.Kvs), err)
	}
	// A newer generation half written (part 1 of 2 missing): the complete
	// older one is read.
	if err := s.PutAllocState(ctx, "hefei", allocState("hefei-1", t0.Add(2*time.Second), 10_001)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, prefix+"hefei-1/0001"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AllocState(ctx, "hefei", ""); err != nil || got.Instance != "center-1" {
		t.Fatalf("with hefei-1 half written: %+v %v", got, err)
	}
	// Garbage is an error that names the key.
	if _, err := cli.Put(ctx, prefix+"x/0000", "not gzip"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllocState(ctx, "hefei", ""); err == nil {
		t.Fatal("a corrupt state part was read without error")
	}
	if err := s.DeleteAllocState(ctx, "hefei", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllocState(ctx, "hefei", ""); err != nil {
		t.Fatalf("after deleting the corrupt state: %v", err)
	}
}
