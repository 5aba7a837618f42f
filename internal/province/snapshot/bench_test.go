package snapshot_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/snapshot"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/wait"
)

func benchProvinces() [2]*topology.Topology {
	a, c := fixture.Scale(), fixture.Scale()
	c.Nodes[0].Servers[0].Weight = 7
	return [2]*topology.Topology{a, c}
}

// BenchmarkApplyToSwap: from the start of an apply of a province-scale
// topology until a following scheduler has compiled and swapped it in
// (apply, watch event, load, decode, compile, swap, disk cache write).
func BenchmarkApplyToSwap(b *testing.B) { benchApply(b, true) }

// BenchmarkApplyToSwap_Baseline: the apply alone, no scheduler following.
func BenchmarkApplyToSwap_Baseline(b *testing.B) { benchApply(b, false) }

func benchApply(b *testing.B, follow bool) {
	e := etcdtest.Start(b)
	st := e.Store()
	docs := benchProvinces()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &snapshot.Syncer{Source: st, CacheFile: b.TempDir() + "/cache", ConfirmInterval: time.Second, MaxStaleness: time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if follow {
		go s.Run(ctx)
	}
	i := 0
	for b.Loop() {
		res, err := st.Apply(ctx, docs[i%2], store.ApplyOptions{})
		if err != nil {
			b.Fatal(err)
		}
		i++
		if follow {
			wait.ForEvery(b, "the applied revision swapped in", time.Minute, 100*time.Microsecond, func() bool {
				return s.Snapshot() != nil && s.Snapshot().Revision == res.Revision
			})
		}
	}
}
