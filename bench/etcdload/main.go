// Command etcdload runs the writers of a province against a real etcd and
// reports what each writes, per simulated second, and how etcd's database
// grows: the health checkers (the real checker's report rule and
// publisher), the schedulers' capacity claims and instance records, the
// QoE planners' published plans (store.PutAllocState) and the audit trail,
// at the design's size by default (16 cities, 3,000,000 viewers at prime
// time shared out by census population, 10,000 edge servers, 32 checkers).
//
// One embedded etcd member (in this process, loopback, compacting as the
// province's do); a 3-member cluster is bench/province's subject. Time can
// be accelerated (-speed): every writer's interval and etcd's compaction
// retention shrink by the factor, so the figures per simulated second hold
// as long as the machine keeps up, which the report's late ticks tell.
//
//	go run ./bench/etcdload -duration 10m                     # the design's province, 10 simulated minutes
//	go run ./bench/etcdload -duration 2h30m -speed 5 -doc docs/benchmarks.md -doc-label after
//	go run ./bench/etcdload -state-format legacy -duration 10m   # the plan state as it was
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/etcd/etcdhousekeep"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "etcdload:", err)
		os.Exit(1)
	}
}

// config is the bench's settings, all in simulated time.
type config struct {
	Sessions, Servers, Checkers  int
	Duration, Warmup, Sample     time.Duration
	Speed                        float64
	Housekeeping                 bool
	KeepRevisions                int64
	Quota                        int64
	ProbeInterval, HealthRefresh time.Duration
	LoadNoise                    float64
	LoadTau                      time.Duration
	Period, StateInterval        time.Duration
	Registration                 time.Duration
	RegistrationRefresh          time.Duration
	AuditPerHour                 float64
	Churn                        churn
	StateFormat                  string
	StateCities                  []string
	Writers                      []string
	Seed                         uint64
	Dir                          string
	CPUProfile                   string
}

// allWriters names the writers, in the report's order.
func allWriters() []string { return []string{"health", "claims", "registrations", "state", "audit"} }

func parse(args []string, stderr io.Writer) (config, string, string, error) {
	fs := flag.NewFlagSet("etcdload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.IntVar(&c.Sessions, "sessions", 3_000_000, "viewers at prime time, shared out over the 16 cities by census population")
	fs.IntVar(&c.Servers, "servers", 10_000, "edge servers of the province")
	fs.IntVar(&c.Checkers, "checkers", 32, "health checkers, the same number a city (a multiple of 16); each probes all of its city's servers")
	fs.DurationVar(&c.Duration, "duration", 10*time.Minute, "simulated time to run")
	fs.DurationVar(&c.Warmup, "warmup", 2*time.Minute, "simulated time before the rates are measured (the first full publications, the first verdicts)")
	fs.DurationVar(&c.Sample, "sample", time.Minute, "simulated time between two samples of etcd's database")
	fs.Float64Var(&c.Speed, "speed", 1, "simulated seconds per wall second (intervals and etcd's compaction retention shrink by it)")
	fs.BoolVar(&c.Housekeeping, "housekeeping", true, "run the center's etcd housekeeper (etcdhousekeep, its defaults: at most 5 minutes of history) beside the member, its times shrunk by the speed")
	fs.Int64Var(&c.KeepRevisions, "keep-revisions", etcdhousekeep.DefaultKeepRevisions, "the member's own compaction and the housekeeper's bound, in revisions")
	fs.Int64Var(&c.Quota, "quota", 4<<30, "etcd's backend quota in bytes (deploy/etcd/'s)")
	fs.DurationVar(&c.ProbeInterval, "probe-interval", time.Second, "health.check.interval")
	fs.DurationVar(&c.HealthRefresh, "health-refresh", 0, "the checker's refresh of an unchanged verdict (0: the checker's default)")
	fs.Float64Var(&c.LoadNoise, "load-noise", 0.05, "relative spread of an edge's load figures around its share")
	fs.DurationVar(&c.LoadTau, "load-tau", 5*time.Minute, "correlation time of an edge's load figures")
	fs.DurationVar(&c.Period, "period", 10*time.Second, "alloc.period: the claims' commits and the QoE summaries")
	fs.DurationVar(&c.StateInterval, "state-interval", 30*time.Second, "alloc.state_interval: the primaries' plan publications")
	fs.DurationVar(&c.Registration, "registration-interval", 2*time.Second, "the instance records' lease refresh (and write, when they changed)")
	fs.DurationVar(&c.RegistrationRefresh, "registration-refresh", 10*time.Second, "a city scheduler's record that changed only in its answer counts and snapshot age is written this often (0: every -registration-interval, as before)")
	fs.Float64Var(&c.AuditPerHour, "audit-per-hour", 60, "audited operator calls per hour")
	fs.DurationVar(&c.Churn.ZapEvery, "zap-every", 10*time.Minute, "mean time between two channel changes of a viewer")
	fs.DurationVar(&c.Churn.WatchFor, "watch-for", time.Hour, "mean time a viewer watches before leaving (a new one takes its place)")
	fs.DurationVar(&c.Churn.RequestEvery, "request-every", time.Minute, "mean time between two requests of a playing STB")
	fs.Float64Var(&c.Churn.MoveShare, "move-share", 0.01, "share of the sessions the plan moves per publication")
	fs.StringVar(&c.StateFormat, "state-format", "current", "current (store.PutAllocState) or legacy (the gzipped JSON parts it replaced)")
	stateCities := fs.String("state-cities", "", "only these cities' plans are published (default: every city's); with -state-interval 5s, a center standing in for a city that is up")
	writers := fs.String("writers", strings.Join(allWriters(), ","), "writers to run")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed")
	fs.StringVar(&c.Dir, "dir", "", "etcd's data directory (default: a temporary one, removed)")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the run here")
	doc := fs.String("doc", "", "write the report into this markdown file (docs/benchmarks.md) between its etcdload markers")
	label := fs.String("doc-label", "after", "which markers: <!-- etcdload-LABEL:begin --> ... <!-- etcdload-LABEL:end -->")
	if err := fs.Parse(args); err != nil {
		return c, "", "", err
	}
	c.Writers = strings.Split(*writers, ",")
	if *stateCities != "" {
		c.StateCities = strings.Split(*stateCities, ",")
	}
	switch {
	case c.Sessions < 0 || c.Servers < 16 || c.Checkers < 16 || c.Checkers%16 != 0:
		return c, "", "", errors.New("-sessions >= 0, -servers >= 16 and -checkers a positive multiple of 16")
	case c.Speed <= 0 || c.Duration <= 0 || c.Warmup < 0 || c.Warmup >= c.Duration || c.Sample <= 0:
		return c, "", "", errors.New("-speed > 0, -duration > 0, 0 <= -warmup < -duration, -sample > 0")
	case c.Period <= 0 || c.StateInterval <= 0 || c.Registration <= 0 || c.ProbeInterval <= 0 || c.KeepRevisions < 1000:
		return c, "", "", errors.New("-period, -state-interval, -registration-interval and -probe-interval must be > 0, -keep-revisions >= 1000")
	case c.StateFormat != "current" && c.StateFormat != "legacy":
		return c, "", "", fmt.Errorf("-state-format %q: current or legacy", c.StateFormat)
	}
	for _, w := range c.Writers {
		if !slices.Contains(allWriters(), w) {
			return c, "", "", fmt.Errorf("-writers: %q is none of %s", w, strings.Join(allWriters(), ", "))
		}
	}
	return c, *doc, *label, nil
}

// bench is one run: the province, the clock, the etcd member.
type bench struct {
	cfg    config
	cities []city
	clock  *simClock
	etcd   *member
	prefix string
	log    *slog.Logger
	mu     sync.Mutex
	conns  []*clientv3.Client
}

// writer is one kind of writer of the province, with its own etcd client
// and meter.
type writer struct {
	name  string
	meter *etcdclient.WriteMeter
	run   func(ctx context.Context) error
	late  lateCounter
	errs  atomic.Int64
	first atomic.Value // the first error, a string

	mu    sync.Mutex
	times map[string][]time.Duration // wall time of each publication, by city (plan state)
}

func (w *writer) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	w.errs.Add(1)
	w.first.CompareAndSwap(nil, err.Error())
}

func (w *writer) took(city string, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.times == nil {
		w.times = map[string][]time.Duration{}
	}
	w.times[city] = append(w.times[city], d)
}

func (b *bench) client(w *writer) (*clientv3.Client, error) {
	w.meter = etcdclient.NewWriteMeter(b.prefix)
	cli, err := b.etcd.client(w.meter, b.log)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.conns = append(b.conns, cli)
	b.mu.Unlock()
	return cli, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, doc, label, err := parse(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	res, err := measure(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	text := res.markdown()
	fmt.Fprint(stdout, text)
	if doc != "" {
		if err := writeDoc(doc, label, text); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "section written to", doc)
	}
	return nil
}

// measure runs the writers for cfg.Duration of simulated time and samples
// etcd and the meters.
func measure(ctx context.Context, cfg config, progress io.Writer) (*results, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cities, err := buildProvince(cfg.Servers, cfg.Sessions)
	if err != nil {
		return nil, err
	}
	for _, name := range cfg.StateCities {
		if !slices.ContainsFunc(cities, func(c city) bool { return c.name == name }) {
			return nil, fmt.Errorf("-state-cities: %q is not a city of the province", name)
		}
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "etcdload-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	clock := newSimClock(cfg.Speed)
	m, err := startMember(dir, cfg.KeepRevisions, cfg.Quota, log)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	b := &bench{cfg: cfg, cities: cities, clock: clock, etcd: m, prefix: "/anysched/", log: log}
	defer func() {
		for _, c := range b.conns {
			c.Close()
		}
	}()
	makers := map[string]func(*bench) (*writer, error){
		"health": healthWriter, "claims": claimsWriter, "registrations": registrationWriter, "state": stateWriter, "audit": auditWriter,
	}
	var ws []*writer
	for _, name := range allWriters() {
		if !slices.Contains(cfg.Writers, name) {
			continue
		}
		w, err := makers[name](b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		ws = append(ws, w)
	}
	statusCli, err := m.client(etcdclient.NewWriteMeter(b.prefix), log)
	if err != nil {
		return nil, err
	}
	defer statusCli.Close()
	res := &results{cfg: cfg, cities: cities, writers: ws, began: time.Now()}
	var house *etcdhousekeep.Housekeeper
	if cfg.Housekeeping {
		hc := etcdhousekeep.DefaultConfig()
		for _, d := range []*time.Duration{&hc.Interval, &hc.CompactInterval, &hc.MaxHistory, &hc.MinHistory, &hc.DefragMinInterval} {
			*d = clock.Wall(*d)
		}
		hc.KeepRevisions = cfg.KeepRevisions
		house = etcdhousekeep.New(statusCli, hc, etcdhousekeep.Options{}, prometheus.NewRegistry(), log)
	}
	rctx, cancel := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(rctx)
	for _, w := range ws {
		g.Go(func() error { return w.run(gctx) })
	}
	if house != nil {
		g.Go(func() error { return house.Run(gctx) })
	}
	sample := func() error {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		defer scancel()
		s, err := status(sctx, statusCli, m.endpoint)
		if err != nil {
			return err
		}
		s.At = clock.Elapsed()
		if house != nil {
			s.Compacted = house.Status().Compacted
		}
		res.samples = append(res.samples, s)
		tot := map[string]etcdclient.WriteTotals{}
		for _, w := range ws {
			tot[w.name] = sum(w.meter.Totals())
		}
		res.totals = append(res.totals, tot)
		fmt.Fprintf(progress, "etcdload: %s simulated: revision %d, db %s (%s in use)\n", s.At.Round(time.Second), s.Revision, mb(s.DBSize), mb(s.DBInUse))
		return nil
	}
	// A status call can wait behind a defragmentation or a busy machine: a
	// sample that does not come is counted and the next one tried; only
	// maxMissed in a row end the run, so that an hours-long run is not lost
	// to one slow moment.
	const maxMissed = 5
	var serr error
	missed := 0
	for next := time.Duration(0); next <= cfg.Duration && ctx.Err() == nil && gctx.Err() == nil; next += cfg.Sample {
		if next > 0 {
			select {
			case <-gctx.Done():
			case <-time.After(clock.Wall(next - clock.Elapsed())):
			}
		}
		if err := sample(); err != nil {
			res.missed++
			if missed++; missed >= maxMissed {
				serr = fmt.Errorf("%d samples in a row: %w", missed, err)
				break
			}
			fmt.Fprintf(progress, "etcdload: %s simulated: no sample: %v\n", clock.Elapsed().Round(time.Second), err)
			continue
		}
		missed = 0
	}
	if serr == nil && len(res.samples) < 2 {
		serr = errors.New("fewer than two samples of etcd's database")
	}
	res.wall = time.Since(res.began)
	cancel()
	werr := g.Wait()
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case serr != nil:
		return nil, fmt.Errorf("etcd status: %w", serr)
	case werr != nil:
		return nil, werr
	}
	res.cpus = runtime.NumCPU()
	return res, nil
}

// sum adds a meter's kinds up: a writer's traffic, whatever its keys.
func sum(m map[string]etcdclient.WriteTotals) etcdclient.WriteTotals {
	var t etcdclient.WriteTotals
	for _, v := range m {
		t.Bytes += v.Bytes
		t.Writes += v.Writes
		t.Keys += v.Keys
		t.Revisions += v.Revisions
	}
	return t
}
