package lab

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/testbed/chaos"
	"github.com/anysched/anysched/internal/testbed/stbload"
	"github.com/anysched/anysched/internal/testbed/wait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdPrefix is the key prefix the lab's daemons use (etcd.prefix's default).
const etcdPrefix = "/anysched/"

// PlayerHook runs one real player in city i's client namespace until
// the context ends and returns a line of what it saw (start time, stalls,
// reconnects).
type PlayerHook func(ctx context.Context, l *Lab, city int) string

// FFmpegPlayers is the PlayerHook of the lab's ffmpeg player harness
// (StartPlayer): one player on ch1, reconnecting through the Anycast
// address whenever its edge or scheduler goes.
func FFmpegPlayers(ctx context.Context, l *Lab, city int) string {
	p, err := l.StartPlayer(ctx, city, "ch1")
	if err != nil {
		return "not started: " + err.Error()
	}
	<-ctx.Done()
	return p.Stop().String()
}

// ChaosConfig shapes a chaos run on a lab that is up, its topology applied
// and every city answered by its own scheduler.
type ChaosConfig struct {
	Seed     uint64
	Duration time.Duration
	Out      io.Writer // the schedule and progress; nil: discarded
	// Load: STBs per city that ask one after another (Steady), with
	// Pause between requests, and how many per city change channel in each
	// zapping storm. Zero: 3, 150 ms, 25.
	Steady   int
	Pause    time.Duration
	StormSTB int
	// Players runs one real player per city for the whole run, reported
	// beside the STBs; nil: FFmpegPlayers where ffmpeg is installed.
	// NoPlayers runs none.
	Players   PlayerHook
	NoPlayers bool
	// Schedule, if set, is played instead of one drawn from Seed (which
	// still seeds the load): a test's own sequence of faults.
	Schedule *chaos.Schedule
}

// ChaosTargets are what a chaos plan can hit in this lab.
func (l *Lab) ChaosTargets() chaos.Targets {
	t := chaos.Targets{Cities: l.o.Cities, Center: CenterID, EtcdMembers: l.clusterSize()}
	for i, c := range l.o.Cities {
		ids := []string{PrimaryID(c)}
		if l.o.Standby[i] {
			ids = append(ids, StandbyID(c))
		}
		t.Schedulers = append(t.Schedulers, ids)
	}
	for _, n := range l.Topo.Nodes {
		i := slices.Index(l.o.Cities, n.Region)
		if i < 0 {
			continue
		}
		for si, sv := range n.Servers {
			if si >= LiveServers {
				break // the VOD server: the STBs ask for live channels
			}
			t.Servers = append(t.Servers, sv.Name)
			if l.o.Edges {
				t.Edges = append(t.Edges, chaos.Edge{City: i, Daemon: EdgeName(i, 10+si), Server: sv.Name, Address: fmt.Sprintf("10.%d.4.%d:8080", i+1, 10+si)})
			}
		}
	}
	return t
}

// RunChaos draws a schedule from the seed, prints it, runs the STB load
// and the faults for the run's duration, waits for every fault to be
// undone, and checks the invariants. The caller tears the lab down and
// adds the leftovers check (Leftovers) before it prints the report.
func (l *Lab) RunChaos(ctx context.Context, cfg ChaosConfig) (*chaos.Report, error) {
	cfg = cfg.withDefaults()
	targets := l.ChaosTargets()
	sched, err := chaosSchedule(cfg, targets)
	if err != nil {
		return nil, err
	}
	sched.Write(cfg.Out)
	cli, err := l.EtcdClient(ctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	startRev, err := startRevision(ctx, cli)
	if err != nil {
		return nil, err
	}
	tok, err := l.chaosTokens(cfg.Seed)
	if err != nil {
		return nil, err
	}
	rep := &chaos.Report{Schedule: sched, Cities: l.o.Cities, Start: time.Now()}
	start := rep.Start
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration+2*time.Minute)
	defer cancel()

	sampler := l.sampleRevisions(runCtx, targets)
	players := l.startPlayers(runCtx, cfg)
	defer players.cancel()
	load := l.startLoad(runCtx, cfg, sched, tok)
	done := l.strikeAll(runCtx, cli, sched.Faults, start, cfg.Out)
	reqs := load.wait()
	samples := sampler.stop()
	rep.Players = players.wait()
	fmt.Fprintf(cfg.Out, "  +%5.1fs  load and faults over: %d STB requests; checking\n", time.Since(start).Seconds(), len(reqs))
	rep.Done, rep.Requests = done, reqs

	l.checkRun(ctx, cli, rep, targets, samples, startRev)
	return rep, nil
}

// withDefaults fills in the zero fields the way ChaosConfig documents.
func (cfg ChaosConfig) withDefaults() ChaosConfig {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Steady <= 0 {
		cfg.Steady = 3
	}
	if cfg.Pause <= 0 {
		cfg.Pause = 150 * time.Millisecond
	}
	if cfg.StormSTB <= 0 {
		cfg.StormSTB = 25
	}
	if cfg.Players == nil && !cfg.NoPlayers {
		if _, err := exec.LookPath("ffmpeg"); err == nil {
			cfg.Players = FFmpegPlayers
		}
	}
	if cfg.NoPlayers {
		cfg.Players = nil
	}
	return cfg
}

// chaosSchedule is the test's own schedule, or the one drawn from the
// seed.
func chaosSchedule(cfg ChaosConfig, targets chaos.Targets) (chaos.Schedule, error) {
	if cfg.Schedule != nil {
		return *cfg.Schedule, nil
	}
	return chaos.Plan(cfg.Seed, cfg.Duration, targets)
}

// startRevision is the store's revision before the run, once the cluster
// answers: the claims check replays the claims from there.
func startRevision(ctx context.Context, cli *clientv3.Client) (int64, error) {
	var startRev int64
	if !wait.Until(30*time.Second, func() bool {
		r, err := cli.Get(ctx, etcdPrefix+keyspace.KeyTopologyCurrent)
		if err == nil {
			startRev = r.Header.Revision
		}
		return err == nil
	}) {
		return 0, fmt.Errorf("lab: chaos: the etcd cluster does not answer")
	}
	return startRev, nil
}

// chaosTokens makes the STBs' viewer tokens with the lab's key when the
// lab selects by QoE; nil otherwise (no tokens).
func (l *Lab) chaosTokens(seed uint64) (func(string, int) string, error) {
	if !l.o.QoE {
		return nil, nil
	}
	path, err := l.TokenKey()
	if err != nil {
		return nil, err
	}
	secret, err := token.ReadSecret(path)
	if err != nil {
		return nil, err
	}
	return stbload.Tokens(token.Key{ID: TokenKeyID, Secret: secret}, time.Hour, seed), nil
}

// revisionSampler reads the snapshot revision every scheduler answers
// from, once a second, until stopped.
type revisionSampler struct {
	mu      sync.Mutex
	samples []chaos.Sample
	wg      sync.WaitGroup
	cancel  context.CancelFunc
}

// sampleRevisions starts sampling the center and every city's
// schedulers.
func (l *Lab) sampleRevisions(ctx context.Context, targets chaos.Targets) *revisionSampler {
	instances := []string{CenterID}
	for _, ids := range targets.Schedulers {
		instances = append(instances, ids...)
	}
	s := &revisionSampler{}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	s.cancel = stopSampling
	for _, inst := range instances {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for sampleCtx.Err() == nil {
				if rev, err := l.SnapshotRevision(sampleCtx, inst); err == nil {
					s.mu.Lock()
					s.samples = append(s.samples, chaos.Sample{Instance: inst, At: time.Now(), Revision: rev})
					s.mu.Unlock()
				}
				select {
				case <-sampleCtx.Done():
				case <-time.After(time.Second): // the sampling pace
				}
			}
		}()
	}
	return s
}

// stop ends the sampling and returns the samples.
func (s *revisionSampler) stop() []chaos.Sample {
	s.cancel()
	s.wg.Wait()
	return s.samples
}

// chaosPlayers are the run's real players, one per city.
type chaosPlayers struct {
	lines  []string // per city: what its player saw
	wg     sync.WaitGroup
	cancel context.CancelFunc // ends them; the run defers it
}

// startPlayers starts one real player per city for the whole run (none
// without cfg.Players).
func (l *Lab) startPlayers(ctx context.Context, cfg ChaosConfig) *chaosPlayers {
	ps := &chaosPlayers{lines: make([]string, len(l.o.Cities)), cancel: func() {}}
	if cfg.Players == nil {
		return ps
	}
	pctx, pcancel := context.WithTimeout(ctx, cfg.Duration)
	ps.cancel = pcancel
	for i := range l.o.Cities {
		ps.wg.Add(1)
		go func() { defer ps.wg.Done(); ps.lines[i] = l.o.Cities[i] + ": " + cfg.Players(pctx, l, i) }()
	}
	return ps
}

// wait waits for the players to end and returns their lines.
func (ps *chaosPlayers) wait() []string {
	ps.wg.Wait()
	var out []string
	for _, p := range ps.lines {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// chaosLoad is the STB load of a run, running.
type chaosLoad struct {
	reqs []chaos.Request
	done chan struct{}
}

// startLoad starts the STBs: the steady askers and the schedule's zapping
// storms, in every city's client namespace.
func (l *Lab) startLoad(ctx context.Context, cfg ChaosConfig, sched chaos.Schedule, tok func(string, int) string) *chaosLoad {
	ld := &chaosLoad{done: make(chan struct{})}
	go func() {
		defer close(ld.done)
		ld.reqs = chaos.RunLoad(ctx, chaos.LoadOptions{
			Cities: l.o.Cities, Dial: func(i int) func(context.Context, string, string) (net.Conn, error) {
				return l.DialIn(fmt.Sprintf("c%d", i+1))
			},
			Target: ServiceIP.String() + ":80", Host: topogen.Hostname, Token: tok, Viewers: max(QoEViewers, 30),
			Steady: cfg.Steady, Pause: cfg.Pause, Storms: sched.Storms, StormSTB: cfg.StormSTB,
			Duration: cfg.Duration, Channels: 20, Seed: cfg.Seed,
		})
	}()
	return ld
}

// wait waits for the load to end and returns every request it made.
func (ld *chaosLoad) wait() []chaos.Request {
	<-ld.done
	return ld.reqs
}

// strikeAll strikes every fault at its time from start, each on its own,
// and returns when all are undone (or the run ended before them).
func (l *Lab) strikeAll(ctx context.Context, cli *clientv3.Client, faults []chaos.Fault, start time.Time, out io.Writer) []chaos.Done {
	done := make([]chaos.Done, len(faults))
	var fw sync.WaitGroup
	for k, f := range faults {
		done[k].Fault = f
		fw.Add(1)
		go func() {
			defer fw.Done()
			select {
			case <-ctx.Done():
				done[k].Err = "the run ended before it"
				return
			case <-time.After(time.Until(start.Add(f.At))):
			}
			l.strike(ctx, cli, &done[k])
			fmt.Fprintf(out, "  +%5.1fs  #%d %s %s done\n", time.Since(start).Seconds(), f.N, f.Kind, f.Target)
		}()
	}
	fw.Wait()
	return done
}
