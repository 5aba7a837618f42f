package main

import (
	"errors"
	"image/color"
	"math"
	"strconv"

	"github.com/anysched/anysched/bench/internal/host"
	"github.com/anysched/anysched/internal/testbed/lab"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var palette = []color.RGBA{
	{R: 31, G: 119, B: 180, A: 255}, {R: 255, G: 127, B: 14, A: 255}, {R: 44, G: 160, B: 44, A: 255},
	{R: 214, G: 39, B: 40, A: 255}, {R: 148, G: 103, B: 189, A: 255}, {R: 140, G: 86, B: 75, A: 255},
	{R: 227, G: 119, B: 194, A: 255}, {R: 127, G: 127, B: 127, A: 255}, {R: 188, G: 189, B: 34, A: 255},
}

// series is one line of a panel.
type series struct {
	name   string
	pts    plotter.XYs
	dashed bool
}

// plotSeries are the plot's lines, from the samples (the first sample,
// which only starts the counters, has no CPU figures and is left out of
// the CPU panel).
func plotSeries(r *Results) (db, rev, cpu, rss []series) {
	dbTotal, dbUse := series{name: "db total size"}, series{name: "db in use", dashed: true}
	revision := series{name: "revision"}
	cityMean := "city schedulers, mean of " + itoa(len(allCities))
	shown := []string{lab.CenterID, lab.PrimaryID(largestCity(r)), "etcd1", "etcd2", "etcd3", groupLoad}
	cpuBy := map[string]*series{}
	rssBy := map[string]*series{}
	for _, n := range append(shown, cityMean) {
		cpuBy[n] = &series{name: n}
		rssBy[n] = &series{name: n}
	}
	for i, s := range r.Samples {
		lead, _, _, size, inUse, up := cluster(s)
		if up > 0 {
			dbTotal.pts = append(dbTotal.pts, plotter.XY{X: s.T, Y: size / (1 << 20)})
			dbUse.pts = append(dbUse.pts, plotter.XY{X: s.T, Y: inUse / (1 << 20)})
			revision.pts = append(revision.pts, plotter.XY{X: s.T, Y: lead.Revision})
		}
		var cityCPU, cityRSS float64
		var cities int
		for _, p := range s.Procs {
			if c, ok := cpuBy[p.Name]; ok {
				if i > 0 {
					c.pts = append(c.pts, plotter.XY{X: s.T, Y: p.CPU})
				}
				rssBy[p.Name].pts = append(rssBy[p.Name].pts, plotter.XY{X: s.T, Y: p.RSS})
			}
			if isPrimary(p.Name) {
				cityCPU += p.CPU
				cityRSS += p.RSS
				cities++
			}
		}
		if cities > 0 {
			if i > 0 {
				cpuBy[cityMean].pts = append(cpuBy[cityMean].pts, plotter.XY{X: s.T, Y: cityCPU / float64(cities)})
			}
			rssBy[cityMean].pts = append(rssBy[cityMean].pts, plotter.XY{X: s.T, Y: cityRSS / float64(cities)})
		}
	}
	for _, n := range append(shown, cityMean) {
		if len(cpuBy[n].pts) > 0 {
			cpu = append(cpu, *cpuBy[n])
		}
		if len(rssBy[n].pts) > 0 && n != groupLoad {
			rss = append(rss, *rssBy[n])
		}
	}
	return []series{dbTotal, dbUse}, []series{revision}, cpu, rss
}

// isPrimary says whether a daemon is a city's primary scheduler.
func isPrimary(name string) bool {
	for _, c := range allCities {
		if name == lab.PrimaryID(c) {
			return true
		}
	}
	return false
}

// largestCity is the city with the most sessions.
func largestCity(r *Results) string {
	best := allCities[0]
	n := -1
	for _, c := range r.Settings.Cities {
		if c.Sessions > n {
			best, n = c.City, c.Sessions
		}
	}
	return best
}

func itoa(n int) string { return thousands(n) }

// wholeTicks are plot.DefaultTicks labelled without decimals.
type wholeTicks struct{}

func (wholeTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
			if math.Abs(ts[i].Value) >= 1 {
				ts[i].Label = strconv.FormatFloat(math.Round(ts[i].Value), 'f', 0, 64)
			}
		}
	}
	return ts
}

// plotResults draws four panels over the run's time: etcd's database size
// and its revision, and the daemons' CPU and RSS; the storms are shaded.
func plotResults(r *Results, path string) error {
	if len(r.Samples) < 2 {
		return errors.New("fewer than two samples")
	}
	db, rev, cpu, rss := plotSeries(r)
	panel := func(title, ylabel string, ss []series) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "seconds into the load"
		p.X.Tick.Marker = wholeTicks{}
		p.Y.Tick.Marker = wholeTicks{}
		p.Y.Label.Text = ylabel
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.Left = true
		maxY := 0.0
		for _, s := range ss {
			for _, pt := range s.pts {
				maxY = max(maxY, pt.Y)
			}
		}
		if maxY == 0 {
			maxY = 1
		}
		// The storms: a light band each.
		for _, at := range r.Storms {
			band := plotter.XYs{{X: at, Y: 0}, {X: at, Y: maxY * 1.6}, {X: at + r.Settings.StormWindow.Seconds(), Y: maxY * 1.6}, {X: at + r.Settings.StormWindow.Seconds(), Y: 0}}
			poly, err := plotter.NewPolygon(band)
			if err != nil {
				return nil, err
			}
			poly.Color = color.RGBA{R: 230, G: 230, B: 230, A: 255}
			poly.LineStyle.Width = 0
			p.Add(poly)
		}
		for i, s := range ss {
			l, err := plotter.NewLine(s.pts)
			if err != nil {
				return nil, err
			}
			l.Color = palette[i%len(palette)]
			l.Width = vg.Points(1.3)
			if s.dashed {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(l)
			p.Legend.Add(s.name, l)
		}
		p.Y.Max = maxY * 1.6 // room for the legend
		return p, nil
	}
	pDB, err := panel("etcd database (largest member; storms shaded)", "MiB", db)
	if err != nil {
		return err
	}
	pRev, err := panel("etcd revision (the leader's)", "revision", rev)
	if err != nil {
		return err
	}
	if len(rev) > 0 && len(rev[0].pts) > 0 {
		lo := rev[0].pts[0].Y
		hi := rev[0].pts[len(rev[0].pts)-1].Y
		pRev.Y.Min, pRev.Y.Max = lo, hi+(hi-lo)*0.6+1
	}
	pCPU, err := panel("CPU per daemon (per sampling interval)", "% of one core", cpu)
	if err != nil {
		return err
	}
	pRSS, err := panel("RSS per daemon", "MiB", rss)
	if err != nil {
		return err
	}
	return host.SavePNG([][]*plot.Plot{{pDB, pRev}, {pCPU, pRSS}}, vg.Points(960), vg.Points(720), path)
}
