package health

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdfeed"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// BenchmarkCompute: one merge of the design's province, 16 cities and
// about 10,000 servers, each checked by its city's two checkers, as a
// scheduler runs it on every change of health or operator state.
func BenchmarkCompute(b *testing.B) {
	snap := fixture.Compile(b, fixture.Shaped(b, topogen.Options{NodesPerRegion: 25, ServersPerNode: 25, ZonesPerRegion: 1, NetworksPerZone: 1}, topogen.Cities(nil, 16)...))
	m := &Merger{Options: DefaultMergerOptions(), Logger: slog.New(slog.DiscardHandler)}
	var kvs []etcdfeed.KV
	for ri, rv := range snap.Regions {
		for k := range 2 {
			id, lease := fmt.Sprintf("chk-%d", k), int64(100*ri+k+1)
			info, _ := json.Marshal(avail.CheckerInfo{ID: id, Region: rv.Name})
			kvs = append(kvs, etcdfeed.KV{Key: keyspace.Checker(rv.Name, id), Value: info, Lease: lease})
			for _, sv := range snap.Servers {
				if int(sv.Region) != ri {
					continue
				}
				r, _ := json.Marshal(Report{Up: true, Load: avail.Load{CPU: 0.5, Connections: 100 + k}, RTT: time.Millisecond, At: time.Now()})
				kvs = append(kvs, etcdfeed.KV{Key: keyspace.Verdict(rv.Name, id, sv.Name), Value: r, Lease: lease})
			}
		}
	}
	m.listed(kvs)
	b.ReportMetric(float64(len(snap.Servers)), "servers")
	b.ResetTimer()
	for b.Loop() {
		m.Compute(snap, nil)
	}
}
