package health

import (
	"math"
	"testing"

	"github.com/anysched/anysched/internal/province/health/avail"
)

// Seeds: testdata/fuzz/FuzzStubStatus and testdata/fuzz/FuzzStats (run as
// ordinary tests by go test); to fuzz:
//
//	go test ./internal/province/health -run '^$' -fuzz FuzzStubStatus -fuzztime 30s
//	go test ./internal/province/health -run '^$' -fuzz FuzzStats -fuzztime 30s

// FuzzStubStatus: the stub_status parser never panics, and what it accepts
// is sane; ParseBody agrees with it on stub_status bodies.
func FuzzStubStatus(f *testing.F) {
	f.Add([]byte("Active connections: 291 \nserver accepts handled requests\n 16630948 16630948 31070465 \nReading: 6 Writing: 179 Waiting: 106 \n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseStubStatus(data)
		if err != nil {
			if len(err.Error()) > 400 {
				t.Fatalf("error message of %d bytes", len(err.Error()))
			}
		} else {
			checkLoad(t, l)
			if l.CPU != 0 || l.Memory != 0 || l.LoadAvg != 0 || l.BandwidthMbps != 0 {
				t.Fatalf("stub_status set figures it does not have: %+v", l)
			}
		}
		bl, ok := ParseBody("text/plain", data)
		if ok {
			checkLoad(t, bl)
		}
	})
}

// FuzzStats: the JSON stats parser never panics, and what it accepts is
// finite, non-negative, with CPU and memory fractions.
func FuzzStats(f *testing.F) {
	f.Add([]byte(`{"cpu": 0.42, "bandwidth_mbps": 812.5, "connections": 1200}`))
	f.Add([]byte(`{"memory": 0.7, "load_avg": 3.5}`))
	f.Add([]byte(`{"load": [1.5, 1.0, 0.5], "memory": 1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseStats(data)
		if err == nil {
			checkLoad(t, l)
		} else if len(err.Error()) > 400 {
			t.Fatalf("error message of %d bytes", len(err.Error()))
		}
		for _, ct := range []string{"application/json", ""} {
			if bl, ok := ParseBody(ct, data); ok {
				checkLoad(t, bl)
			}
		}
	})
}

func checkLoad(t *testing.T, l avail.Load) {
	t.Helper()
	for name, v := range map[string]float64{"cpu": l.CPU, "memory": l.Memory, "load": l.LoadAvg, "bandwidth": l.BandwidthMbps} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || math.Signbit(v) {
			t.Fatalf("%s = %v in %+v", name, v, l)
		}
	}
	if l.CPU > 1 || l.Memory > 1 {
		t.Fatalf("cpu %v or memory %v above 1", l.CPU, l.Memory)
	}
	if l.Connections < 0 || l.Requests < 0 {
		t.Fatalf("negative count in %+v", l)
	}
}
