package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anysched/anysched/data"
	"github.com/anysched/anysched/internal/allocation/qoe"
)

func euaPoints(t *testing.T) (srv, usr [][2]float64) {
	srv, err := readPoints("", data.EUASites, "LATITUDE", "LONGITUDE")
	if err != nil {
		t.Fatal(err)
	}
	usr, err = readPoints("", data.EUAUsers, "Latitude", "Longitude")
	if err != nil {
		t.Fatal(err)
	}
	return srv, usr
}

func smallConfig() config {
	return config{radius: 300, seed: 1, periods: 2, bwScale: 0.8, cpuScale: 1, nUsers: 120, params: qoe.DefaultParams()}
}

// TestExperimentRows: every algorithm runs (experiment exits on an
// infeasible result), qoe first with a bound at least its objective; and
// with the origin cost (checkOriginRows).
func TestExperimentRows(t *testing.T) {
	srv, usr := euaPoints(t)
	cov, rows, first := experiment(smallConfig(), srv, usr)
	if len(first.Users) != 120 || len(rows) != 6 || rows[0].Name != "qoe" {
		t.Fatalf("users %d rows %d first %q", len(first.Users), len(rows), rows[0].Name)
	}
	if rows[0].Bound == nil || *rows[0].Bound < rows[0].Objective-1e-6 {
		t.Fatalf("qoe bound %v objective %v", rows[0].Bound, rows[0].Objective)
	}
	if s := cov.Under10 + cov.From10To20 + cov.Over20; s < 0.999 || s > 1.001 {
		t.Fatalf("coverage shares sum to %v", s)
	}
	checkOriginRows(t, srv, usr, rows)
}

// TestSensitivityAndSweeps: the --sensitivity table has one row per
// variant, and --plot writes both PNGs and both tables (tiny sweeps).
func TestSensitivityAndSweeps(t *testing.T) {
	srv, usr := euaPoints(t)
	var buf bytes.Buffer
	sensitivity(&buf, smallConfig(), 1, srv, usr)
	if n := strings.Count(buf.String(), "\n"); n != 2+1+2*8 {
		t.Fatalf("sensitivity table has %d lines:\n%s", n, buf.String())
	}
	dir := t.TempDir()
	buf.Reset()
	if err := sweeps(&buf, dir, smallConfig(), 1, srv, usr, []float64{60, 150}, []float64{0.5, 1}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"qoe_users.png", "qoe_capacity.png"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if !strings.Contains(buf.String(), "| 150 |") || !strings.Contains(buf.String(), "| 0.5 |") {
		t.Fatalf("sweep tables:\n%s", buf.String())
	}
}

// TestDistributions: per algorithm, the rung and fallback shares sum to 1,
// every latency is finite and positive (the fallback's for fallback users),
// the mean is the row's, the quantiles are ordered and the CDF rises to 1;
// distPlots writes both PNGs and both tables.
func TestDistributions(t *testing.T) {
	srv, usr := euaPoints(t)
	cfg := smallConfig()
	_, rows, first := experiment(cfg, srv, usr)
	fbMS := 1000 * first.Params.FallbackLatency
	ds := distributions(rows, fbMS)
	if len(ds) != len(rows) {
		t.Fatalf("%d distributions for %d rows", len(ds), len(rows))
	}
	for i, d := range ds {
		if d.name != rows[i].Name || len(d.latMS) != cfg.periods*cfg.nUsers || len(d.rungShare) != len(first.Ladder) {
			t.Fatalf("%s: %d latencies, %d rungs", d.name, len(d.latMS), len(d.rungShare))
		}
		sum := d.fallback
		for _, s := range d.rungShare {
			sum += s
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("%s: shares sum to %v", d.name, sum)
		}
		fb := 0
		for _, l := range d.latMS {
			if math.IsNaN(l) || math.IsInf(l, 0) || l <= 0 {
				t.Fatalf("%s: latency %v", d.name, l)
			}
			if l == fbMS {
				fb++
			}
		}
		if fb < rows[i].Fallback || len(d.edgeMS)+rows[i].Fallback != len(d.latMS) {
			t.Fatalf("%s: %d latencies at the fallback's, %d on an edge server, for %d fallback users", d.name, fb, len(d.edgeMS), rows[i].Fallback)
		}
		if math.Abs(d.meanMS-rows[i].MeanLatencyMS) > 1e-6 {
			t.Fatalf("%s: mean %v, row %v", d.name, d.meanMS, rows[i].MeanLatencyMS)
		}
		if p50, p90, p99 := quantile(d.latMS, 0.5), quantile(d.latMS, 0.9), quantile(d.latMS, 0.99); p50 > p90 || p90 > p99 || p99 > d.latMS[len(d.latMS)-1] {
			t.Fatalf("%s: quantiles %v %v %v", d.name, p50, p90, p99)
		}
		cdf := ecdf(d.latMS)
		for j := 1; j < len(cdf); j++ {
			if cdf[j].X <= cdf[j-1].X || cdf[j].Y <= cdf[j-1].Y {
				t.Fatalf("%s: CDF not increasing at %d: %v %v", d.name, j, cdf[j-1], cdf[j])
			}
		}
		if cdf[len(cdf)-1].Y != 1 {
			t.Fatalf("%s: CDF ends at %v", d.name, cdf[len(cdf)-1].Y)
		}
	}
	if q := quantile([]float64{1, 2, 3, 4}, 0.5); q != 2 {
		t.Fatalf("median of 1..4: %v", q)
	}
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := distPlots(&buf, dir, cfg, srv, usr); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"qoe_latency.png", "qoe_bitrate.png"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if n := strings.Count(buf.String(), "| lai-greedy |"); n != 2 {
		t.Fatalf("distribution tables (%d lai-greedy rows):\n%s", n, buf.String())
	}
}

// TestCBCPlot: qoe_cbc.png is written from the comparison's rows.
func TestCBCPlot(t *testing.T) {
	rows := []cbcRow{
		{seed: 1, cbc: cbcRun{best: 5771.94, bound: 5845.94}, cbcGo: 5771.94, qoe: 5833.42, qoeBound: 5848.14, users: 816, srvs: 125},
		{seed: 2, cbc: cbcRun{best: 5747.82, bound: 5833.54}, cbcGo: 5747.82, qoe: 5825.18, qoeBound: 5835.29, users: 816, srvs: 125},
	}
	if g := rows[0].gaps(); math.Abs(100*g.vs-1.07) > 0.005 || math.Abs(100*g.qoe-0.25) > 0.005 || math.Abs(100*g.cbc-1.27) > 0.005 {
		t.Fatalf("gaps %+v", g)
	}
	f := filepath.Join(t.TempDir(), "qoe_cbc.png")
	if err := cbcPlot(f, rows, 300); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(f); err != nil || st.Size() < 1000 {
		t.Fatalf("%s: %v", f, err)
	}
}

func TestBestBaseline(t *testing.T) {
	rows := []avgRow{{name: "qoe", objAll: 10}, {name: "x", objAll: 7}, {name: "y", objAll: 8}}
	if i := bestBaseline(rows); rows[i].name != "y" {
		t.Fatalf("best baseline %s", rows[i].name)
	}
	if g := improvement(10, 8); g != 25 {
		t.Fatalf("improvement %v", g)
	}
}

// TestParseCBCLog: the incumbent (negated in the log of a maximisation),
// when and by what it was found, the final bound and status.
func TestParseCBCLog(t *testing.T) {
	log := `Continuous objective value is 5847.97 - 0.26 seconds
Cbc0038I Mini branch and bound improved solution from -5680.39 to -5771.94 (1.25 seconds)
Cbc0012I Integer solution of -5771.9361 found by feasibility pump after 0 iterations and 0 nodes (2.78 seconds)
Cbc0004I Integer solution of -5772.5 found after 1200 iterations and 35 nodes (40.10 seconds)
Cbc0010I After 5100 nodes, 945 on tree, -5772.5 best solution, best possible -5845.9442 (296.84 seconds)

Result - Stopped on time limit

Objective value:                5772.50000000
Upper bound:                    5845.944
Gap:                            -0.01
Enumerated nodes:               5160
Time (CPU seconds):             300.25
Time (Wallclock seconds):       360.18
`
	run, err := parseCBCLog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if run.best != 5772.5 || run.foundAt != 40.1 || run.foundBy != "" || run.bound != 5845.944 ||
		run.status != "Stopped on time limit" || run.cpu != 300.25 || run.lp != 5847.97 {
		t.Fatalf("%+v", run)
	}
	run, err = parseCBCLog(strings.NewReader(strings.Split(log, "Cbc0004I")[0]))
	if err != nil || run.best != 5771.9361 || run.foundBy != "feasibility pump" || run.foundAt != 2.78 {
		t.Fatalf("%+v %v", run, err)
	}
	if _, err := parseCBCLog(strings.NewReader("Result - Stopped on time limit\n")); err == nil {
		t.Fatal("a log without a solution parsed")
	}
}

// checkOriginRows: with the origin cost on, the rows are qoe, qoe's
// cost-blind plan and the baselines, each scored net of its pulls; qoe
// pulls less than the cost-blind plan and scores more, within its bound;
// a pull streams R (5 Mbps); without the cost every row still counts its
// pulls.
func checkOriginRows(t *testing.T, srv, usr [][2]float64, plain []row) {
	t.Helper()
	cfg := smallConfig()
	cfg.params.OriginCost = 2
	_, rows, _ := experiment(cfg, srv, usr)
	if len(rows) != 7 || rows[0].Name != "qoe" || rows[1].Name != "qoe (cost-blind)" || rows[1].Bound != nil {
		t.Fatalf("%d rows, %q %q", len(rows), rows[0].Name, rows[1].Name)
	}
	q, blind := rows[0], rows[1]
	if q.Bound == nil || *q.Bound < q.Objective-1e-6 {
		t.Fatalf("qoe bound %v objective %v", q.Bound, q.Objective)
	}
	if q.OriginPulls >= blind.OriginPulls || q.ObjectiveAll <= blind.ObjectiveAll {
		t.Fatalf("qoe: %.1f pulls, objective %.2f; cost-blind: %.1f pulls, %.2f", q.OriginPulls, q.ObjectiveAll, blind.OriginPulls, blind.ObjectiveAll)
	}
	if blind.OriginPulls != plain[0].OriginPulls {
		t.Fatalf("cost-blind plan pulls %.1f, qoe without the cost %.1f", blind.OriginPulls, plain[0].OriginPulls)
	}
	for i, r := range rows {
		if r.OriginPulls <= 0 || math.Abs(r.OriginMbps-5*r.OriginPulls) > 1e-9 {
			t.Fatalf("%s: %.1f pulls, %.1f Mbps", r.Name, r.OriginPulls, r.OriginMbps)
		}
		if i >= 2 && r.OriginPulls != plain[i-1].OriginPulls {
			t.Fatalf("%s: %.1f pulls with the cost, %.1f without (baselines ignore it)", r.Name, r.OriginPulls, plain[i-1].OriginPulls)
		}
	}
}
