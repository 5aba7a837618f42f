package store_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/etcd/etcdserver"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/testcerts"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/internal/wiring/config"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestApplyAndReadBack(t *testing.T) {
	st := etcdtest.Start(t).Store()
	c := ctx(t)
	if _, err := st.Current(c); !errors.Is(err, store.ErrNoTopology) {
		t.Fatalf("Current on an empty store: %v, want ErrNoTopology", err)
	}
	tp := fixture.Weighted(t, 100)
	res, err := st.Apply(c, tp, store.ApplyOptions{})
	if err != nil || !res.Changed || res.Revision == 0 {
		t.Fatalf("Apply = %+v, %v", res, err)
	}
	got, err := st.Current(c)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != res.Revision || got.Digest != res.Digest {
		t.Fatalf("Current = rev %d digest %s, want %d %s", got.Revision, got.Digest, res.Revision, res.Digest)
	}
	want, _, _ := store.Canonical(tp)
	if string(got.JSON) != string(want) {
		t.Fatal("stored document differs from the applied one")
	}
	if rev, err := st.CurrentRevision(c); err != nil || rev != res.Revision {
		t.Fatalf("CurrentRevision = %d, %v; want %d", rev, err, res.Revision)
	}

	// The same document again changes nothing, not even the revision.
	again, err := st.Apply(c, fixture.Weighted(t, 100), store.ApplyOptions{})
	if err != nil || again.Changed || again.Revision != res.Revision {
		t.Fatalf("re-apply = %+v, %v; want unchanged at %d", again, err, res.Revision)
	}
}

func TestStaleRevisionRefused(t *testing.T) {
	st := etcdtest.Start(t).Store()
	c := ctx(t)
	r1, err := st.Apply(c, fixture.Weighted(t, 100), store.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Two operators both fetched r1; the first applies.
	r2, err := st.Apply(c, fixture.Weighted(t, 200), store.ApplyOptions{BaseRevision: r1.Revision})
	if err != nil {
		t.Fatal(err)
	}
	// The second one's edit is based on r1: refused, nothing written.
	_, err = st.Apply(c, fixture.Weighted(t, 300), store.ApplyOptions{BaseRevision: r1.Revision})
	var stale *store.StaleError
	if !errors.As(err, &stale) || stale.Base != r1.Revision || stale.Current != r2.Revision {
		t.Fatalf("stale apply: %v, want StaleError{%d, %d}", err, r1.Revision, r2.Revision)
	}
	cur, _ := st.Current(c)
	if cur.Revision != r2.Revision || cur.Topology.Nodes[0].Servers[0].Weight != 200 {
		t.Fatalf("after a refused apply the store holds rev %d weight %d, want rev %d weight 200", cur.Revision, cur.Topology.Nodes[0].Servers[0].Weight, r2.Revision)
	}
	// Forced, it goes through.
	r3, err := st.Apply(c, fixture.Weighted(t, 300), store.ApplyOptions{BaseRevision: r1.Revision, Force: true})
	if err != nil || !r3.Changed || r3.Revision <= r2.Revision {
		t.Fatalf("forced apply = %+v, %v", r3, err)
	}
}

func TestConcurrentAppliesOneWinsPerRevision(t *testing.T) {
	st := etcdtest.Start(t).Store()
	c := ctx(t)
	base, err := st.Apply(c, fixture.Weighted(t, 100), store.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, results[i] = st.Apply(c, fixture.Weighted(t, 101+i), store.ApplyOptions{BaseRevision: base.Revision})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range results {
		var stale *store.StaleError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &stale), errors.Is(err, store.ErrConflict):
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d applies based on the same revision succeeded, want exactly 1", ok)
	}
}

// TestLargeApplyIsAtomic applies province-scale documents (several chunks
// each) while readers load the topology as fast as they can: every document a
// reader sees must be one of those applied, whole.
func TestLargeApplyIsAtomic(t *testing.T) {
	if testing.Short() {
		t.Skip("province-scale topology")
	}
	e := etcdtest.Start(t)
	st := e.Store()
	st.ChunkSize = 32 << 10 // generated documents compress very well; force many chunks
	c := ctx(t)
	a := fixture.Scale()
	b := fixture.Scale()
	b.Zones = b.Zones[:len(b.Zones)/2] // half the networks: a reader mixing chunks would notice
	docs := map[string]topology.Counts{}
	for _, tp := range []*topology.Topology{a, b} {
		if err := topology.Validate(tp); err != nil {
			t.Fatal(err)
		}
		_, d, _ := store.Canonical(tp)
		docs[d] = tp.Counts()
	}

	// Watch the pointer and load every revision it announces.
	seen := make(chan string, 100)
	wctx, stop := context.WithCancel(c)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(seen)
		for resp := range st.WatchCurrent(wctx) {
			if resp.Err() != nil {
				return
			}
			for _, ev := range resp.Events {
				got, err := st.Current(wctx)
				if err != nil {
					if wctx.Err() == nil {
						seen <- "error: " + err.Error()
					}
					continue
				}
				want, known := docs[got.Digest]
				if !known || got.Topology.Counts() != want {
					seen <- fmt.Sprintf("revision %d (event at %d): unknown or partial document %s", got.Revision, ev.Kv.ModRevision, got.Digest[:12])
					continue
				}
				seen <- "ok"
			}
		}
	}()
	rawWatch := e.Client().Watch(wctx, e.Prefix+"topology/blobs/", clientv3.WithPrefix())

	const rounds = 4
	for i := range rounds {
		tp := a
		if i%2 == 1 {
			tp = b
		}
		res, err := st.Apply(c, tp, store.ApplyOptions{})
		if err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
		if !res.Changed {
			t.Fatalf("apply %d: unchanged", i)
		}
	}
	// Several chunks per document: the pointer indirection is what made it atomic.
	select {
	case resp := <-rawWatch:
		if len(resp.Events) == 0 {
			t.Fatal("no chunk writes seen")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no chunk writes seen")
	}
	chunks, err := e.Client().Get(c, e.Prefix+"topology/blobs/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks.Kvs) < 4 {
		t.Fatalf("%d chunks stored for two province-scale documents; the test would not exercise chunking", len(chunks.Kvs))
	}
	deadline := time.After(30 * time.Second)
	oks := 0
	for oks < rounds {
		select {
		case s := <-seen:
			if s != "ok" {
				t.Fatal(s)
			}
			oks++
		case <-deadline:
			t.Fatalf("watcher saw %d of %d applies", oks, rounds)
		}
	}
	stop()
	wg.Wait()
}

func TestOldChunkSetsCollected(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	c := ctx(t)
	for w := 100; w < 105; w++ {
		if _, err := st.Apply(c, fixture.Weighted(t, w), store.ApplyOptions{Keep: 2}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := e.Client().Get(c, e.Prefix+"topology/blobs/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]bool{}
	for _, kv := range resp.Kvs {
		d, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), e.Prefix+"topology/blobs/"), "/")
		digests[d] = true
	}
	if len(digests) != 2 {
		t.Fatalf("%d chunk sets kept after 5 applies with Keep 2, want 2 (current and previous)", len(digests))
	}
}

// TestReadAfterCompaction: the topology stays readable (the document as
// applied, and as written) once etcd has compacted past the apply, as the
// center's housekeeper does minutes after it: a scheduler starting then
// must load it, and an apply must diff against it.
func TestReadAfterCompaction(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client()
	st := store.New(cli, e.Prefix, e.Logger)
	c := ctx(t)
	applied, err := st.Apply(c, fixture.Weighted(t, 100), store.ApplyOptions{Source: []byte("# as written\n")})
	if err != nil {
		t.Fatal(err)
	}
	// Other writers move the revision on (verdicts, plans), then etcd
	// compacts everything before now.
	var last int64
	for i := range 3 {
		r, err := cli.Put(c, fmt.Sprintf("%shealth/chk/s%d", e.Prefix, i), "up")
		if err != nil {
			t.Fatal(err)
		}
		last = r.Header.Revision
	}
	if _, err := cli.Compact(c, last, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	got, err := st.Current(c)
	if err != nil {
		t.Fatalf("Current after compacting past the apply: %v", err)
	}
	if got.Revision != applied.Revision || got.Digest != applied.Digest {
		t.Fatalf("Current = revision %d digest %s, want %d %s", got.Revision, got.Digest, applied.Revision, applied.Digest)
	}
	if src, err := st.Source(c, got); err != nil || string(src) != "# as written\n" {
		t.Fatalf("Source after compaction = %q, %v", src, err)
	}
	if _, err := st.Apply(c, fixture.Weighted(t, 101), store.ApplyOptions{Expect: &applied.Revision}); err != nil {
		t.Fatalf("an apply against the compacted revision: %v", err)
	}
}

func TestRegistrationLivesWithItsProcess(t *testing.T) {
	st := etcdtest.Start(t).Store()
	c := ctx(t)
	rctx, stop := context.WithCancel(c)
	done := make(chan error, 1)
	reg := &store.Registration{Store: st, TTL: 3 * time.Second, Interval: 100 * time.Millisecond, Current: func() store.Instance {
		return store.Instance{ID: "hefei-1", Role: "regional", Region: "hefei", State: "ready", SnapshotRevision: 7}
	}}
	go func() { done <- reg.Run(rctx) }()
	var ins []store.Instance
	wait.For(t, "the instance registered", wait.DefaultTimeout, func() bool {
		var err error
		if ins, err = st.Instances(c); err != nil {
			t.Fatal(err)
		}
		return len(ins) == 1
	})
	if len(ins) != 1 || ins[0].ID != "hefei-1" || ins[0].Region != "hefei" || ins[0].SnapshotRevision != 7 || ins[0].UpdatedAt.IsZero() {
		t.Fatalf("instances = %+v", ins)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ins, _ = st.Instances(c); len(ins) != 0 {
		t.Fatalf("a stopped instance is still registered: %+v", ins)
	}
}

// TestInstanceRecordsSayWhatTheirKeysSay: a record's role, region and id
// are its key's, which etcd's roles let only that identity write. A city
// writing "central" into its own record once took the housekeeping lead
// (and with it the write guard) from the center, and two cities with the
// same instance id shared one key.
func TestInstanceRecordsSayWhatTheirKeysSay(t *testing.T) {
	st := etcdtest.Start(t).Store()
	c := ctx(t)
	put := func(key string, in store.Instance) {
		b, _ := json.Marshal(in)
		if _, err := st.Client().Put(c, st.Prefix()+key, string(b)); err != nil {
			t.Fatal(err)
		}
	}
	put(keyspace.Instance("hefei", "x-1"), store.Instance{ID: "a-center", Role: "central", Region: "wuhu"}) // a city lying
	put(keyspace.Instance("wuhu", "x-1"), store.Instance{ID: "x-1", Role: "regional", Region: "wuhu"})      // the same id elsewhere
	put(keyspace.Instance(keyspace.ProvinceRegion, "center-1"), store.Instance{ID: "center-1", Role: "central"})
	put(keyspace.LegacyInstance("old-1"), store.Instance{ID: "old-1", Role: "central", Region: "bozhou"}) // the release before's key
	put(keyspace.PrefixInstances+"a/b/c", store.Instance{ID: "c", Role: "central"})                       // no known shape
	ins, err := st.Instances(c)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range ins {
		got = append(got, fmt.Sprintf("%s %s %s", in.Role, in.Region, in.ID))
	}
	want := []string{"central  center-1", "regional bozhou old-1", "regional hefei x-1", "regional wuhu x-1"}
	if !slices.Equal(got, want) {
		t.Fatalf("instances:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRegistrationWritesChanges: with a Refresh, a record that changed
// only in its moving figures (answer counts, snapshot age) is not written
// again until the refresh is due, while its lease keeps it past the TTL;
// any other change is written at the next interval.
func TestRegistrationWritesChanges(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	c := ctx(t)
	var mu sync.Mutex
	in := store.Instance{ID: "hefei-1", Role: "regional", Region: "hefei", State: "ready", Traffic: []store.RegionTraffic{{ClientRegion: "hefei"}}}
	reg := &store.Registration{Store: st, TTL: 2 * time.Second, Interval: 100 * time.Millisecond, Refresh: 4 * time.Second, Current: func() store.Instance {
		mu.Lock()
		defer mu.Unlock()
		in.Traffic = []store.RegionTraffic{{ClientRegion: "hefei", Answered: in.Traffic[0].Answered + 10, Last: time.Now()}}
		in.SnapshotAge += 0.1
		return in
	}}
	rctx, stop := context.WithCancel(c)
	defer stop()
	go reg.Run(rctx)
	key := e.Prefix + keyspace.Instance("hefei", "hefei-1")
	rev := func() (int64, store.Instance) {
		resp, err := e.Client().Get(c, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("the record: %v %v", resp, err)
		}
		var got store.Instance
		if err := json.Unmarshal(resp.Kvs[0].Value, &got); err != nil {
			t.Fatal(err)
		}
		return resp.Kvs[0].ModRevision, got
	}
	wait.For(t, "the instance registered", wait.DefaultTimeout, func() bool {
		resp, err := e.Client().Get(c, key)
		return err == nil && len(resp.Kvs) == 1
	})
	first, _ := rev()
	time.Sleep(2500 * time.Millisecond) // past the TTL, before the refresh
	if r, got := rev(); r != first || got.Traffic[0].Answered == 0 {
		t.Fatalf("rewritten at revision %d (first %d) with only its counts changed, or counts lost: %+v", r, first, got.Traffic)
	}
	mu.Lock()
	in.Announced = true
	mu.Unlock()
	wait.For(t, "the announcement written", time.Second, func() bool {
		_, got := rev()
		return got.Announced
	})
	changed, _ := rev()
	wait.For(t, "the refresh", 6*time.Second, func() bool {
		r, _ := rev()
		return r != changed
	})
}

func TestRegistrationExpiresWhenProcessDies(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	c := ctx(t)
	// A lease granted and never kept alive is what a killed process leaves.
	lease, err := e.Client().Grant(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client().Put(c, e.Prefix+"instances/dead", `{"id":"dead","role":"regional"}`, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	if ins, _ := st.Instances(c); len(ins) != 1 {
		t.Fatalf("instances = %+v", ins)
	}
	wait.For(t, "a dead instance's record expiring with its 2s lease", wait.DefaultTimeout, func() bool {
		ins, err := st.Instances(c)
		if err != nil {
			t.Fatal(err)
		}
		return len(ins) == 0
	})
}

// TestClientTLS runs etcd requiring client certificates: the store connects
// with the configured certificate and is refused without one.
func TestClientTLS(t *testing.T) {
	certs := testcerts.Write(t, t.TempDir())
	e := etcdtest.StartWith(t, etcdserver.EmbeddedOptions{ClientTLS: etcdtest.TLSInfo{
		CertFile: certs.ServerCert, KeyFile: certs.ServerKey, TrustedCAFile: certs.CA, ClientCertAuth: true,
	}})
	connect := func(tls config.ClientTLS) error {
		cli, err := etcdclient.Connect(config.Etcd{DialTimeout: 2 * time.Second, TLS: tls}, []string{e.Endpoint()}, e.Logger)
		if err != nil {
			return err
		}
		defer cli.Close()
		c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err = store.New(cli, "/anysched/", e.Logger).Apply(c, fixture.Weighted(t, 100), store.ApplyOptions{})
		return err
	}
	if err := connect(config.ClientTLS{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	if err := connect(config.ClientTLS{CAFile: certs.CA}); err == nil {
		t.Fatal("without a client certificate the apply succeeded")
	}
	if err := connect(config.ClientTLS{CAFile: certs.CA, CertFile: certs.OtherClientCert, KeyFile: certs.OtherClientKey}); err == nil {
		t.Fatal("with a certificate from another CA the apply succeeded")
	}
}

// A part replaced by someone who can write etcd (the pointer is signed,
// the parts are not) is decompressed no further than the pointer's size:
// a gzip of 64 MiB of zeros is refused after its first size+1 bytes.
func TestLoadStopsAtTheStatedSize(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	c := ctx(t)
	if _, err := st.Apply(c, fixture.Weighted(t, 100), store.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := st.Current(c)
	if err != nil {
		t.Fatal(err)
	}
	// 64 members of a MiB of zeros each: one gzip stream to a reader
	// (members follow one another), 64 MiB decompressed, without
	// compressing 64 MiB here (half a minute under -race).
	var member, bomb bytes.Buffer
	zw := gzip.NewWriter(&member)
	zw.Write(make([]byte, 1<<20))
	zw.Close()
	for range 64 {
		bomb.Write(member.Bytes())
	}
	parts, err := e.Client().Get(c, st.Prefix()+"topology/blobs/"+cur.Digest+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(parts.Kvs) != 1 {
		t.Fatalf("parts of the document: %v, %v", parts, err)
	}
	if _, err := e.Client().Put(c, string(parts.Kvs[0].Key), bomb.String()); err != nil {
		t.Fatal(err)
	}
	_, err = st.Current(c)
	if want := fmt.Sprintf("more than the %d bytes its pointer states", cur.Size); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a part decompressing to 64 MiB: %v, want %q", err, want)
	}
}

// TestRegistrationUnderAnOldRole: a city of this release whose etcd role
// was provisioned by the release before (instances/<id> only) registers
// under that key, read as a city's; provisioned again, it moves to
// instances/<region>/<id>, and the old record goes.
func TestRegistrationUnderAnOldRole(t *testing.T) {
	e := etcdtest.Start(t)
	c := ctx(t)
	const user = "anysched-regional.hefei.hefei-1"
	e.EnableAuth(etcdtest.User{Name: user, Perms: []etcdauth.Perm{{Key: e.Prefix + keyspace.LegacyInstance("hefei-1"), Type: etcdauth.Write}}})
	root, city := store.New(e.Login(etcdauth.RootUser), e.Prefix, e.Logger), store.New(e.Login(user), e.Prefix, e.Logger)
	rctx, stop := context.WithCancel(c)
	defer stop()
	reg := &store.Registration{Store: city, TTL: 3 * time.Second, Interval: 100 * time.Millisecond, Current: func() store.Instance {
		return store.Instance{ID: "hefei-1", Role: "regional", Region: "hefei", State: "ready"}
	}}
	go reg.Run(rctx)
	has := func(key string) bool {
		r, err := root.Client().Get(c, e.Prefix+key)
		return err == nil && len(r.Kvs) == 1
	}
	wait.For(t, "registered under the old key", wait.DefaultTimeout, func() bool { return has(keyspace.LegacyInstance("hefei-1")) })
	if ins, err := root.Instances(c); err != nil || len(ins) != 1 || ins[0].Region != "hefei" || ins[0].Role != "regional" {
		t.Fatalf("instances: %+v, %v", ins, err)
	}
	if err := etcdtest.Grant(c, root.Client(), etcdtest.User{Name: user, Perms: []etcdauth.Perm{{Key: e.Prefix + keyspace.Instance("hefei", "hefei-1"), Type: etcdauth.Write}}}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "moved to its own key, the old record gone", wait.DefaultTimeout, func() bool {
		return has(keyspace.Instance("hefei", "hefei-1")) && !has(keyspace.LegacyInstance("hefei-1"))
	})
	if ins, err := root.Instances(c); err != nil || len(ins) != 1 {
		t.Fatalf("instances: %+v, %v", ins, err)
	}
}
