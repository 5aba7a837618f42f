package main

import (
	"fmt"
	"image/color"
	"math"
	"strings"
	"time"

	"github.com/anysched/anysched/bench/internal/host"
	"github.com/anysched/anysched/internal/testbed/lab"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

const (
	docBegin = "<!-- rollout:begin -->"
	docEnd   = "<!-- rollout:end -->"
	// The deployment report's figures: the center's CPU in mode 1 (no city schedulers) and mode 5 (16).
	reportCPU0, reportCPU16 = 30.0, 4.0
)

// share is the center's share of the answered requests, in %.
func (m Mode) share() float64 {
	if n := m.Center + m.Local + m.Other; n > 0 {
		return 100 * float64(m.Center) / float64(n)
	}
	return 0
}

// table renders modes as a markdown table.
func table(r *Results) string {
	var b strings.Builder
	b.WriteString("| city schedulers (report mode) | STB requests | failed | center share | center CPU under load | center CPU idle | city schedulers' CPU (sum) | load generator CPU | machine busy | RTT p50 | RTT p99 | p50 local / center | other labs' namespaces |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range r.Modes {
		local, center := m.p50s()
		fmt.Fprintf(&b, "| %d (%s) | %d | %d | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.0f%% | %.0f%% | %s | %s | %s / %s | %d |\n",
			m.K, reportMode(m.K), m.Requests, m.Failures, m.share(), m.CenterCPU, m.CenterIdle, m.CitiesCPU, m.GenCPU, m.MachineBusy,
			ms(m.P50), ms(m.P99), local, center, m.ForeignNS)
	}
	return b.String()
}

func ms(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.2f ms", v)
	}
	return fmt.Sprintf("%.1f ms", v)
}

// fit is the least-squares line y = a + b*x and its R².
func fit(xs, ys []float64) (a, b, r2 float64) {
	n := float64(len(xs))
	if n < 2 {
		return 0, 0, 0
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return sy / n, 0, 0
	}
	b = (n*sxy - sx*sy) / den
	a = (sy - b*sx) / n
	var ssRes, ssTot float64
	for i := range xs {
		e := ys[i] - (a + b*xs[i])
		ssRes += e * e
		d := ys[i] - sy/n
		ssTot += d * d
	}
	if ssTot > 0 {
		r2 = 1 - ssRes/ssTot
	}
	return a, b, r2
}

func mode(r *Results, k int) (Mode, bool) {
	for _, m := range r.Modes {
		if m.K == k {
			return m, true
		}
	}
	return Mode{}, false
}

// section is the markdown written between the markers in docs/benchmarks.md.
func section(r *Results, png string) string {
	s := r.Settings
	var b strings.Builder
	b.WriteString(docBegin + "\n")
	b.WriteString("## The center's load as city schedulers are rolled out (`go run ./bench/rollout`)\n\n")
	fmt.Fprintf(&b, "The operator's Anycast IPTV scheduling deployment report deployed 0, 4, 8, 12 and 16 city schedulers (its modes 1 to 5) and reports the center's CPU\n"+
		"falling from 30%% to 4%% and STB response latency falling. `bench/rollout` repeats that in the province lab\n"+
		"(`internal/testbed/lab`: network namespaces, BIRD city and core routers, the real `central-scheduler` with its\n"+
		"embedded etcd and `regional-scheduler` daemons announcing over BGP): one 16-city lab, and per mode the\n"+
		"schedulers of all but the first k cities stopped (SIGTERM: withdraw, drain, exit), the routers left to\n"+
		"converge (checked: each city answered by its own scheduler, the rest by the center), then the same STB load.\n\n")
	b.WriteString("Settings:\n\n")
	fmt.Fprintf(&b, "- Machine: %s; measured %s.\n", r.Machine, r.When.Format("2006-01-02"))
	conn := "a new TCP connection per request (a zapping STB does not keep one open)"
	if s.KeepAlive {
		conn = "one kept-alive connection per STB"
	}
	rate := float64(s.Cities*s.STBs) / s.Pause.Seconds()
	fmt.Fprintf(&b, "- Load: %d STBs in each of the %d cities' client namespaces, each STB one request every %s, open loop\n"+
		"  (the same offered load in every mode, whoever answers): %.0f requests/s in all, for %s per mode; %s;\n"+
		"  a channel drawn from a Zipf(1.1) popularity over 200 channels; a request counts as failed unless it gets a 302.\n",
		s.STBs, s.Cities, s.Pause, rate, s.Duration, conn)
	fmt.Fprintf(&b, "  This rate was chosen so that the load generator (16 processes, one per client namespace, GOMAXPROCS=1)\n"+
		"  does not saturate the 2-core machine: \"machine busy\" is the whole machine's CPU (all cores, kernel\n"+
		"  networking included) during the window, which also counts other engineers' labs running at the same\n"+
		"  time (last column: their namespaces on the machine).\n")
	delay := fmt.Sprintf("%s of netem delay per round trip over each city-core link (the center is behind it; a city's own scheduler is not)", s.Delay)
	switch {
	case s.DistanceDelays && s.DelayBy != "":
		lo, hi := linkRange(s.Links)
		how := "netem"
		if s.DelayBy == "tun" {
			how = "the lab's delayed TUN links (this kernel has no netem)"
		}
		delay = fmt.Sprintf("each city's link to the core (and so to the center in Hefei) delayed by its distance to Hefei,\n"+
			"  0.2 ms + km x 1.5 / 200 km/ms one way: %s to %s, applied by %s; a city's own scheduler is not behind it", lo, hi, how)
	case s.NoNetem:
		delay = "no link delay (this kernel has no netem)"
	}
	fmt.Fprintf(&b, "- Network: %s.\n", delay)
	fmt.Fprintf(&b, "- CPU: utime+stime of the process from `/proc/<pid>/stat` over the %s load window, as %% of one core;\n"+
		"  \"idle\" is the same process over %s without STB load just before, in the same mode.\n", s.Duration, s.Idle)
	b.WriteString("- Latency: the STB's round trip (connect, request, 302 answer) over all cities' requests.\n\n")
	b.WriteString(table(r))
	b.WriteString("\n")
	b.WriteString(host.ImageLink("center share, center CPU and STB latency against the number of city schedulers", png))

	// The comparison.
	m0, ok0 := mode(r, 0)
	m16, ok16 := mode(r, 16)
	var xs, ys, ks, idles []float64
	for _, m := range r.Modes {
		xs = append(xs, m.share()/100)
		ys = append(ys, m.CenterCPU-m.CenterIdle)
		ks = append(ks, float64(m.K))
		idles = append(idles, m.CenterIdle)
	}
	sa, sb, sr2 := fit(xs, ys)
	ia, ib, _ := fit(ks, idles)
	b.WriteString("### Against the deployment report's figures\n\n")
	if ok0 && ok16 && m0.CenterCPU > 0 {
		stb0 := m0.CenterCPU - m0.CenterIdle
		perReq := stb0 / 100 / rate * 1e6
		fmt.Fprintf(&b, "- **The center's share follows the cities exactly**: %.0f%%, then %s of the requests, i.e. (16-k)/16:\n"+
			"  every city offers the same load, and the routers' longest-prefix match sends a city's STBs to its own\n"+
			"  scheduler as soon as it announces its /32.\n", m0.share(), shares(r))
		fmt.Fprintf(&b, "- **The STB-driven part of the center's CPU falls with it, roughly linearly, as in the report.** The\n"+
			"  center's CPU above its idle level in the same mode goes %s (%% of a core); a least-squares line in\n"+
			"  the center's share gives %.1f + %.1f x share (share 0 to 1, R² = %.2f).\n", aboveIdle(r), sa, sb, sr2)
		fmt.Fprintf(&b, "- **The total falls much less than in the report: from %.1f%% to %.1f%% of a core, to %.0f%% of its mode-1\n"+
			"  value, against 30%% -> 4%% = %.0f%% in the report.** Two reasons: (a) measured: the center's idle CPU\n"+
			"  grows with the number of city schedulers, from %.1f%% to %.1f%% (about %.2f points per scheduler); the likely cause is that each is a\n"+
			"  client of the center's embedded etcd (watch, lease keep-alives, registration, and with the lab's\n"+
			"  settings a snapshot revision check every 500 ms); a production center with a separate etcd cluster\n"+
			"  would not carry that on the scheduling host. (b) At %.0f requests/s the STB part is only about %.0f points,\n"+
			"  so the fixed part weighs more; in the report at least 26 of the 30 points went away with the STBs.\n",
			m0.CenterCPU, m16.CenterCPU, 100*m16.CenterCPU/m0.CenterCPU, 100*reportCPU16/reportCPU0,
			m0.CenterIdle, m16.CenterIdle, ib, rate, stb0)
		_ = ia
		fmt.Fprintf(&b, "- **The absolute numbers are not comparable, and should not be.** The report's center served Anhui\n"+
			"  Mobile's internet-TV STBs at an unknown rate, on its own x86 servers, with a commercial scheduler whose\n"+
			"  per-request cost is unknown, and its \"CPU utilization\" is most likely the whole server's, not one\n"+
			"  process's share of one core. Here every scheduler answers from an in-memory snapshot: the decision\n"+
			"  itself takes microseconds, and an STB request costs the center about %.0f µs of CPU in all (mode 1:\n"+
			"  %.1f points above idle / %.0f requests/s), most of it accepting a TCP connection and HTTP handling.\n",
			perReq, stb0, rate)
		fmt.Fprintf(&b, "- **The load moves to the cities.** With all 16 cities served locally the city schedulers together\n"+
			"  used %.1f%% of a core, far more than the %.1f points the center saved: each is a whole daemon (etcd\n"+
			"  client, GoBGP, metrics) with its own fixed cost, and 16 lightly loaded processes on 2 shared cores\n"+
			"  are less efficient per request than one busier one (this run did not measure the cities' idle CPU\n"+
			"  separately). In the report's deployment that cost sits on 16 city hosts, not on the center.\n",
			m16.CitiesCPU, m0.CenterCPU-m16.CenterCPU)
		if s.NoNetem && s.DelayBy == "" {
			fmt.Fprintf(&b, "- **Latency: not reproduced here, for a stated reason.** The report's latency gain is network distance:\n"+
				"  an STB answered in its own city no longer crosses the provincial network to the center in Hefei. This\n"+
				"  machine's kernel has no netem, so the lab's city-core links have no delay and a city scheduler is no\n"+
				"  nearer than the center. The round trips even rose (p50 %s with 0 city schedulers, %s with 16): they measure\n"+
				"  only processing and queueing on a 2-core machine shared by 16 load generators, 17 schedulers, 17 BIRDs\n"+
				"  and other engineers' labs. With netem (`-delay`, default 10 ms per city-core round trip), each\n"+
				"  request answered by the center pays two such round trips (TCP handshake and request) more than one\n"+
				"  answered locally, and the median would fall once more than half of the cities are served locally\n"+
				"  (not measured on this machine).\n",
				ms(m0.P50), ms(m16.P50))
		} else {
			link := fmt.Sprintf("%s per round trip", s.Delay)
			if s.DistanceDelays {
				lo, hi := linkRange(s.Links)
				link = fmt.Sprintf("%s to %s one way, from the city's distance to Hefei", lo, hi)
			}
			fmt.Fprintf(&b, "- **Latency falls, as in the report**, which gives no figures. A city's own scheduler answers in %s\n"+
				"  (p50), the center in %s: the difference is the city-core link's delay this lab was given (%s,\n"+
				"  paid twice, for the TCP handshake and the request), an assumption about the network, not a\n"+
				"  measurement of Anhui's. RTT p50 over all STBs: %s with 0 city schedulers, %s with 16.\n",
				ms(mLocalP50(r)), ms(m0.CenterP50), link, ms(m0.P50), ms(m16.P50))
		}
	}
	fail := 0
	for _, m := range r.Modes {
		fail += m.Failures
	}
	fmt.Fprintf(&b, "- Failed STB requests over all modes: %d (modes are switched between load windows, not during one;\n"+
		"  failover under load is `schedctl drill failover`'s subject).\n", fail)
	b.WriteString(docEnd + "\n")
	return b.String()
}

// shares lists the center's share in the modes after the first.
func shares(r *Results) string {
	var parts []string
	for _, m := range r.Modes[1:] {
		parts = append(parts, fmt.Sprintf("%.0f%%", m.share()))
	}
	return strings.Join(parts, ", ")
}

// aboveIdle lists the center's CPU above its idle level, mode by mode.
func aboveIdle(r *Results) string {
	var parts []string
	for _, m := range r.Modes {
		parts = append(parts, fmt.Sprintf("%.1f", m.CenterCPU-m.CenterIdle))
	}
	return strings.Join(parts, " -> ")
}

// mLocalP50 is the local p50 of the mode with all city schedulers (or the largest k measured).
func mLocalP50(r *Results) float64 {
	best, v := -1, 0.0
	for _, m := range r.Modes {
		if m.Local > 0 && m.K > best {
			best, v = m.K, m.LocalP50
		}
	}
	return v
}

// writeDocAt replaces the section between begin and end; without them it
// goes on the line after the marker after, or at the end of the file.
func writeDocAt(path, sec, begin, end, after string) error {
	return host.WriteSection(path, sec, begin, end, after)
}

// plotResults draws three panels against the number of city schedulers:
// the center's share, its CPU (absolute, and relative to mode 1 with the
// report's two figures), and the STB latency.
func plotResults(r *Results, path string) error {
	if len(r.Modes) == 0 {
		return fmt.Errorf("no modes")
	}
	blue := color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange := color.RGBA{R: 255, G: 127, B: 14, A: 255}
	green := color.RGBA{R: 44, G: 160, B: 44, A: 255}
	grey := color.RGBA{R: 120, G: 120, B: 120, A: 255}
	xy := func(f func(Mode) float64) plotter.XYs {
		pts := make(plotter.XYs, len(r.Modes))
		for i, m := range r.Modes {
			pts[i] = plotter.XY{X: float64(m.K), Y: f(m)}
		}
		return pts
	}
	newPlot := func(title, ylabel string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "city schedulers (report modes 1-5)"
		if r.Settings.Steps == "one" {
			p.X.Label.Text = "city schedulers, rolled out one by one"
		}
		p.Y.Label.Text = ylabel
		p.X.Min, p.X.Max = -0.5, 16.5
		p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 4, Label: "4"}, {Value: 8, Label: "8"}, {Value: 12, Label: "12"}, {Value: 16, Label: "16"}})
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		return p
	}
	add := func(p *plot.Plot, name string, pts plotter.XYs, c color.Color, dashed bool) error {
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		l.Color, s.Color = c, c
		l.Width = vg.Points(1.5)
		if dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l, s)
		p.Legend.Add(name, l, s)
		return nil
	}

	share := newPlot("Center's share of STB requests", "% of requests")
	share.Y.Min, share.Y.Max = 0, 105
	if err := add(share, "measured", xy(func(m Mode) float64 { return m.share() }), blue, false); err != nil {
		return err
	}
	if err := add(share, "(16-k)/16", xy(func(m Mode) float64 { return 100 * float64(16-m.K) / 16 }), grey, true); err != nil {
		return err
	}

	cpu := newPlot("Center CPU (% of one core)", "% of one core")
	cpu.Y.Min = 0
	if err := add(cpu, "under STB load", xy(func(m Mode) float64 { return m.CenterCPU }), orange, false); err != nil {
		return err
	}
	if err := add(cpu, "idle (same mode)", xy(func(m Mode) float64 { return m.CenterIdle }), grey, true); err != nil {
		return err
	}

	rel := newPlot("Center CPU relative to 0 schedulers", "% of mode 1")
	rel.Y.Min, rel.Y.Max = 0, 110
	if m0, ok := mode(r, 0); ok && m0.CenterCPU > 0 {
		if err := add(rel, "lab", xy(func(m Mode) float64 { return 100 * m.CenterCPU / m0.CenterCPU }), orange, false); err != nil {
			return err
		}
	}
	if err := add(rel, "deployment report: 30% -> 4% (endpoints)", plotter.XYs{{X: 0, Y: 100}, {X: 16, Y: 100 * reportCPU16 / reportCPU0}}, grey, true); err != nil {
		return err
	}

	lat := newPlot("STB round trip, all cities", "ms")
	lat.Y.Min = 0
	if err := add(lat, "p50", xy(func(m Mode) float64 { return m.P50 }), green, false); err != nil {
		return err
	}
	if err := add(lat, "p99", xy(func(m Mode) float64 { return m.P99 }), green, true); err != nil {
		return err
	}
	maxLat := 0.0
	for _, m := range r.Modes {
		maxLat = math.Max(maxLat, m.P99)
	}
	lat.Y.Max = maxLat * 1.35 // room for the legend

	for _, p := range []*plot.Plot{cpu} {
		maxY := 0.0
		for _, m := range r.Modes {
			maxY = math.Max(maxY, math.Max(m.CenterCPU, m.CenterIdle))
		}
		p.Y.Max = maxY * 1.35
	}

	return host.SavePNG([][]*plot.Plot{{share, cpu}, {rel, lat}}, vg.Points(900), vg.Points(700), path)
}

// linkRange is the smallest and largest one-way link delay.
func linkRange(links []lab.CityDelay) (lo, hi string) {
	if len(links) == 0 {
		return "-", "-"
	}
	mn, mx := links[0].Delay, links[0].Delay
	for _, l := range links {
		mn, mx = min(mn, l.Delay), max(mx, l.Delay)
	}
	f := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	return f(mn), f(mx)
}

// p50s are the median round trips of the STBs answered locally and by the
// center, "-" for none.
func (m Mode) p50s() (local, center string) {
	local, center = "-", "-"
	if m.Local > 0 {
		local = ms(m.LocalP50)
	}
	if m.Center > 0 {
		center = ms(m.CenterP50)
	}
	return local, center
}
