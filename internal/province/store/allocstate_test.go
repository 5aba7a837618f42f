package store_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	. "github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func allocState(inst string, made time.Time, n int) *AllocState {
	st := &AllocState{Instance: inst, Made: made, Revision: 3, Servers: []string{"a", "b"},
		Services: []ServiceState{{Name: "live", Prices: [][2]float64{{0.001, 0}, {0, 0.5}}}}}
	for i := range n {
		st.Sessions = append(st.Sessions, SessionState{User: fmt.Sprintf("u%d", i), Addr: netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)}),
			Channel: "ch1", Desired: 5000, Lat: 31.8, Lon: 117.2, Server: int32(i % 2), Kbps: 2500, Seen: made.UnixMilli() / SeenGrid * SeenGrid})
	}
	return st
}

func keys(t *testing.T, cli *clientv3.Client, prefix string) []string {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, strings.TrimPrefix(string(kv.Key), prefix))
	}
	return out
}

// States are published as a generation then deltas and read back whole,
// the freshest of another instance's first; a new generation leaves
// nothing of the previous one.
func TestAllocStateRoundTrip(t *testing.T) {
	e := etcdtest.Start(t)
	s, cli, prefix := e.Store(), e.Client(), e.Prefix+"alloc/state/hefei/"
	ctx := context.Background()
	if got, err := s.AllocState(ctx, "hefei", ""); err != nil || got != nil {
		t.Fatalf("empty store: %v %v", got, err)
	}
	sim := newSim(11, 30_000)
	sim.st.Instance = "hefei-1"
	t0 := sim.st.Made
	for i := range 4 {
		if err := s.PutAllocState(ctx, "hefei", sim.st); err != nil {
			t.Fatalf("publication %d: %v", i, err)
		}
		got, err := s.AllocState(ctx, "hefei", "")
		if err != nil {
			t.Fatalf("publication %d: %v", i, err)
		}
		if canonical(got) != canonical(sim.st) {
			t.Fatalf("publication %d read back otherwise", i)
		}
		if i < 3 {
			sim.step(30*time.Second, 0.02)
		}
	}
	// A generation in parts (30,000 sessions), three deltas, the head.
	k := keys(t, cli, prefix+"hefei-1/")
	if len(k) < 5 || k[len(k)-1] != "h" || !strings.HasPrefix(k[len(k)-2], "d/") || !strings.HasSuffix(k[len(k)-2], "/000003") {
		t.Fatalf("stored keys: %v", k)
	}
	if err := s.PutAllocState(ctx, "hefei", allocState("center-1", sim.st.Made.Add(-time.Minute), 3)); err != nil {
		t.Fatal(err)
	}
	// Except: the instance's own state is not what it starts from.
	if got, err := s.AllocState(ctx, "hefei", "hefei-1"); err != nil || got.Instance != "center-1" || len(got.Sessions) != 3 {
		t.Fatalf("except hefei-1: %+v %v", got, err)
	}
	if got, err := s.AllocState(ctx, "hefei", ""); err != nil || got.Instance != "hefei-1" {
		t.Fatalf("freshest: %+v %v", got, err)
	}
	// Another store (a restarted instance) remembers nothing: it starts a
	// generation, and nothing of the previous one stays.
	if err := e.Store().PutAllocState(ctx, "hefei", allocState("hefei-1", t0.Add(time.Hour), 7)); err != nil {
		t.Fatal(err)
	}
	if k := keys(t, cli, prefix+"hefei-1/"); len(k) != 2 || !strings.HasPrefix(k[0], "b/") || k[1] != "h" {
		t.Fatalf("after a new generation of one part: %v", k)
	}
	// The first store's next delta finds the head not its own: it starts
	// a generation too, and both read back.
	if err := s.PutAllocState(ctx, "hefei", allocState("hefei-1", t0.Add(2*time.Hour), 9)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AllocState(ctx, "hefei", ""); err != nil || len(got.Sessions) != 9 {
		t.Fatalf("after the guard: %d sessions, %v", len(got.Sessions), err)
	}
	if err := s.DeleteAllocState(ctx, "hefei", "hefei-1"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AllocState(ctx, "hefei", ""); err != nil || got.Instance != "center-1" {
		t.Fatalf("after deleting hefei-1's: %+v %v", got, err)
	}
}

// TestAllocStateRefusesIncomplete: the freshest state with a delta or a
// base part missing, or a value that is not one, is an error naming the
// instance and what is wrong, not an older state.
func TestAllocStateRefusesIncomplete(t *testing.T) {
	e := etcdtest.Start(t)
	s, cli, prefix := e.Store(), e.Client(), e.Prefix+"alloc/state/hefei/"
	ctx := context.Background()
	sim := newSim(12, 500)
	sim.st.Instance = "hefei-1"
	if err := s.PutAllocState(ctx, "hefei", allocState("center-1", sim.st.Made.Add(-time.Hour), 3)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.PutAllocState(ctx, "hefei", sim.st); err != nil {
			t.Fatal(err)
		}
		sim.step(30*time.Second, 0.05)
	}
	k := keys(t, cli, prefix+"hefei-1/")
	del := func(key string) {
		if _, err := cli.Delete(ctx, prefix+"hefei-1/"+key); err != nil {
			t.Fatal(err)
		}
	}
	del(k[len(k)-2]) // delta 2
	if _, err := s.AllocState(ctx, "hefei", ""); err == nil || !strings.Contains(err.Error(), "by hefei-1: delta 2 of 2") {
		t.Fatalf("a delta missing: %v", err)
	}
	del(k[0]) // the base
	if _, err := s.AllocState(ctx, "hefei", ""); err == nil || !strings.Contains(err.Error(), "by hefei-1: base part 0 of 1") {
		t.Fatalf("the base missing: %v", err)
	}
	if _, err := cli.Put(ctx, prefix+"hefei-1/h", "not a head"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllocState(ctx, "hefei", ""); err == nil || !strings.Contains(err.Error(), "by hefei-1: head") {
		t.Fatalf("a bad head: %v", err)
	}
	if err := s.DeleteAllocState(ctx, "hefei", "hefei-1"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AllocState(ctx, "hefei", ""); err != nil || got.Instance != "center-1" {
		t.Fatalf("after deleting it: %+v %v", got, err)
	}
}

// TestAllocStateLegacy: a state an older build published (gzipped JSON
// in parts) is read, a generation being written passed over as that
// build did; the instance's first publication in the binary format
// replaces it.
func TestAllocStateLegacy(t *testing.T) {
	e := etcdtest.Start(t)
	s, cli := e.Store(), e.Client()
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Microsecond)
	put := func(inst string, gen time.Time, part, parts int, st *AllocState) {
		t.Helper()
		v, err := EncodeLegacyPart(gen.UnixNano(), part, parts, st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, e.Prefix+keyspace.AllocStatePart("hefei", inst, part), v); err != nil {
			t.Fatal(err)
		}
	}
	old := allocState("hefei-2", t0, 5)
	put("hefei-2", t0, 0, 2, &AllocState{Instance: old.Instance, Made: old.Made, Revision: old.Revision, Servers: old.Servers, Services: old.Services, Sessions: old.Sessions[:3]})
	put("hefei-2", t0, 1, 2, &AllocState{Instance: old.Instance, Made: old.Made, Sessions: old.Sessions[3:]})
	got, err := s.AllocState(ctx, "hefei", "")
	if err != nil || got == nil || canonical(got) != canonical(old) {
		t.Fatalf("legacy state: %+v %v", got, err)
	}
	// Another instance's newer generation half written: the complete one
	// is read.
	put("hefei-3", t0.Add(time.Second), 0, 2, allocState("hefei-3", t0.Add(time.Second), 1))
	if got, err := s.AllocState(ctx, "hefei", ""); err != nil || !got.Made.Equal(t0) {
		t.Fatalf("legacy state half rewritten: %+v %v", got, err)
	}
	// Garbage in the old layout is an error naming the key.
	if _, err := cli.Put(ctx, e.Prefix+keyspace.AllocStatePart("hefei", "x", 0), "not gzip"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllocState(ctx, "hefei", ""); err == nil || !strings.Contains(err.Error(), "by x: /anysched/alloc/state/hefei/x/0000") {
		t.Fatalf("a corrupt legacy part: %v", err)
	}
	if err := s.DeleteAllocState(ctx, "hefei", "x"); err != nil {
		t.Fatal(err)
	}
	// The binary format takes over: the old parts go.
	cur := allocState("hefei-2", t0.Add(time.Minute), 4)
	if err := s.PutAllocState(ctx, "hefei", cur); err != nil {
		t.Fatal(err)
	}
	if k := keys(t, cli, e.Prefix+keyspace.AllocState("hefei", "hefei-2")); len(k) != 2 || k[1] != "h" {
		t.Fatalf("keys after the first binary publication: %v", k)
	}
	if got, err := s.AllocState(ctx, "hefei", ""); err != nil || canonical(got) != canonical(cur) {
		t.Fatalf("binary state: %v", err)
	}
}
