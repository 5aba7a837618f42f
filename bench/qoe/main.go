// Command qoe runs the QoE-aware allocation experiment of the QoE-aware allocation paper (Liu et
// al. 2023) on the EUA data: it prints the coverage histogram, then runs the
// main solver ("qoe") and the baselines over several periods with churn and
// movement and reports, per algorithm, objective, bound/gap, time, latency,
// bitrate, share at the desired bitrate, switches, jitter, fallback users
// and origin pulls (a user's channel is its room). A second table runs the
// same periods with the shared origin cost (--origin-cost per pull) on: qoe
// with it, qoe's plan without it (cost-blind) and the baselines, all
// scored net of their pulls.
package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/anysched/anysched/data"
	"github.com/anysched/anysched/internal/allocation/qoe"
)

// Synthetic-profile distributions (see profile).
var (
	desiredKbps  = []float64{1200, 2500, 5000}
	desiredShare = []float64{0.20, 0.35, 0.45}
)

const (
	rooms      = 17   // the QoE allocation paper crawled 17 popular rooms
	giftShare  = 0.2  // share of users who ever gave a gift
	giftMedian = 30.0 // CNY, median spend of gift givers (lognormal)
	giftSigma  = 1.2
	churnRate  = 0.10 // users replaced per period
	moveRate   = 0.20 // users moving per period
	moveMaxM   = 150.0
)

type person struct {
	id       int
	lat, lon float64
	prof     qoe.Profile
	room     int
}

// config is one experiment's setting.
type config struct {
	radius   float64
	seed     uint64
	periods  int
	bwScale  float64
	cpuScale float64
	nUsers   int // 0 = as many as the users file
	capUsers int // capacities sized for this many users (0 = nUsers)
	params   qoe.Params
	lpOut    string
}

func main() {
	sites := flag.String("sites", "", "base-station CSV (LATITUDE, LONGITUDE); empty: the EUA Melbourne CBD sites in data/eua")
	usersF := flag.String("users", "", "user CSV (Latitude, Longitude); empty: the EUA Melbourne CBD users in data/eua")
	radius := flag.Float64("radius-m", 300, "coverage radius (m)")
	seed := flag.Uint64("seed", 1, "random seed")
	periods := flag.Int("periods", 5, "periods (churn and movement between them)")
	format := flag.String("format", "table", "table|json")
	lpOut := flag.String("lp-out", "", "write the first period's instance as a CPLEX LP file")
	bwScale := flag.Float64("bw-scale", 0.8, "server bandwidth as a fraction of the mean desired demand per server")
	cpuScale := flag.Float64("cpu-scale", 1.0, "server compute as a fraction of transcoding every user to the lowest rung / servers")
	nUsers := flag.Int("n-users", 0, "number of users (0 = as many as the users file; more replicates its points with jitter)")
	capUsers := flag.Int("cap-users", 0, "size server capacities for this many users (0 = --n-users)")
	def := qoe.DefaultParams()
	pa := flag.Float64("a", def.A, "a: weight of the interaction experience Q")
	pb := flag.Float64("b", def.B, "b: weight of the video quality U")
	pc := flag.Float64("c", def.C, "c: weight of the bitrate jitter E")
	pd := flag.Float64("d", def.D, "d: weight of the server switch S")
	ptheta := flag.Float64("theta", def.Theta, "theta: latency threshold (s)")
	plambda := flag.Float64("lambda", def.Lambda, "lambda: room-mean scale of I_v")
	pomega := flag.Float64("omega", def.Omega, "omega: gift weight of Y_v")
	sens := flag.Bool("sensitivity", false, "print the parameter sensitivity table (markdown) over --seeds")
	plotDir := flag.String("plot", "", "run the user-count and capacity sweeps over --seeds and the latency and bitrate distributions of --seed, write PNGs to this directory and print their data (markdown); with --cbc: the qoe-vs-CBC plot")
	seeds := flag.Int("seeds", 3, "seeds 1..N for --sensitivity, --plot and --cbc")
	cbcDir := flag.String("cbc", "", "compare qoe with CBC on the period-1 LP export of seeds 1..--seeds: LP files, CBC logs and solutions go to (and are reused from) this directory; prints a markdown table")
	cbcSec := flag.Int("cbc-sec", 300, "CBC's limit in CPU seconds per seed (--cbc)")
	runs := flag.Int("runs", 5, "qoe solves per seed for the median time (--cbc)")
	originCost := flag.Float64("origin-cost", 2, "the shared origin cost per (server, channel) pull of the second table (0: no second table); the first table and the other modes run without it")
	flag.Parse()
	runtime.GOMAXPROCS(1)

	srvPts, err := readPoints(*sites, data.EUASites, "LATITUDE", "LONGITUDE")
	check(err)
	usrPts, err := readPoints(*usersF, data.EUAUsers, "Latitude", "Longitude")
	check(err)
	params := def
	params.A, params.B, params.C, params.D = *pa, *pb, *pc, *pd
	params.Theta, params.Lambda, params.Omega = *ptheta, *plambda, *pomega
	cfg := config{radius: *radius, seed: *seed, periods: *periods, bwScale: *bwScale, cpuScale: *cpuScale,
		nUsers: *nUsers, capUsers: *capUsers, params: params, lpOut: *lpOut}
	if *sens {
		sensitivity(os.Stdout, cfg, *seeds, srvPts, usrPts)
		return
	}
	if *cbcDir != "" {
		check(cbcCompare(os.Stdout, cfg, *seeds, *cbcDir, *cbcSec, *runs, *plotDir, srvPts, usrPts))
		return
	}
	if *plotDir != "" {
		check(sweeps(os.Stdout, *plotDir, cfg, *seeds, srvPts, usrPts, sweepUsers, sweepCaps))
		check(distPlots(os.Stdout, *plotDir, cfg, srvPts, usrPts))
		return
	}
	cov, rows, first := experiment(cfg, srvPts, usrPts)
	var costRows []row
	if *originCost > 0 {
		c := cfg
		c.params.OriginCost = *originCost
		c.lpOut = ""
		_, costRows, _ = experiment(c, srvPts, usrPts)
	}
	if *format == "json" {
		out := map[string]any{"coverage": cov, "algorithms": rows}
		if costRows != nil {
			out["origin_cost"] = *originCost
			out["algorithms_with_origin_cost"] = costRows
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		check(enc.Encode(out))
		return
	}
	fmt.Printf("coverage (radius %.0f m, %d users, %d sites): <10: %.1f%%  10-20: %.1f%%  >20: %.1f%%  (paper Fig. 1: 8.8%% / 74.4%% / 16.8%%)\n",
		*radius, len(first.Users), len(first.Servers), 100*cov.Under10, 100*cov.From10To20, 100*cov.Over20)
	fmt.Printf("periods %d, seed %d; objective/bound/gap are period 1's (comparable with --lp-out); the rest aggregate all periods\n\n", *periods, *seed)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "algorithm\tobjective\tbound\tgap%\tall periods\ttime ms\tcpu ms\tlatency ms\tbitrate kbps\tat desired\tswitches\tjitter\tfallback\torigin pulls\torigin Mbps\t")
	for _, r := range rows {
		b, g := bound(r)
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%s\t%.2f\t%.1f\t%.1f\t%.1f\t%.0f\t%.3f\t%d\t%d\t%d\t%.1f\t%.0f\t\n", r.Name, r.Objective, b, g,
			r.ObjectiveAll, r.TimeMS, r.CPUMS, r.MeanLatencyMS, r.MeanBitrate, r.AtDesired, r.Switches, r.Jitter, r.Fallback, r.OriginPulls, r.OriginMbps)
	}
	tw.Flush()
	if costRows == nil {
		return
	}
	fmt.Printf("\nshared origin cost %g per (server, channel) pull, channel = room (%d rooms); objectives net of the pulls; origin pulls and Mbps are means per period\n\n", *originCost, rooms)
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "algorithm\tobjective\tbound\tgap%\tall periods\ttime ms\tlatency ms\tbitrate kbps\tat desired\tfallback\torigin pulls\torigin Mbps\t")
	for _, r := range costRows {
		b, g := bound(r)
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%s\t%.2f\t%.1f\t%.1f\t%.0f\t%.3f\t%d\t%.1f\t%.0f\t\n", r.Name, r.Objective, b, g,
			r.ObjectiveAll, r.TimeMS, r.MeanLatencyMS, r.MeanBitrate, r.AtDesired, r.Fallback, r.OriginPulls, r.OriginMbps)
	}
	tw.Flush()
}

// bound formats a row's bound and gap ("-" without a bound).
func bound(r row) (b, gap string) {
	if r.Bound == nil {
		return "-", "-"
	}
	return fmt.Sprintf("%.2f", *r.Bound), fmt.Sprintf("%.2f", 100*(*r.Bound-r.Objective)/math.Abs(*r.Bound))
}

// synth draws the population of every period and returns it with the
// function that builds a period's instance from its people and their
// previous choices.
func synth(cfg config, srvPts, usrPts [][2]float64) ([][]person, func([]person, map[int]qoe.Choice) *qoe.Instance) {
	rng := rand.New(rand.NewPCG(cfg.seed, 0xa11c))
	n := cfg.nUsers
	if n <= 0 {
		n = len(usrPts)
	}
	capN := cfg.capUsers
	if capN <= 0 {
		capN = n
	}
	roomMean := make([]float64, rooms)
	roomIngest := make([]int, rooms)
	for i := range roomMean {
		roomMean[i] = 0.01 + 0.12*rng.Float64()
		roomIngest[i] = rng.IntN(len(srvPts))
	}
	nextID := 0
	newPerson := func(i int) person {
		p := usrPts[i%len(usrPts)]
		lat, lon := p[0], p[1]
		if i >= len(usrPts) {
			lat, lon = jitter(rng, lat, lon, 100)
		}
		nextID++
		return person{id: nextID, lat: lat, lon: lon, prof: profile(rng), room: zipf(rng, rooms)}
	}
	pop := make([]person, n)
	for i := range pop {
		pop[i] = newPerson(i)
	}
	// population per period (identical for every algorithm)
	var seq [][]person
	for p := 0; p < cfg.periods; p++ {
		seq = append(seq, append([]person(nil), pop...))
		for i := range pop {
			switch x := rng.Float64(); {
			case x < churnRate:
				pop[i] = newPerson(rng.IntN(len(usrPts)))
			case x < churnRate+moveRate:
				pop[i].lat, pop[i].lon = jitter(rng, pop[i].lat, pop[i].lon, moveMaxM)
			}
		}
	}
	// servers: capacities so that roughly a third cannot get the desired bitrate
	meanDesired := 0.0
	for i, s := range desiredShare {
		meanDesired += s * desiredKbps[i]
	}
	ladder := qoe.DefaultLadder()
	params := cfg.params
	R := ladder[len(ladder)-1]
	var servers []qoe.Server
	for _, p := range srvPts {
		servers = append(servers, qoe.Server{Lat: p[0], Lon: p[1], RadiusM: cfg.radius,
			Bandwidth: cfg.bwScale * float64(capN) * meanDesired / float64(len(srvPts)),
			Compute:   cfg.cpuScale * float64(capN) * (R - ladder[0]) * params.H / float64(len(srvPts))})
	}
	build := func(people []person, prev map[int]qoe.Choice) *qoe.Instance {
		in := &qoe.Instance{Params: params, Ladder: ladder, Servers: servers}
		for _, p := range people {
			u := qoe.User{Lat: p.lat, Lon: p.lon, Profile: p.prof, RoomMean: roomMean[p.room],
				Ingest: roomIngest[p.room], PrevServer: -1, Channel: int32(p.room)}
			if c, ok := prev[p.id]; ok {
				u.PrevServer = c.Server // -1 after fallback
				u.PrevKbps = ladder[c.Rung]
			}
			in.Users = append(in.Users, u)
		}
		return in
	}
	return seq, build
}

// experiment synthesises the population of every period, runs the main
// solver and every baseline over them, and returns the coverage histogram,
// one row per algorithm and the first period's instance.
func experiment(cfg config, srvPts, usrPts [][2]float64) (covHist, []row, *qoe.Instance) {
	seq, build := synth(cfg, srvPts, usrPts)
	first := build(seq[0], nil)
	cov := coverage(first)
	if cfg.lpOut != "" {
		f, err := os.Create(cfg.lpOut)
		check(err)
		check(qoe.WriteLP(f, first))
		check(f.Close())
	}
	solvers := []qoe.Solver{qoe.Lagrangian{}}
	if cfg.params.OriginCost > 0 {
		solvers = append(solvers, costBlind{qoe.Lagrangian{}})
	}
	solvers = append(solvers, qoe.Baselines(cfg.seed)...)
	var rows []row
	for _, s := range solvers {
		rows = append(rows, run(s, seq, build))
	}
	return cov, rows, first
}

// costBlind solves without the origin cost (the plan a solver blind to it
// makes); run scores the plan with it.
type costBlind struct{ s qoe.Solver }

func (b costBlind) Name() string { return b.s.Name() + " (cost-blind)" }
func (b costBlind) Solve(ctx context.Context, in *qoe.Instance) (*qoe.Result, error) {
	p := in.Params
	p.OriginCost = 0
	res, err := b.s.Solve(ctx, &qoe.Instance{Params: p, Ladder: in.Ladder, Servers: in.Servers, Users: in.Users})
	if err != nil {
		return nil, err
	}
	res.Bound = math.NaN() // a bound of the problem without the cost
	return res, nil
}

type covHist struct {
	Under10    float64 `json:"under_10"`
	From10To20 float64 `json:"10_to_20"`
	Over20     float64 `json:"over_20"`
}

func coverage(in *qoe.Instance) covHist {
	var h covHist
	for _, c := range in.Candidates() {
		switch {
		case len(c) < 10:
			h.Under10++
		case len(c) <= 20:
			h.From10To20++
		default:
			h.Over20++
		}
	}
	n := float64(len(in.Users))
	h.Under10 /= n
	h.From10To20 /= n
	h.Over20 /= n
	return h
}

type row struct {
	Name          string   `json:"name"`
	Objective     float64  `json:"objective"`
	Bound         *float64 `json:"bound"`
	ObjectiveAll  float64  `json:"objective_all_periods"`
	TimeMS        float64  `json:"time_ms"`
	CPUMS         float64  `json:"cpu_ms"` // process CPU time (one core), robust to other load
	MeanLatencyMS float64  `json:"mean_latency_ms"`
	MeanBitrate   float64  `json:"mean_bitrate_kbps"`
	AtDesired     float64  `json:"at_desired_share"`
	Switches      int      `json:"switches"`
	Jitter        int      `json:"jitter"`
	JitterKbps    float64  `json:"jitter_kbps"`
	Fallback      int      `json:"fallback_users"`
	OriginPulls   float64  `json:"origin_pulls"` // per period: (server, channel) pairs with a viewer
	OriginMbps    float64  `json:"origin_mbps"`  // per period: the pulls' traffic from the origin
	// For the distributions of --plot, over the users on an edge server
	// (Fallback counts the others) in every period: their latencies (ms)
	// and their number at each ladder rung.
	EdgeLatenciesMS []float64 `json:"-"`
	RungUsers       []int     `json:"-"`
}

// run solves every period with one algorithm, carrying its own previous
// assignment forward. time_ms is the mean solve time per period (wall
// clock), cpu_ms the mean CPU time of the process over the solve.
func run(s qoe.Solver, seq [][]person, build func([]person, map[int]qoe.Choice) *qoe.Instance) row {
	r := row{Name: s.Name()}
	prev := map[int]qoe.Choice{}
	var cnt float64
	for p, people := range seq {
		in := build(people, prev)
		if r.RungUsers == nil {
			r.RungUsers = make([]int, len(in.Ladder))
		}
		c0, t0 := cpuTime(), time.Now()
		res, err := s.Solve(context.Background(), in)
		check(err)
		r.TimeMS += float64(time.Since(t0).Microseconds()) / 1000
		r.CPUMS += float64((cpuTime() - c0).Microseconds()) / 1000
		obj, ok, viol := qoe.Evaluate(in, res.Assign)
		if !ok {
			fmt.Fprintf(os.Stderr, "%s: infeasible: %v\n", s.Name(), viol[:min(3, len(viol))])
			os.Exit(1)
		}
		if p == 0 {
			r.Objective = obj
			if !math.IsNaN(res.Bound) {
				b := res.Bound
				r.Bound = &b
			}
		}
		r.ObjectiveAll += obj
		pulls, kbps := qoe.OriginPulls(in, res.Assign)
		r.OriginPulls += float64(pulls)
		r.OriginMbps += kbps / 1000
		next := map[int]qoe.Choice{}
		for v, c := range res.Assign {
			u := in.Users[v]
			kbps := in.Ladder[c.Rung]
			lat := 1000 * in.Latency(v, c.Server, c.Rung)
			r.MeanLatencyMS += lat
			r.MeanBitrate += kbps
			if kbps >= u.Profile.DesiredKbps {
				r.AtDesired++
			}
			if c.Server == qoe.Fallback {
				r.Fallback++
			} else {
				r.EdgeLatenciesMS = append(r.EdgeLatenciesMS, lat)
				r.RungUsers[c.Rung]++
			}
			if u.PrevServer >= 0 && u.PrevServer != c.Server {
				r.Switches++
			}
			if u.PrevKbps > kbps {
				r.Jitter++
				r.JitterKbps += u.PrevKbps - kbps
			}
			next[people[v].id] = c
			cnt++
		}
		prev = next
	}
	r.TimeMS /= float64(len(seq))
	r.CPUMS /= float64(len(seq))
	r.OriginPulls /= float64(len(seq))
	r.OriginMbps /= float64(len(seq))
	r.MeanLatencyMS /= cnt
	r.MeanBitrate /= cnt
	r.AtDesired /= cnt
	return r
}

// profile draws a user profile: danmaku per hour with 59% at 1 and 96% below
// 10 (the paper's Fig. 3): 59% -> 1, 37% -> uniform 2..9, 4% -> 10 * Pareto(1.5);
// desired bitrate from desiredShare; gift: 80% zero, else lognormal.
func profile(rng *rand.Rand) qoe.Profile {
	var f float64
	switch x := rng.Float64(); {
	case x < 0.59:
		f = 1
	case x < 0.96:
		f = float64(2 + rng.IntN(8))
	default:
		f = 10 * math.Pow(1-rng.Float64(), -1/1.5)
	}
	d := desiredKbps[len(desiredKbps)-1]
	x := rng.Float64()
	for i, s := range desiredShare {
		if x < s {
			d = desiredKbps[i]
			break
		}
		x -= s
	}
	var g float64
	if rng.Float64() < giftShare {
		g = math.Round(giftMedian * math.Exp(giftSigma*rng.NormFloat64()))
	}
	return qoe.Profile{DesiredKbps: d, Danmaku: f, Gift: g}
}

// zipf draws a room with probability proportional to 1/(i+1).
func zipf(rng *rand.Rand, n int) int {
	var h float64
	for i := 1; i <= n; i++ {
		h += 1 / float64(i)
	}
	x := rng.Float64() * h
	for i := 1; i <= n; i++ {
		x -= 1 / float64(i)
		if x <= 0 {
			return i - 1
		}
	}
	return n - 1
}

func jitter(rng *rand.Rand, lat, lon, maxM float64) (float64, float64) {
	d := maxM * math.Sqrt(rng.Float64())
	a := 2 * math.Pi * rng.Float64()
	return lat + d*math.Cos(a)/111000, lon + d*math.Sin(a)/(111000*math.Cos(lat*math.Pi/180))
}

// readPoints reads the points of a CSV file, or of the embedded copy when
// path is empty.
func readPoints(path string, embedded []byte, latCol, lonCol string) ([][2]float64, error) {
	var in io.Reader = bytes.NewReader(embedded)
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		in = f
	}
	r := csv.NewReader(in)
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err != nil {
		return nil, err
	}
	li, lo := -1, -1
	for i, h := range head {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if strings.EqualFold(h, latCol) {
			li = i
		}
		if strings.EqualFold(h, lonCol) {
			lo = i
		}
	}
	if li < 0 || lo < 0 {
		return nil, fmt.Errorf("%s: columns %s,%s not found in %v", path, latCol, lonCol, head)
	}
	var out [][2]float64
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		la, e1 := strconv.ParseFloat(strings.TrimSpace(rec[li]), 64)
		ln, e2 := strconv.ParseFloat(strings.TrimSpace(rec[lo]), 64)
		if e1 != nil || e2 != nil {
			continue
		}
		out = append(out, [2]float64{la, ln})
	}
	return out, nil
}

func check(err error) {
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "qoe: ") { // the qoe package's errors name it already
			msg = "qoe: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}
