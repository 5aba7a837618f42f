package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/anysched/anysched/internal/allocation/qoe"
)

// cbcRun is what CBC's log says about one run.
type cbcRun struct {
	best    float64 // best integer solution (objective, maximised)
	foundAt float64 // CPU seconds at which it was found
	foundBy string  // heuristic that found it ("" = branch and bound)
	bound   float64 // CBC's final upper bound
	lp      float64 // the LP relaxation's optimum (root, before cuts)
	status  string  // e.g. "Stopped on time limit", "Optimal solution found"
	cpu     float64 // CPU seconds used
}

var (
	reIncumbent = regexp.MustCompile(`Cbc00(?:04|12)I Integer solution of (\S+) found (?:by (.+?) )?after .*\(([0-9.]+) seconds\)`)
	reField     = regexp.MustCompile(`^(Objective value|Upper bound|Lower bound|Time \(CPU seconds\)):\s+(\S+)`)
	reResult    = regexp.MustCompile(`^Result - (.*)$`)
	reLP        = regexp.MustCompile(`^Continuous objective value is (\S+)`)
)

// parseCBCLog reads CBC's log of `cbc FILE.lp sec N solve` on a
// maximisation (the log's incumbents are negated objectives).
func parseCBCLog(r io.Reader) (cbcRun, error) {
	run := cbcRun{best: math.NaN(), bound: math.NaN(), foundAt: math.NaN(), lp: math.NaN()}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if m := reIncumbent.FindStringSubmatch(line); m != nil {
			v, err1 := strconv.ParseFloat(m[1], 64)
			t, err2 := strconv.ParseFloat(m[3], 64)
			if err1 == nil && err2 == nil && (math.IsNaN(run.best) || -v > run.best) {
				run.best, run.foundAt, run.foundBy = -v, t, m[2]
			}
			continue
		}
		if m := reLP.FindStringSubmatch(line); m != nil {
			if v, err := strconv.ParseFloat(m[1], 64); err == nil {
				run.lp = math.Abs(v)
			}
			continue
		}
		if m := reResult.FindStringSubmatch(line); m != nil {
			run.status = m[1]
			continue
		}
		if m := reField.FindStringSubmatch(line); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				continue
			}
			switch m[1] {
			case "Objective value":
				if math.IsNaN(run.best) || math.Abs(v) > run.best {
					run.best = math.Abs(v)
				}
			case "Upper bound", "Lower bound": // CBC names the bound of a maximisation either way
				run.bound = math.Abs(v)
			case "Time (CPU seconds)":
				run.cpu = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return run, err
	}
	if math.IsNaN(run.best) {
		return run, fmt.Errorf("no integer solution in the log")
	}
	return run, nil
}

// cbcRow is one seed of the comparison.
type cbcRow struct {
	seed                 int
	cbc                  cbcRun
	cbcGo                float64 // CBC's assignment evaluated by qoe.Evaluate
	qoe, qoeBound        float64
	qoeWallMS, qoeCPUMS  float64 // medians over the runs
	qoeDeterministic     bool    // every run gave the same assignment
	qoeIter, users, srvs int
}

// cbcGaps are a row's relative figures.
type cbcGaps struct {
	cbc   float64 // CBC's final gap
	qoe   float64 // qoe's certified gap (against its own bound)
	vs    float64 // qoe against CBC's best (as evaluated in Go)
	vsCBC float64 // qoe's gap to CBC's bound
}

func (r cbcRow) gaps() cbcGaps {
	return cbcGaps{cbc: (r.cbc.bound - r.cbc.best) / r.cbc.bound, qoe: (r.qoeBound - r.qoe) / r.qoeBound,
		vs: (r.qoe - r.cbcGo) / r.cbcGo, vsCBC: (r.cbc.bound - r.qoe) / r.cbc.bound}
}

// cbcCompare runs the "CBC on the exported LP" comparison for seeds
// 1..seeds: the period-1 instance of each seed is exported to
// dir/seedS.lp, CBC runs on it (`nice -n 19 cbc dir/seedS.lp sec SEC solve
// solu dir/cbcS.sol`, log in dir/cbcS.log; one run at a time, skipped when
// both files exist), CBC's assignment is re-evaluated in Go, qoe solves the
// same instance `runs` times (median wall-clock and CPU time, one core),
// and a markdown table is written to w; with plotDir, also qoe_cbc.png
// (cbcPlot) there.
func cbcCompare(w io.Writer, cfg config, seeds int, dir string, sec, runs int, plotDir string, srvPts, usrPts [][2]float64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var rows []cbcRow
	for s := 1; s <= seeds; s++ {
		c := cfg
		c.seed, c.periods = uint64(s), 1
		seq, build := synth(c, srvPts, usrPts)
		in := build(seq[0], nil)
		lp := filepath.Join(dir, fmt.Sprintf("seed%d.lp", s))
		sol := filepath.Join(dir, fmt.Sprintf("cbc%d.sol", s))
		logf := filepath.Join(dir, fmt.Sprintf("cbc%d.log", s))
		if err := writeLP(lp, in); err != nil {
			return fmt.Errorf("seed %d: %w", s, err)
		}
		if !exists(sol) || !exists(logf) {
			fmt.Fprintf(os.Stderr, "seed %d: cbc %s sec %d ...\n", s, lp, sec)
			if err := runCBC(lp, sol, logf, sec); err != nil {
				return fmt.Errorf("seed %d: %w", s, err)
			}
		}
		row := cbcRow{seed: s, users: len(in.Users), srvs: len(in.Servers)}
		f, err := os.Open(logf)
		if err != nil {
			return err
		}
		row.cbc, err = parseCBCLog(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", logf, err)
		}
		f, err = os.Open(sol)
		if err != nil {
			return err
		}
		assign, err := qoe.ParseSolution(f, in)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", sol, err)
		}
		obj, ok, viol := qoe.Evaluate(in, assign)
		if !ok {
			return fmt.Errorf("%s: CBC's assignment is infeasible in Go: %v", sol, viol[:min(3, len(viol))])
		}
		row.cbcGo = obj
		row.qoe, row.qoeBound, row.qoeWallMS, row.qoeCPUMS, row.qoeIter, row.qoeDeterministic = timeQoE(in, runs)
		rows = append(rows, row)
	}
	writeCBCTable(w, rows, sec, runs)
	if plotDir == "" {
		return nil
	}
	if err := os.MkdirAll(plotDir, 0o755); err != nil {
		return err
	}
	return cbcPlot(filepath.Join(plotDir, "qoe_cbc.png"), rows, sec)
}

// cbcPlot draws, per seed, qoe's objective relative to CBC's best and the
// two certified gaps (qoe's against its own bound, CBC's final one) as
// grouped bars.
func cbcPlot(file string, rows []cbcRow, sec int) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("qoe against CBC (%d CPU s) on the period-1 LP export (EUA, %d users, %d servers)", sec, rows[0].users, rows[0].srvs)
	p.X.Label.Text = "seed"
	p.Y.Label.Text = "% (gaps: (bound - objective) / bound)"
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	var names []string
	for _, r := range rows {
		names = append(names, strconv.Itoa(r.seed))
	}
	p.NominalX(names...)
	series := []struct {
		label string
		value func(g cbcGaps) float64
		color color.Color
	}{
		{"qoe objective vs CBC best", func(g cbcGaps) float64 { return g.vs }, algColor(0)},
		{"qoe certified gap (own bound)", func(g cbcGaps) float64 { return g.qoe }, color.RGBA{240, 150, 150, 255}},
		{"CBC final gap", func(g cbcGaps) float64 { return g.cbc }, algColor(1)},
	}
	width := vg.Points(14)
	ymax := 0.0
	for i, se := range series {
		vs := make(plotter.Values, len(rows))
		for j, r := range rows {
			vs[j] = 100 * se.value(r.gaps())
			ymax = math.Max(ymax, vs[j])
		}
		b, err := plotter.NewBarChart(vs, width)
		if err != nil {
			return err
		}
		b.Color = se.color
		b.LineStyle.Width = 0
		b.Offset = vg.Length(i-1) * width
		p.Add(b)
		p.Legend.Add(se.label, b)
	}
	p.X.Min, p.X.Max = -0.6, float64(len(rows))-0.4
	p.Y.Max = 1.35 * ymax // room for the legend
	return p.Save(8*vg.Inch, 5*vg.Inch, file)
}

// timeQoE solves in `runs` times with the default qoe solver and returns
// the first run's objective and bound, the median wall-clock and CPU
// milliseconds and whether every run returned the same assignment.
func timeQoE(in *qoe.Instance, runs int) (obj, bound, wallMS, cpuMS float64, iter int, same bool) {
	runs = max(runs, 1)
	in.Candidates() // the coverage lists are cached per instance; time every run alike
	var walls, cpus []float64
	var first []qoe.Choice
	same = true
	for r := 0; r < runs; r++ {
		c0, t0 := cpuTime(), time.Now()
		res, err := qoe.Lagrangian{}.Solve(context.Background(), in)
		wall, cpu := time.Since(t0), cpuTime()-c0
		check(err)
		walls = append(walls, float64(wall.Microseconds())/1000)
		cpus = append(cpus, float64(cpu.Microseconds())/1000)
		if r == 0 {
			o, ok, viol := qoe.Evaluate(in, res.Assign)
			if !ok {
				check(fmt.Errorf("qoe infeasible: %v", viol[:min(3, len(viol))]))
			}
			obj, bound, iter, first = o, res.Bound, res.Iter, res.Assign
		} else {
			for v := range first {
				if res.Assign[v] != first[v] {
					same = false
					break
				}
			}
		}
	}
	return obj, bound, median(walls), median(cpus), iter, same
}

// cpuTime is the process's user+system CPU time (qoe runs on one core:
// main sets GOMAXPROCS(1)).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// writeLP exports in to path; an existing file must hold the same export
// (so that CBC's logs and solutions kept next to it belong to this instance).
func writeLP(path string, in *qoe.Instance) error {
	var buf bytes.Buffer
	if err := qoe.WriteLP(&buf, in); err != nil {
		return err
	}
	if old, err := os.ReadFile(path); err == nil {
		if !bytes.Equal(old, buf.Bytes()) {
			return fmt.Errorf("%s differs from this instance's export (other flags or data?); remove it and its CBC files", path)
		}
		return nil
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func runCBC(lp, sol, logf string, sec int) error {
	out, err := os.Create(logf)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command("nice", "-n", "19", "cbc", lp, "sec", strconv.Itoa(sec), "solve", "solu", sol)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		os.Remove(sol) // an interrupted run is redone next time
		return fmt.Errorf("cbc: %w (log %s)", err, logf)
	}
	return nil
}

func exists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Size() > 0
}

func writeCBCTable(w io.Writer, rows []cbcRow, sec, runs int) {
	fmt.Fprintf(w, "| seed | CBC best (found at, CPU s) | CBC best in Go | CBC bound | CBC final gap | LP bound | qoe objective | qoe bound | qoe certified gap | qoe vs CBC best | qoe gap to CBC bound | qoe ms (wall / CPU) |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	var a cbcRow
	var aCBCGap, aQGap, aVs, aVsB float64
	allSame := true
	n := float64(len(rows))
	for _, r := range rows {
		by := r.cbc.foundBy
		if by == "" {
			by = "branch and bound"
		}
		g := r.gaps()
		fmt.Fprintf(w, "| %d | %.2f (%.1f s, %s) | %.2f | %.2f | %.2f%% | %.2f | %.2f | %.2f | %.2f%% | %+.2f%% | %.2f%% | %.0f / %.0f |\n",
			r.seed, r.cbc.best, r.cbc.foundAt, by, r.cbcGo, r.cbc.bound, 100*g.cbc, r.cbc.lp, r.qoe, r.qoeBound, 100*g.qoe, 100*g.vs, 100*g.vsCBC, r.qoeWallMS, r.qoeCPUMS)
		a.cbc.best += r.cbc.best / n
		a.cbcGo += r.cbcGo / n
		a.cbc.bound += r.cbc.bound / n
		a.cbc.lp += r.cbc.lp / n
		a.qoe += r.qoe / n
		a.qoeBound += r.qoeBound / n
		a.qoeWallMS += r.qoeWallMS / n
		a.qoeCPUMS += r.qoeCPUMS / n
		aCBCGap += g.cbc / n
		aQGap += g.qoe / n
		aVs += g.vs / n
		aVsB += g.vsCBC / n
		allSame = allSame && r.qoeDeterministic
	}
	fmt.Fprintf(w, "| mean | %.2f | %.2f | %.2f | %.2f%% | %.2f | %.2f | %.2f | %.2f%% | %+.2f%% | %.2f%% | %.0f / %.0f |\n",
		a.cbc.best, a.cbcGo, a.cbc.bound, 100*aCBCGap, a.cbc.lp, a.qoe, a.qoeBound, 100*aQGap, 100*aVs, 100*aVsB, a.qoeWallMS, a.qoeCPUMS)
	var status []string
	for _, r := range rows {
		status = append(status, fmt.Sprintf("%d: %s, %.0f CPU s", r.seed, r.cbc.status, r.cbc.cpu))
	}
	fmt.Fprintf(w, "\nCBC `sec %d` runs: %s.\n", sec, strings.Join(status, "; "))
	fmt.Fprintf(w, "qoe: default settings, %d runs per seed (median times); identical assignments across runs: %v.\n", runs, allSame)
}
