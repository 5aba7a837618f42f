package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/alloc"
)

func euaPoints(t *testing.T) (srv, usr [][2]float64) {
	shared := filepath.Join(repoRoot(), "..", "shared", "data", "eua")
	srv, err := readPoints(filepath.Join(shared, "site-optus-melbCBD.csv"), "LATITUDE", "LONGITUDE")
	if err != nil {
		t.Skip("EUA data not available:", err)
	}
	usr, err = readPoints(filepath.Join(shared, "users-melbcbd-generated.csv"), "Latitude", "Longitude")
	if err != nil {
		t.Skip("EUA data not available:", err)
	}
	return srv, usr
}

func smallConfig() config {
	return config{radius: 300, seed: 1, periods: 2, bwScale: 0.8, cpuScale: 1, nUsers: 120, params: alloc.DefaultParams()}
}

// TestExperimentRows: every algorithm runs (experiment exits on an
// infeasible result), qoe first with a bound at least its objective.
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

func TestBestBaseline(t *testing.T) {
	rows := []avgRow{{name: "qoe", objAll: 10}, {name: "x", objAll: 7}, {name: "y", objAll: 8}}
	if i := bestBaseline(rows); rows[i].name != "y" {
		t.Fatalf("best baseline %s", rows[i].name)
	}
	if g := improvement(10, 8); g != 25 {
		t.Fatalf("improvement %v", g)
	}
}
