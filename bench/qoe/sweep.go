package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// avgRows runs the experiment for seeds 1..seeds and averages each
// algorithm's row (objectives, time, shares; counts are summed then
// divided). gap is qoe's mean period-1 relative gap.
type avgRow struct {
	name      string
	objAll    float64 // sum of the per-period objectives
	obj1      float64 // period 1
	gap       float64 // period 1, qoe only
	atDesired float64
	timeMS    float64
	cpuMS     float64
}

func averaged(cfg config, seeds int, srvPts, usrPts [][2]float64) []avgRow {
	var out []avgRow
	for s := 1; s <= seeds; s++ {
		c := cfg
		c.seed = uint64(s)
		c.lpOut = ""
		_, rows, _ := experiment(c, srvPts, usrPts)
		if out == nil {
			out = make([]avgRow, len(rows))
		}
		for i, r := range rows {
			out[i].name = r.Name
			out[i].objAll += r.ObjectiveAll / float64(seeds)
			out[i].obj1 += r.Objective / float64(seeds)
			if r.Bound != nil {
				out[i].gap += (*r.Bound - r.Objective) / math.Abs(*r.Bound) / float64(seeds)
			}
			out[i].atDesired += r.AtDesired / float64(seeds)
			out[i].timeMS += r.TimeMS / float64(seeds)
			out[i].cpuMS += r.CPUMS / float64(seeds)
		}
	}
	return out
}

// bestBaseline returns the index of the baseline (not "qoe") with the
// highest mean objective over all periods.
func bestBaseline(rows []avgRow) int {
	bi := -1
	for i, r := range rows {
		if r.name != "qoe" && (bi < 0 || r.objAll > rows[bi].objAll) {
			bi = i
		}
	}
	return bi
}

func improvement(q, b float64) float64 { return 100 * (q - b) / math.Abs(b) }

// sensitivity halves and doubles each main parameter (and the bandwidth
// scale) around cfg and prints a markdown table of qoe's objective over all
// periods, its period-1 gap and its improvement over the best baseline.
func sensitivity(w io.Writer, cfg config, seeds int, srvPts, usrPts [][2]float64) {
	type variant struct {
		name  string
		value string
		cfg   config
	}
	vs := []variant{{"(defaults)", "", cfg}}
	params := []struct {
		name string
		ptr  func(c *config) *float64
	}{
		{"a", func(c *config) *float64 { return &c.params.A }},
		{"b", func(c *config) *float64 { return &c.params.B }},
		{"c", func(c *config) *float64 { return &c.params.C }},
		{"d", func(c *config) *float64 { return &c.params.D }},
		{"theta", func(c *config) *float64 { return &c.params.Theta }},
		{"lambda", func(c *config) *float64 { return &c.params.Lambda }},
		{"omega", func(c *config) *float64 { return &c.params.Omega }},
		{"bw-scale", func(c *config) *float64 { return &c.bwScale }},
	}
	for _, pp := range params {
		for _, f := range []float64{0.5, 2} {
			c := cfg
			x := pp.ptr(&c)
			*x *= f
			vs = append(vs, variant{pp.name, fmt.Sprintf("%g (x%g)", *x, f), c})
		}
	}
	fmt.Fprintf(w, "| parameter | value | qoe objective | vs defaults | qoe gap (period 1) | best baseline | qoe vs best baseline | qoe at desired |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|\n")
	var base float64
	for i, v := range vs {
		rows := averaged(v.cfg, seeds, srvPts, usrPts)
		q := rows[0]
		if i == 0 {
			base = q.objAll
		}
		b := rows[bestBaseline(rows)]
		fmt.Fprintf(w, "| %s | %s | %.1f | %+.1f%% | %.2f%% | %s (%.1f) | %+.1f%% | %.3f |\n",
			v.name, v.value, q.objAll, improvement(q.objAll, base), 100*q.gap, b.name, b.objAll,
			improvement(q.objAll, b.objAll), q.atDesired)
		fmt.Fprintf(os.Stderr, "sensitivity %d/%d done\n", i+1, len(vs))
	}
}

// Sweep points of --plot.
var (
	sweepUsers = []float64{100, 200, 300, 400, 500, 600, 700, 816, 1000, 1500, 2000, 2500, 3000}
	sweepCaps  = []float64{0.2, 0.3, 0.4, 0.6, 0.8, 1.0, 1.2, 1.5, 2.0}
)

// sweeps runs the user-count sweep (capacities fixed at the EUA
// instance's, sized for 816 users) and the bandwidth-capacity sweep (816
// users), writes qoe_users.png and qoe_capacity.png to dir and prints the
// data as markdown.
func sweeps(w io.Writer, dir string, cfg config, seeds int, srvPts, usrPts [][2]float64, users, caps []float64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	type series struct {
		xs   []float64
		rows [][]avgRow
	}
	run := func(xs []float64, set func(c *config, x float64)) series {
		s := series{xs: xs}
		for _, x := range xs {
			c := cfg
			set(&c, x)
			s.rows = append(s.rows, averaged(c, seeds, srvPts, usrPts))
			fmt.Fprintf(os.Stderr, "sweep point %g done\n", x)
		}
		return s
	}
	nEUA := len(usrPts)
	us := run(users, func(c *config, x float64) { c.nUsers, c.capUsers = int(x), nEUA })
	cs := run(caps, func(c *config, x float64) { c.bwScale = x })

	table := func(title, xname string, s series) {
		fmt.Fprintf(w, "%s (mean objective per period, %d periods, mean of seeds 1-%d):\n\n", title, cfg.periods, seeds)
		fmt.Fprintf(w, "| %s |", xname)
		for _, r := range s.rows[0] {
			fmt.Fprintf(w, " %s |", r.name)
		}
		fmt.Fprintf(w, " qoe vs best baseline | qoe gap | qoe ms (wall / CPU) |\n|---|%s---|---|---|\n", strings.Repeat("---|", len(s.rows[0])))
		for i, x := range s.xs {
			fmt.Fprintf(w, "| %g |", x)
			for _, r := range s.rows[i] {
				fmt.Fprintf(w, " %.1f |", r.objAll/float64(cfg.periods))
			}
			b := s.rows[i][bestBaseline(s.rows[i])]
			fmt.Fprintf(w, " %+.1f%% (%s) | %.2f%% | %.0f / %.0f |\n", improvement(s.rows[i][0].objAll, b.objAll), b.name, 100*s.rows[i][0].gap, s.rows[i][0].timeMS, s.rows[i][0].cpuMS)
		}
		fmt.Fprintln(w)
	}
	table("Users (server capacities fixed at the 816-user instance's)", "users", us)
	table("Bandwidth scale (816 users)", "bw-scale", cs)

	plotSeries := func(file, title, xlabel string, s series) error {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = xlabel
		p.Y.Label.Text = "objective: sum of Y*QoE per period"
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.Left = true
		for a := range s.rows[0] {
			pts := make(plotter.XYs, len(s.xs))
			for i, x := range s.xs {
				pts[i] = plotter.XY{X: x, Y: s.rows[i][a].objAll / float64(cfg.periods)}
			}
			l, sc, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			styleLine(l, a)
			sc.Color = algColor(a)
			p.Add(l, sc)
			p.Legend.Add(s.rows[0][a].name, l, sc)
		}
		return p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, file))
	}
	if err := plotSeries("qoe_users.png", fmt.Sprintf("QoE vs users (EUA, 125 sites, capacities for %d users; beyond %d: generated users)", nEUA, nEUA), "users", us); err != nil {
		return err
	}
	return plotSeries("qoe_capacity.png", fmt.Sprintf("QoE vs server bandwidth (EUA, %d users)", nEUA), "bandwidth scale (x mean desired demand per server)", cs)
}
