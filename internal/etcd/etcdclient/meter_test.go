package etcdclient_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/obs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestWriteMeter: against a real etcd, every kind of write is counted
// under the concept of its keys (bytes, requests, keys, revisions), reads
// are not, and the counters reach the registry under the documented names.
func TestWriteMeter(t *testing.T) {
	e := etcdtest.Start(t)
	m := etcdclient.NewWriteMeter(e.Prefix)
	reg := obs.NewRegistry()
	reg.MustRegister(m)
	cli, err := etcdclient.Connect(config.Etcd{DialTimeout: 5 * time.Second}, []string{e.Endpoint()}, slog.New(slog.NewTextHandler(io.Discard, nil)), etcdclient.WithWriteMeter(m))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	p := e.Prefix
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	inst, val := p+keyspace.Instance("hefei", "hefei-1"), strings.Repeat("x", 1000)
	must(cli.Put(ctx, inst, val))
	must(cli.Get(ctx, p, clientv3.WithPrefix())) // reads are not counted
	// A transaction of two verdicts and a claim; then one whose compare
	// fails and whose failure branch deletes the claim.
	v1, v2, claim := p+keyspace.Verdict("hefei", "c1", "s1"), p+keyspace.Verdict("hefei", "c1", "s2"), p+keyspace.AllocClaim("hefei", "hefei-1")
	must(cli.Txn(ctx).Then(clientv3.OpPut(v1, "up"), clientv3.OpPut(v2, "up"), clientv3.OpPut(claim, "{}")).Commit())
	must(cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(claim), "=", 0)).
		Then(clientv3.OpPut(claim, "never")).Else(clientv3.OpDelete(claim)).Commit())
	// A delete that finds nothing writes no revision; one that finds two does.
	must(cli.Delete(ctx, p+keyspace.AllocStates("nowhere"), clientv3.WithPrefix()))
	must(cli.Delete(ctx, p+keyspace.Verdicts("hefei", "c1"), clientv3.WithPrefix()))
	must(cli.Put(ctx, "/elsewhere/x", "y"))
	must(cli.Txn(ctx).Then(clientv3.OpGet(inst)).Commit()) // a reading transaction
	g, err := cli.Grant(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	must(cli.KeepAliveOnce(ctx, g.ID))
	must(cli.Revoke(ctx, g.ID))

	got := m.Totals()
	want := map[string]etcdclient.WriteTotals{
		keyspace.ConceptInstances:   {Writes: 1, Keys: 1, Revisions: 1},
		keyspace.ConceptHealth:      {Writes: 2, Keys: 4, Revisions: 2},
		keyspace.ConceptAllocClaims: {Writes: 2, Keys: 2, Revisions: 1},
		keyspace.ConceptAllocState:  {Writes: 1},
		keyspace.ConceptOther:       {Writes: 1, Keys: 1, Revisions: 1},
		etcdclient.KindLease:        {Writes: 3},
	}
	for kind, w := range want {
		g := got[kind]
		if g.Writes != w.Writes || g.Keys != w.Keys || g.Revisions != w.Revisions || g.Bytes == 0 {
			t.Errorf("%s: counted %+v, want %+v and some bytes", kind, g, w)
		}
	}
	// The first transaction's revision is the verdicts' (its first write),
	// the claim's put counted in the claims' keys; the put of 1000 bytes
	// is at least that many.
	if b := got[keyspace.ConceptInstances].Bytes; b < uint64(len(inst)+len(val)) || b > uint64(len(inst)+len(val)+16) {
		t.Errorf("a put of %d bytes of key and value counted as %d", len(inst)+len(val), b)
	}
	for _, k := range []string{keyspace.ConceptTopology, keyspace.ConceptAudit, keyspace.ConceptDrain} {
		if got[k] != (etcdclient.WriteTotals{}) {
			t.Errorf("%s: counted %+v, nothing written", k, got[k])
		}
	}
	if problems := obs.LintMetrics(reg); len(problems) > 0 {
		t.Errorf("metric lint: %v", problems)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, mf := range mfs {
		names[mf.GetName()] = len(mf.GetMetric())
		for _, mt := range mf.GetMetric() {
			if mf.GetName() == "anysched_etcd_client_write_bytes_total" && mt.GetLabel()[0].GetValue() == keyspace.ConceptInstances &&
				mt.GetCounter().GetValue() != float64(got[keyspace.ConceptInstances].Bytes) {
				t.Errorf("anysched_etcd_client_write_bytes_total{kind=instances} = %v", mt.GetCounter().GetValue())
			}
		}
	}
	for _, n := range []string{"anysched_etcd_client_write_bytes_total", "anysched_etcd_client_writes_total", "anysched_etcd_client_write_keys_total", "anysched_etcd_client_write_revisions_total"} {
		if names[n] != len(keyspace.ConceptNames())+1 {
			t.Errorf("%s: %d series, want one per concept and lease", n, names[n])
		}
	}
}
