package topology_test

import (
	"sync"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
)

// The province-scale document of docs/design.md (16 regions, 200 nodes,
// 10,000 servers, 100,000 zone networks), generated once per test binary.
var province = sync.OnceValues(func() (*topology.Topology, []byte) {
	t := topogen.ProvinceScale(nil)
	js, err := t.EncodeJSON()
	if err != nil {
		panic(err)
	}
	return t, js
})

// BenchmarkCompileProvince measures building a Snapshot (validation and every
// lookup structure) for a whole province, which each scheduler does on every
// topology change.
func BenchmarkCompileProvince(b *testing.B) {
	t, _ := province()
	b.ReportAllocs()
	for b.Loop() {
		s, err := topology.Compile(t, 1)
		if err != nil {
			b.Fatal(err)
		}
		if s.Counts().Networks != 100_000 {
			b.Fatalf("counts = %+v", s.Counts())
		}
	}
}

// BenchmarkCompileProvince_Baseline decodes the stored (JSON) form of the
// same province: Compile's cost is stated relative to merely parsing it.
func BenchmarkCompileProvince_Baseline(b *testing.B) {
	_, js := province()
	b.SetBytes(int64(len(js)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := topology.DecodeJSON(js); err != nil {
			b.Fatal(err)
		}
	}
}
