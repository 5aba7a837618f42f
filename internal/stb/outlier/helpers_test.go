package outlier

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// t0 is the tests' clock origin.
var t0 = time.Unix(1_700_000_000, 0)

type harness struct {
	t   *testing.T
	d   *Detector
	reg *prometheus.Registry
	// client is the next fresh client key, so that scenarios never reuse one
	// by accident.
	client uint64
}

func newHarness(t *testing.T, cfg Config, nodes []int32, names []string) *harness {
	t.Helper()
	cfg.Enabled = true
	reg := prometheus.NewRegistry()
	d, err := New(cfg, reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	d.SetServers(nodes, names)
	return &harness{t: t, d: d, reg: reg, client: 1}
}

func (h *harness) fresh() uint64 { h.client++; return h.client }

// ok sends one request of a fresh client to server at: an answer that holds.
func (h *harness) ok(server int32, at time.Time) {
	h.d.Observe(h.fresh(), 7, server, at.UnixNano())
}

// fail sends a fresh client to server at, and has it ask again 2s later
// (answered by other): one failure of server.
func (h *harness) fail(server, other int32, at time.Time) {
	c := h.fresh()
	h.d.Observe(c, 7, server, at.UnixNano())
	h.d.Observe(c, 7, other, at.Add(2*time.Second).UnixNano())
}

func (h *harness) failures(server int32) uint64 {
	return h.d.table.Load().servers[server].failures.Load()
}

func (h *harness) ejected() []bool { return h.d.EjectedSet() }

func (h *harness) counter(name string, labels ...string) float64 {
	h.t.Helper()
	switch name {
	case "ejections":
		return testutil.ToFloat64(h.d.m.ejections.WithLabelValues(labels...))
	case "reasks":
		return testutil.ToFloat64(h.d.m.reasks)
	case "skipped":
		return testutil.ToFloat64(h.d.m.skipped)
	case "ejected":
		return testutil.ToFloat64(h.d.m.ejected)
	}
	h.t.Fatalf("no metric %s", name)
	return 0
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = string(rune('a' + i))
	}
	return out
}

func nodesOf(sizes ...int) []int32 {
	var out []int32
	for node, k := range sizes {
		for range k {
			out = append(out, int32(node))
		}
	}
	return out
}

func count(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}
