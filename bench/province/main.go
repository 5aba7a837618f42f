// Command province runs the whole sample province on one machine and
// measures what it costs over time: a real 3-member etcd cluster (TLS,
// RBAC), the real central scheduler and the 16 city schedulers (primary,
// and a standby where -standby says) in network namespaces
// (internal/testbed/lab, as bench/rollout brings them up; root), each city
// planning its own viewers by QoE allocation with the production timings
// (alloc.period 10 s, alloc.session_ttl 2 m), its servers probed every
// second by the schedulers' embedded health checkers.
//
// The viewers are synthetic sessions, -sessions in all, split over the
// cities by census population (topogen.AnhuiSplit). Each is a viewer token
// and a channel; every request is a real HTTP request to the Anycast
// address from its city's client namespace (client.go): each session asks
// once when it starts, again within alloc.session_ttl to stay alive
// (-refresh), sometimes on another channel (-zap), and in each prime-time
// zapping storm (-storm-every) a share of the viewers changes channel
// within seconds.
//
// Every -sample it records, per daemon, CPU (utime+stime from /proc) and
// RSS; per city, the planner's solve times, certified gap, sessions and
// uncertified plans (the schedulers' /metrics); and etcd's writes, received bytes,
// database size and revision (the members' own /metrics). It writes
// results.json, renders a section of docs/benchmarks.md (-doc) and plots
// etcd and the daemons over time (-png).
//
//	make build && go run ./bench/province [-sessions 30000] [-duration 5m] [-doc docs/benchmarks.md]
//	make build && go run ./bench/province -sessions 3000000 -duration 30m   # the real province (not on 2 cores)
//	go run ./bench/province -results /tmp/anysched-province/results.json -doc docs/benchmarks.md   # re-render only
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/anysched/anysched/bench/internal/host"
	"github.com/anysched/anysched/internal/testbed/lab"
)

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "client" {
		err = runClient(os.Args[2:])
	} else {
		err = run(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "province:", err)
		os.Exit(1)
	}
}

// Defaults. The session total is what this 2-core machine held (see the
// section in docs/benchmarks.md); the timings are the allocator's
// production defaults.
const (
	defaultSessions = 30_000
	defaultPeriod   = 10 * time.Second
	defaultTTL      = 2 * time.Minute
)

func run(args []string) error {
	fs := flag.NewFlagSet("province", flag.ContinueOnError)
	prefix := fs.String("prefix", "asp", "namespace name prefix (keep it your own)")
	bin := fs.String("bin", "bin", "directory with the built daemons, lab and schedctl (make build)")
	dir := fs.String("dir", "/tmp/anysched-province", "work directory: configs, logs, results.json")
	sessions := fs.Int("sessions", defaultSessions, "synthetic sessions in the province, split over the cities by census population (3000000: the design's prime time)")
	dur := fs.Duration("duration", 5*time.Minute, "load duration (-duration 30m for the issue's run)")
	sample := fs.Duration("sample", 10*time.Second, "sampling interval")
	period := fs.Duration("period", defaultPeriod, "alloc.period of every planner")
	ttl := fs.Duration("session-ttl", defaultTTL, "alloc.session_ttl of every planner")
	refresh := fs.Duration("refresh", 0, "each session asks again this often to stay alive (default 3/4 of -session-ttl)")
	zap := fs.Float64("zap", 0.2, "share of the refreshes that change channel (background zapping)")
	stormEvery := fs.Duration("storm-every", time.Minute, "a prime-time zapping storm this often (0: none)")
	stormFirst := fs.Duration("storm-first", 0, "the first storm this long after the load starts (default: once every session has arrived, -refresh + 10s)")
	stormShare := fs.Float64("storm-share", 0.3, "share of each city's viewers that change channel in a storm")
	stormWindow := fs.Duration("storm-window", 10*time.Second, "a storm's viewers change channel within this window")
	servers := fs.Int("servers", 160, "live servers in the province, split over the cities by population (at least 2 a city); each probed every second")
	capacity := fs.Float64("capacity", 0.8, "a city's live server bandwidth as a share of its sessions' demand at the top rung (below 1: the planner must choose bitrates)")
	history := fs.Duration("etcd-history", 5*time.Minute, "the center's etcd.housekeeping.max_history: how long etcd keeps its history (the production default; the lab's own is 1h)")
	standby := fs.String("standby", "hefei", `cities that also run a standby scheduler: a comma list, "all" or "none"`)
	addrs := fs.Int("addrs", 8, "STB source addresses per city client namespace")
	keepalive := fs.Bool("keepalive", false, "STBs reuse a connection (default: a new connection per request, as an STB asking minutes apart)")
	workers := fs.Int("workers", 256, "concurrent requests per city's load generator")
	doc := fs.String("doc", "", "write the section into this markdown file (docs/benchmarks.md)")
	png := fs.String("png", "docs/img/province.png", "plot file (empty: none)")
	resultsIn := fs.String("results", "", "render a saved results.json instead of running the lab")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var res *Results
	if *resultsIn != "" {
		res = &Results{}
		if err := host.ReadResults(*resultsIn, res); err != nil {
			return err
		}
	} else {
		if *refresh == 0 {
			*refresh = *ttl * 3 / 4
		}
		if *stormFirst == 0 {
			*stormFirst = *refresh + 10*time.Second
		}
		set := Settings{Sessions: *sessions, Duration: *dur, Sample: *sample, Period: *period, SessionTTL: *ttl, Refresh: *refresh,
			Zap: *zap, StormEvery: *stormEvery, StormFirst: *stormFirst, StormShare: *stormShare, StormWindow: *stormWindow,
			Servers: *servers, Capacity: *capacity, Addrs: *addrs, KeepAlive: *keepalive, Workers: *workers, EtcdMembers: 3,
			EtcdHistory: *history, CheckInterval: checkInterval, Channels: channels}
		if err := set.check(); err != nil {
			return err
		}
		var err error
		if set.Standby, err = standbyCities(*standby); err != nil {
			return err
		}
		set.Cities = splitCities(set.Sessions, set.Servers, set.Capacity)
		res, err = measure(*prefix, *bin, *dir, set)
		if res != nil && len(res.Samples) > 0 {
			host.SaveResults(*dir, res)
		}
		if err != nil {
			return err
		}
	}
	fmt.Println()
	fmt.Print(summaryTables(res))
	return host.Publish(*png, *doc, docBegin, docEnd, func(png string) error { return plotResults(res, png) },
		func(png string) string { return section(res, png) })
}

// check refuses settings that cannot be run.
func (s Settings) check() error {
	var errs []error
	if s.Sessions < len(allCities) {
		errs = append(errs, fmt.Errorf("-sessions %d: at least one a city", s.Sessions))
	}
	if s.Duration < 30*time.Second || s.Sample < time.Second || s.Sample > s.Duration/3 {
		errs = append(errs, fmt.Errorf("-duration %s, -sample %s: want a duration of at least 30s and at least three samples of 1s or more", s.Duration, s.Sample))
	}
	if s.Period < time.Second || s.SessionTTL < s.Period {
		errs = append(errs, fmt.Errorf("-period %s, -session-ttl %s: the allocator wants a period of 1s or more and a TTL of at least one period", s.Period, s.SessionTTL))
	}
	if s.Refresh <= 0 || s.Refresh >= s.SessionTTL {
		errs = append(errs, fmt.Errorf("-refresh %s: a session must ask again within -session-ttl %s", s.Refresh, s.SessionTTL))
	}
	if s.Zap < 0 || s.Zap > 1 || s.StormShare < 0 || s.StormShare > 1 || s.Capacity <= 0 {
		errs = append(errs, errors.New("-zap and -storm-share are shares (0 to 1), -capacity is positive"))
	}
	if s.StormEvery < 0 || (s.StormEvery > 0 && (s.StormWindow <= 0 || s.StormWindow > s.StormEvery)) {
		errs = append(errs, fmt.Errorf("-storm-every %s, -storm-window %s: a storm's window is within its period", s.StormEvery, s.StormWindow))
	}
	if s.Servers < 2*len(allCities) || s.Addrs < 1 || s.Addrs > 150 || s.Workers < 1 {
		errs = append(errs, fmt.Errorf("-servers %d (at least %d), -addrs %d (1 to 150), -workers %d (at least 1)", s.Servers, 2*len(allCities), s.Addrs, s.Workers))
	}
	return errors.Join(errs...)
}

// standbyCities reads -standby.
func standbyCities(s string) ([]string, error) {
	switch s {
	case "none", "":
		return nil, nil
	case "all":
		return slices.Clone(allCities), nil
	}
	var out []string
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		if !slices.Contains(allCities, c) {
			return nil, fmt.Errorf("-standby: %q is not a city of the sample province", c)
		}
		out = append(out, c)
	}
	return out, nil
}

// measure brings the province up, runs the load while sampling, and tears
// everything down.
func measure(prefix, bin, dir string, set Settings) (res *Results, err error) {
	absBin, self, err := host.Prepare(bin, []string{"ip", "bird", "birdc", "curl"}, []string{"central-scheduler", "regional-scheduler", "schedctl", "lab"})
	if err != nil {
		return nil, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	_ = os.RemoveAll(dir)
	res = &Results{When: time.Now().UTC(), Machine: host.Machine(), LoadAvg: host.LoadAvg(), Settings: set}
	standby := map[int]bool{}
	for _, c := range set.Standby {
		standby[slices.Index(allCities, c)] = true
	}
	step("bringing up the province: %d cities (standby: %s), a %d-member etcd cluster, the center, %d live servers (namespaces %s-*)",
		len(allCities), orNone(set.Standby), set.EtcdMembers, set.Servers, prefix)
	t0 := time.Now()
	l, err := lab.Up(ctx, lab.Options{Prefix: prefix, Cities: allCities, Standby: standby, Bin: absBin, Dir: dir,
		DistanceDelays: true, Edges: true, QoE: true, EtcdMembers: set.EtcdMembers,
		AllocPeriod: set.Period, SessionTTL: set.SessionTTL, EtcdMaxHistory: set.EtcdHistory, Topology: set.amend})
	if err != nil {
		lab.Cleanup(prefix)
		return nil, err
	}
	defer func() { err = errors.Join(err, host.Down(l, prefix, dir)) }()
	step("applying the topology through the center's admin API")
	out, err := host.Apply(ctx, l, absBin, dir, 90*time.Second)
	if err != nil {
		return res, err
	}
	fmt.Print("  " + lastLine(out) + "\n")
	step("waiting until every city's STBs reach their own scheduler")
	if err := host.Converge(ctx, l, allCities, func(i int) string { return lab.PrimaryID(allCities[i]) }, 3*time.Minute, 300*time.Millisecond); err != nil {
		return res, err
	}
	res.LabUp = time.Since(t0).Seconds()
	fmt.Printf("  province up in %s\n", time.Since(t0).Round(time.Second))
	for i := range allCities {
		if _, err := l.AddClients(i, set.Addrs); err != nil {
			return res, err
		}
	}
	return res, runLoad(ctx, l, prefix, self, dir, set, res)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func step(format string, args ...any) { fmt.Printf("\n== "+format+"\n", args...) }
