package etcdguard

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/etcd/keyspace"
)

// BenchmarkCharge: one write charged to its identity in a province of 16
// cities, each with a primary and a standby scheduler (embedded checkers)
// and two standalone checkers: 64 identities. The province writes about
// 90 revisions a second (docs/benchmarks.md, etcd), each charged once.
func BenchmarkCharge(b *testing.B) {
	const prefix = "/anysched/"
	g := New(nil, prefix, Config{BytesPerMinute: 1 << 62, Keys: 1 << 30}, Options{}, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	var last string
	for r := range 16 {
		region := fmt.Sprintf("city%02d", r)
		for _, spec := range []string{
			etcdauth.RegionalPrefix + region + "." + region + "-1" + etcdauth.EmbeddedCheckerSuffix,
			etcdauth.RegionalPrefix + region + "." + region + "-2" + etcdauth.EmbeddedCheckerSuffix,
			etcdauth.CheckerPrefix + region + ".c1", etcdauth.CheckerPrefix + region + ".c2",
		} {
			id, err := etcdauth.ParseIdentity(spec)
			if err != nil {
				b.Fatal(err)
			}
			a := &account{id: id, meter: g.m.written.WithLabelValues(id.Name)}
			for _, p := range etcdauth.Permissions(prefix, id) {
				if p.Type != etcdauth.Read {
					a.writes = append(a.writes, p)
				}
			}
			g.accounts[id.Name] = a
		}
		last = prefix + keyspace.AllocState(region, region+"-2") + "part-0"
	}
	ev := &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(last), Value: make([]byte, 4096), CreateRevision: 1, ModRevision: 2}}
	b.ReportAllocs()
	for b.Loop() {
		g.charge(b.Context(), ev)
	}
}
