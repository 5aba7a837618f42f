package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/anysched/anysched/internal/allocation/qoe"
)

// algColors are the plots' colours, one per algorithm in experiment's
// order (qoe first).
var algColors = []color.Color{
	color.RGBA{200, 30, 30, 255}, color.RGBA{30, 90, 200, 255}, color.RGBA{30, 150, 60, 255},
	color.RGBA{150, 60, 170, 255}, color.RGBA{230, 130, 0, 255}, color.RGBA{90, 90, 90, 255},
}

func algColor(a int) color.Color { return algColors[a%len(algColors)] }

// styleLine draws algorithm a's line: its colour, qoe's (a = 0) thick and
// solid, the baselines' dashed.
func styleLine(l *plotter.Line, a int) {
	l.Color = algColor(a)
	l.Width = vg.Points(1.5)
	if a == 0 {
		l.Width = vg.Points(2.5)
	} else {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	}
}

// dist is one algorithm's latency and bitrate distribution over every user
// and period of a run.
type dist struct {
	name       string
	latMS      []float64 // every user, ascending; fallback users at the fallback latency
	edgeMS     []float64 // the users on an edge server, ascending
	meanMS     float64   // of latMS
	edgeMeanMS float64   // of edgeMS
	rungShare  []float64 // share of all users on an edge server at each ladder rung
	fallback   float64   // share of all users at the fallback
}

// distributions turns run's rows into distributions; fallbackMS is the
// model's fallback latency.
func distributions(rows []row, fallbackMS float64) []dist {
	out := make([]dist, len(rows))
	for i, r := range rows {
		d := dist{name: r.Name, edgeMS: append([]float64(nil), r.EdgeLatenciesMS...)}
		sort.Float64s(d.edgeMS)
		d.latMS = append([]float64(nil), d.edgeMS...)
		for range r.Fallback {
			d.latMS = append(d.latMS, fallbackMS)
		}
		sort.Float64s(d.latMS)
		d.meanMS, d.edgeMeanMS = mean(d.latMS), mean(d.edgeMS)
		n := float64(len(d.latMS))
		for _, c := range r.RungUsers {
			d.rungShare = append(d.rungShare, float64(c)/n)
		}
		d.fallback = float64(r.Fallback) / n
		out[i] = d
	}
	return out
}

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// quantile is the nearest-rank q-quantile of ascending x (NaN if empty).
func quantile(x []float64, q float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(x)))) - 1
	return x[min(max(i, 0), len(x)-1)]
}

// ecdf is the empirical CDF of ascending x: the share of values <= x[i] at
// each distinct x[i].
func ecdf(x []float64) plotter.XYs {
	var pts plotter.XYs
	for i, v := range x {
		if i+1 < len(x) && x[i+1] == v {
			continue
		}
		pts = append(pts, plotter.XY{X: v, Y: float64(i+1) / float64(len(x))})
	}
	return pts
}

// distPlots runs the experiment once (cfg's seed, users and periods), writes
// the per-user latency CDF (qoe_latency.png) and the bitrate shares
// (qoe_bitrate.png) of every algorithm to dir and prints both as markdown.
func distPlots(w io.Writer, dir string, cfg config, srvPts, usrPts [][2]float64) error {
	cfg.lpOut = ""
	_, rows, first := experiment(cfg, srvPts, usrPts)
	fbMS := 1000 * first.Latency(0, qoe.Fallback, first.Params.FallbackRung)
	ds := distributions(rows, fbMS)
	ladder := first.Ladder
	what := fmt.Sprintf("seed %d, %d users, %d periods: %d user-periods per algorithm", cfg.seed, len(first.Users), cfg.periods, len(ds[0].latMS))

	fmt.Fprintf(w, "Latency per user and period (ms, as the model computes it for the assigned server and rung; fallback users at %.0f ms; %s):\n\n", fbMS, what)
	fmt.Fprintf(w, "| algorithm | p50 | p90 | p99 | mean | edge-served mean | edge-served max |\n|---|---|---|---|---|---|---|\n")
	for _, d := range ds {
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", d.name,
			quantile(d.latMS, 0.5), quantile(d.latMS, 0.9), quantile(d.latMS, 0.99), d.meanMS, d.edgeMeanMS, quantile(d.edgeMS, 1))
	}
	fmt.Fprintf(w, "\nBitrate: share of user-periods at each rung (served by an edge server) and at the fallback (%.0f kbps; %s):\n\n", ladder[first.Params.FallbackRung], what)
	fmt.Fprintf(w, "| algorithm |")
	for _, k := range ladder {
		fmt.Fprintf(w, " %.0f kbps |", k)
	}
	fmt.Fprintf(w, " fallback |\n|---|")
	for range ladder {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintf(w, "---|\n")
	for _, d := range ds {
		fmt.Fprintf(w, "| %s |", d.name)
		for _, s := range d.rungShare {
			fmt.Fprintf(w, " %.1f%% |", 100*s)
		}
		fmt.Fprintf(w, " %.1f%% |\n", 100*d.fallback)
	}
	fmt.Fprintln(w)

	// Latency CDF. When the fallback is slower than every edge server, the
	// x axis ends past the slowest edge latency and the fallback users show
	// as each line's distance below 1 at the right.
	xmin, xmax := fbMS, math.Inf(-1)
	for _, d := range ds {
		if len(d.edgeMS) > 0 {
			xmin, xmax = math.Min(xmin, d.edgeMS[0]), math.Max(xmax, d.edgeMS[len(d.edgeMS)-1])
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Per-user latency (EUA, %s)", what)
	switch {
	case math.IsInf(xmax, -1): // nobody on an edge server
		xmax = fbMS
	case fbMS > xmax:
		p.Title.Text += fmt.Sprintf("\nfallback users (%.0f ms) are off the right edge: the gap below 1", fbMS)
	}
	p.X.Label.Text = "latency (ms)"
	p.Y.Label.Text = "share of user-periods with latency <= x"
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = false
	for a, d := range ds {
		pts := ecdf(d.latMS)
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.StepStyle = plotter.PostStep
		styleLine(l, a)
		p.Add(l)
		p.Legend.Add(d.name, l)
	}
	p.X.Min, p.X.Max = 10*math.Floor(0.95*xmin/10), 10*math.Ceil(1.05*xmax/10)
	p.Y.Min, p.Y.Max = 0, 1
	if err := p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, "qoe_latency.png")); err != nil {
		return err
	}

	// Bitrate shares: one stacked bar per algorithm.
	p = plot.New()
	p.Title.Text = fmt.Sprintf("Assigned bitrate (EUA, %s)", what)
	p.Y.Label.Text = "share of user-periods"
	p.Y.Min, p.Y.Max = 0, 1.2 // room for the legend above the bars
	p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 0.25}, {Value: 0.5, Label: "0.5"}, {Value: 0.75}, {Value: 1, Label: "1"}})
	p.Legend.Top = true
	var names []string
	for _, d := range ds {
		names = append(names, d.name)
	}
	p.NominalX(names...)
	type layer struct {
		label string
		share func(d dist) float64
		color color.Color
	}
	layers := []layer{{"fallback", func(d dist) float64 { return d.fallback }, color.RGBA{40, 40, 40, 255}}}
	shades := []color.Color{color.RGBA{250, 200, 120, 255}, color.RGBA{120, 180, 230, 255}, color.RGBA{40, 110, 60, 255}}
	for k, kbps := range ladder {
		layers = append(layers, layer{fmt.Sprintf("%.0f kbps", kbps), func(d dist) float64 { return d.rungShare[k] }, shades[k%len(shades)]})
	}
	var below *plotter.BarChart
	var bars []*plotter.BarChart
	for _, ly := range layers {
		vs := make(plotter.Values, len(ds))
		for i, d := range ds {
			vs[i] = ly.share(d)
		}
		b, err := plotter.NewBarChart(vs, vg.Points(40))
		if err != nil {
			return err
		}
		b.Color = ly.color
		b.LineStyle.Width = 0
		if below != nil {
			b.StackOn(below)
		}
		below = b
		bars = append(bars, b)
		p.Add(b)
	}
	for i := len(bars) - 1; i >= 0; i-- { // legend top-down, as stacked
		p.Legend.Add(layers[i].label, bars[i])
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, "qoe_bitrate.png"))
}
