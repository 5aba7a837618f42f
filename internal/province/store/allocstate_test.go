package store_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	. "github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/wait"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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
	if testing.Short() {
		t.Skip("30,000 sessions through etcd: make test runs it plain; TestAllocStateResumesAfterOutage races the same path")
	}
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

// faults sits in a test client's gRPC interceptors, below clientv3's
// retries: it counts the bytes of the writes the client sends and the
// keys it puts, and fails one chosen request as a publication fails part
// way: etcd stopped just before the request (refused, not sent), or the
// connection lost after etcd applied it (the answer never comes). Either
// is an error clientv3 does not retry a write on, so the caller sees it
// at once rather than at its deadline.
type faults struct {
	e    *etcdtest.Etcd
	mu   sync.Mutex
	sent int
	puts []string
	// fail picks the request: stop etcd before it, or lose its answer.
	fail func(req any) (stop, lose bool)
}

func (f *faults) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	f.mu.Lock()
	var stop, lose bool
	if f.fail != nil {
		if stop, lose = f.fail(req); stop || lose {
			f.fail = nil
		}
	}
	switch r := req.(type) {
	case *pb.PutRequest:
		f.sent += proto.Size(r)
		f.puts = append(f.puts, string(r.Key))
	case *pb.TxnRequest:
		f.sent += proto.Size(r)
	}
	f.mu.Unlock()
	if stop {
		f.e.Stop()
		return status.Error(codes.Unavailable, "connection refused: etcd stopped")
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	if lose && err == nil {
		return status.Error(codes.Unavailable, "the connection was lost before the answer")
	}
	return err
}

// reset returns what was counted since the last reset and starts again.
func (f *faults) reset() (sent int, puts []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sent, puts = f.sent, f.puts
	f.sent, f.puts = 0, nil
	return sent, puts
}

// isBasePut is a put of a generation's base part; isDeltaTxn a
// transaction putting a delta.
func isBasePut(req any) bool {
	r, ok := req.(*pb.PutRequest)
	return ok && strings.Contains(string(r.Key), "/b/")
}

func isDeltaTxn(req any) bool {
	r, ok := req.(*pb.TxnRequest)
	if !ok {
		return false
	}
	for _, op := range r.Success {
		if p := op.GetRequestPut(); p != nil && strings.Contains(string(p.Key), "/d/") {
			return true
		}
	}
	return false
}

// TestAllocStateResumesAfterOutage: a publication that fails part way (etcd
// gone in the middle of a generation's parts; a delta applied whose answer
// never came; a delta never sent) is resumed by the next one, which writes
// what is missing and its own delta, never the whole plan again; and the
// next planner, reading meanwhile, finds the last complete state, never a
// generation with parts missing.
func TestAllocStateResumesAfterOutage(t *testing.T) {
	e := etcdtest.Start(t)
	f := &faults{e: e}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(f.unary)}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	prefix := e.Prefix + keyspace.AllocState("hefei", "hefei-1")
	center := e.Store() // the next planner: the center, reading
	read := func(what string) *AllocState {
		t.Helper()
		var got *AllocState
		wait.ForErr(t, what, wait.DefaultTimeout, func() error {
			var err error
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			got, err = center.AllocState(ctx, "hefei", "center-1")
			return err
		})
		return got
	}
	publish := func(s *Store, st *AllocState, timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return s.PutAllocState(ctx, "hefei", st)
	}
	stored := func() map[string]int64 {
		t.Helper()
		resp, err := e.Client().Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, kv := range resp.Kvs {
			out[strings.TrimPrefix(string(kv.Key), prefix)] = kv.ModRevision
		}
		return out
	}
	baseKeys := func(keys map[string]int64, except ...string) []string {
		var out []string
		for k := range keys {
			if strings.HasPrefix(k, "b/") && !slices.Contains(except, k) {
				out = append(out, k)
			}
		}
		slices.Sort(out)
		return out
	}

	// What the city published before: a small plan, complete.
	first := allocState("hefei-1", time.Now().Truncate(time.Millisecond), 5)
	if err := publish(e.Store(), first, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	firstBase := baseKeys(stored())
	// A restarted planner's first publication is a generation of two
	// parts; etcd goes away after the first is stored.
	sim := newSim(21, 3_000)
	sim.st.Instance = "hefei-1"
	s := New(cli, e.Prefix, e.Logger)
	s.StatePartBytes = 16 << 10 // two parts
	f.fail = func(req any) (bool, bool) {
		return isBasePut(req) && strings.HasSuffix(string(req.(*pb.PutRequest).Key), "/0001"), false
	}
	if err := publish(s, sim.st, wait.DefaultTimeout); err == nil {
		t.Fatal("a publication with etcd stopped in the middle succeeded")
	}
	_, puts := f.reset()
	if len(puts) < 2 {
		t.Fatalf("the publication put %q: not the two parts it needed", puts)
	}
	e.Restart()
	if got := read("the state read after the outage"); got == nil || canonical(got) != canonical(first) {
		t.Fatalf("after a generation failed part way, the next planner read %d sessions, not the last complete state's %d", len(got.Sessions), len(first.Sessions))
	}
	before := stored()
	landed := baseKeys(before, firstBase...)
	if len(landed) != 1 || !strings.HasSuffix(landed[0], "/0000") {
		t.Fatalf("the base parts stored before the outage: %v", landed)
	}

	// The next publication resumes it: the part that was stored is not
	// written again, the generation is the same, and the state read is
	// the new one.
	sim.step(10*time.Second, 0.02)
	if err := publish(s, sim.st, wait.DefaultTimeout); err != nil {
		t.Fatalf("the publication after the outage: %v", err)
	}
	sent, puts := f.reset()
	after := stored()
	if got := baseKeys(after); len(got) != 2 || got[0] != landed[0] || after[landed[0]] != before[landed[0]] {
		t.Fatalf("the generation was not resumed: base parts %v (before the outage %v; part 0 at revision %d, now %d); puts %q", got, landed, before[landed[0]], after[landed[0]], puts)
	}
	if got := read("the resumed state"); canonical(got) != canonical(sim.st) {
		t.Fatal("the resumed state reads back otherwise")
	}
	whole := 0
	for _, k := range baseKeys(after) {
		resp, err := e.Client().Get(context.Background(), prefix+k)
		if err != nil {
			t.Fatal(err)
		}
		whole += len(resp.Kvs[0].Value)
	}
	if sent >= whole {
		t.Errorf("the resumed publication sent %d bytes, the whole base is %d", sent, whole)
	}

	// A delta that etcd applied but whose answer was lost: the next
	// publication finds it stored and adds its own; no generation.
	sim.step(10*time.Second, 0.02)
	f.fail = func(req any) (bool, bool) { return false, isDeltaTxn(req) }
	if err := publish(s, sim.st, wait.DefaultTimeout); err == nil {
		t.Fatal("the publication whose answer was lost succeeded")
	}
	if got := read("the state of the lost answer"); canonical(got) != canonical(sim.st) {
		t.Fatal("the delta whose answer was lost is not what the next planner reads")
	}
	// A delta never sent: etcd stopped before it.
	sim.step(10*time.Second, 0.02)
	lost := sim.st
	f.fail = func(req any) (bool, bool) { return isDeltaTxn(req), false }
	if err := publish(s, sim.st, wait.DefaultTimeout); err == nil {
		t.Fatal("a publication with etcd stopped succeeded")
	}
	e.Restart()
	if got := read("the state after the delta was not sent"); canonical(got) == canonical(lost) {
		t.Fatal("the next planner reads a delta that was never stored")
	}
	f.reset()
	sim.step(10*time.Second, 0.02)
	if err := publish(s, sim.st, wait.DefaultTimeout); err != nil {
		t.Fatalf("the publication after the second outage: %v", err)
	}
	_, puts = f.reset()
	if got := baseKeys(stored()); len(puts) > 0 || !slices.Equal(got, baseKeys(after)) {
		t.Fatalf("after failed deltas a publication wrote a generation: base parts %v, were %v; puts %q", got, baseKeys(after), puts)
	}
	if got := read("the state after the second outage"); canonical(got) != canonical(sim.st) {
		t.Fatal("the state after the second outage reads back otherwise")
	}
}

// A city's identity may write any number of keys under its own
// instance's prefix, and the center reads the region's states when the
// city falls: past StateMaxKeys the keys are refused before a value is
// read; junk beside a whole state is listed, not read, and the state is
// found.
func TestAllocStateBounded(t *testing.T) {
	e := etcdtest.Start(t)
	s, cli, prefix := e.Store(), e.Client(), e.Prefix+"alloc/state/hefei/"
	ctx := context.Background()
	sim := newSim(12, 500)
	sim.st.Instance = "hefei-1"
	if err := s.PutAllocState(ctx, "hefei", sim.st); err != nil {
		t.Fatal(err)
	}
	junk := func(from, n int, val string) {
		for i := from; i < from+n; i += 128 {
			var ops []clientv3.Op
			for j := i; j < min(i+128, from+n); j++ {
				ops = append(ops, clientv3.OpPut(fmt.Sprintf("%shefei-1/d/%016x/%06d", prefix, j, 1), val))
			}
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	junk(0, 2000, strings.Repeat("x", 4096))
	if got, err := s.AllocState(ctx, "hefei", ""); err != nil || got == nil || len(got.Sessions) != len(sim.st.Sessions) {
		t.Fatalf("a whole state beside 2,000 junk keys: %v, %v", got, err)
	}
	if testing.Short() {
		t.Skip("the rest writes 32,768 keys through an embedded etcd: make test runs it plain, not under -race")
	}
	junk(2000, StateMaxKeys, "x")
	if _, err := s.AllocState(ctx, "hefei", ""); err == nil || !strings.Contains(err.Error(), "keys, more than") {
		t.Fatalf("%d keys under a region's states: %v, want them refused", StateMaxKeys+2000, err)
	}
}
