package store_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"testing"

	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// provinces returns two different province-scale documents (10,000 servers,
// 100,000 networks), so that every apply in a loop changes the topology.
func provinces(b *testing.B) [2]*topology.Topology {
	a, c := fixture.Scale(), fixture.Scale()
	c.Nodes[0].Servers[0].Weight = 7
	return [2]*topology.Topology{a, c}
}

// BenchmarkApplyProvince: one atomic apply of a province-scale topology
// (encode, compress, chunk writes, guarded pointer flip, old-chunk cleanup).
func BenchmarkApplyProvince(b *testing.B) {
	st := etcdtest.Start(b).Store()
	docs := provinces(b)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := st.Apply(ctx, docs[i%2], store.ApplyOptions{}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkApplyProvince_Baseline: the floor under Apply, writing the same
// compressed bytes as plain puts of the same chunk size, nothing else.
func BenchmarkApplyProvince_Baseline(b *testing.B) {
	e := etcdtest.Start(b)
	cli := e.Client()
	docs := provinces(b)
	var blobs [2][]byte
	for k, d := range docs {
		js, _, err := store.Canonical(d)
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(js)
		zw.Close()
		blobs[k] = buf.Bytes()
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		blob := blobs[i%2]
		for c := 0; c*store.DefaultChunkSize < len(blob); c++ {
			part := blob[c*store.DefaultChunkSize : min(len(blob), (c+1)*store.DefaultChunkSize)]
			if _, err := cli.Put(ctx, fmt.Sprintf("/raw/%d/%06d", i%2, c), string(part)); err != nil {
				b.Fatal(err)
			}
		}
		i++
	}
}

// BenchmarkLoadProvince: reading the current province back (pointer, chunks
// at its revision, decompress, digest check, strict JSON decode): what every
// scheduler does on a watch event before compiling.
func BenchmarkLoadProvince(b *testing.B) {
	st := etcdtest.Start(b).Store()
	ctx := context.Background()
	if _, err := st.Apply(ctx, provinces(b)[0], store.ApplyOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.Current(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
