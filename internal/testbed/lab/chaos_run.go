package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anysched/anysched/internal/opstate"
	"github.com/anysched/anysched/internal/store"
	"github.com/anysched/anysched/internal/testbed/chaos"
	"github.com/anysched/anysched/internal/testbed/stbload"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/internal/token"
	"github.com/anysched/anysched/internal/topology"
	"github.com/anysched/anysched/internal/topology/topogen"
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
	out := cfg.Out
	if out == nil {
		out = io.Discard
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
	targets := l.ChaosTargets()
	var sched chaos.Schedule
	if cfg.Schedule != nil {
		sched = *cfg.Schedule
	} else {
		var err error
		if sched, err = chaos.Plan(cfg.Seed, cfg.Duration, targets); err != nil {
			return nil, err
		}
	}
	sched.Write(out)
	cli, err := l.EtcdClient(ctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	var startRev int64
	if !wait.Until(30*time.Second, func() bool {
		r, err := cli.Get(ctx, etcdPrefix+opstate.KeyTopologyCurrent)
		if err == nil {
			startRev = r.Header.Revision
		}
		return err == nil
	}) {
		return nil, fmt.Errorf("lab: chaos: the etcd cluster does not answer")
	}

	var tok func(string, int) string
	if l.o.QoE {
		path, err := l.TokenKey()
		if err != nil {
			return nil, err
		}
		secret, err := token.ReadSecret(path)
		if err != nil {
			return nil, err
		}
		tok = stbload.Tokens(token.Key{ID: TokenKeyID, Secret: secret}, time.Hour, cfg.Seed)
	}
	rep := &chaos.Report{Schedule: sched, Cities: l.o.Cities, Start: time.Now()}
	start := rep.Start
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration+2*time.Minute)
	defer cancel()

	// The snapshot revision every scheduler answers from, once a second.
	instances := []string{CenterID}
	for _, ids := range targets.Schedulers {
		instances = append(instances, ids...)
	}
	var (
		smu     sync.Mutex
		samples []chaos.Sample
		bg      sync.WaitGroup
	)
	sampleCtx, stopSampling := context.WithCancel(runCtx)
	for _, inst := range instances {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for sampleCtx.Err() == nil {
				if rev, err := l.SnapshotRevision(sampleCtx, inst); err == nil {
					smu.Lock()
					samples = append(samples, chaos.Sample{Instance: inst, At: time.Now(), Revision: rev})
					smu.Unlock()
				}
				select {
				case <-sampleCtx.Done():
				case <-time.After(time.Second): // the sampling pace
				}
			}
		}()
	}
	// One real player per city for the whole run.
	players := make([]string, len(l.o.Cities))
	if cfg.Players != nil {
		pctx, pcancel := context.WithTimeout(runCtx, cfg.Duration)
		defer pcancel()
		for i := range l.o.Cities {
			bg.Add(1)
			go func() { defer bg.Done(); players[i] = l.o.Cities[i] + ": " + cfg.Players(pctx, l, i) }()
		}
	}

	var reqs []chaos.Request
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		reqs = chaos.RunLoad(runCtx, chaos.LoadOptions{
			Cities: l.o.Cities, Dial: func(i int) func(context.Context, string, string) (net.Conn, error) {
				return l.DialIn(fmt.Sprintf("c%d", i+1))
			},
			Target: ServiceIP.String() + ":80", Host: topogen.Hostname, Token: tok, Viewers: max(QoEViewers, 30),
			Steady: cfg.Steady, Pause: cfg.Pause, Storms: sched.Storms, StormSTB: cfg.StormSTB,
			Duration: cfg.Duration, Channels: 20, Seed: cfg.Seed,
		})
	}()

	done := make([]chaos.Done, len(sched.Faults))
	var fw sync.WaitGroup
	for k, f := range sched.Faults {
		done[k].Fault = f
		fw.Add(1)
		go func() {
			defer fw.Done()
			select {
			case <-runCtx.Done():
				done[k].Err = "the run ended before it"
				return
			case <-time.After(time.Until(start.Add(f.At))):
			}
			l.strike(runCtx, cli, &done[k])
			fmt.Fprintf(out, "  +%5.1fs  #%d %s %s done\n", time.Since(start).Seconds(), f.N, f.Kind, f.Target)
		}()
	}
	fw.Wait()
	<-loadDone
	stopSampling()
	bg.Wait()
	fmt.Fprintf(out, "  +%5.1fs  load and faults over: %d STB requests; checking\n", time.Since(start).Seconds(), len(reqs))
	rep.Done, rep.Requests = done, reqs
	for _, p := range players {
		if p != "" {
			rep.Players = append(rep.Players, p)
		}
	}

	primaries := make([]string, len(l.o.Cities))
	for i, c := range l.o.Cities {
		primaries[i] = PrimaryID(c)
	}
	answers, windows := chaos.CheckAnswers(reqs, done, l.o.Cities, primaries, 2*time.Second)
	edges, ews := chaos.CheckEdges(reqs, done, targets.Edges, l.o.Cities)
	rep.Windows, rep.Edges = windows, ews
	rep.Invariants = append(rep.Invariants, answers, edges)

	applied, err := l.appliedRevisions(ctx, cli)
	revs := chaos.CheckRevisions(samples, applied)
	if err != nil {
		revs.Bad++
		revs.Examples = append(revs.Examples, err.Error())
	}
	rep.Invariants = append(rep.Invariants, revs)
	rep.Invariants = append(rep.Invariants, chaos.CheckFreshness(samples, done, func(instance string) int {
		for i, c := range l.o.Cities {
			if strings.HasPrefix(instance, c+"-") {
				return i
			}
		}
		return -1
	}))

	endRev := int64(0)
	if r, err := cli.Get(ctx, etcdPrefix+opstate.KeyTopologyCurrent); err == nil {
		endRev = r.Header.Revision
	}
	changes, err := claimHistory(ctx, cli, startRev, endRev)
	claims := chaos.CheckClaims(changes, l.capacities(), 5*time.Second) // the lab's 2 s period: 2 periods and a second
	if err != nil {
		claims.Bad++
		claims.Examples = append(claims.Examples, err.Error())
	}
	claims.Notes = append(claims.Notes, fmt.Sprintf("store revisions %d..%d", startRev, endRev))
	rep.Invariants = append(rep.Invariants, claims)
	rep.Invariants = append(rep.Invariants, l.checkCameBack(ctx, cli, done), l.checkProcesses())
	return rep, nil
}

// strike carries out one fault and undoes it, recording when.
func (l *Lab) strike(ctx context.Context, cli *clientv3.Client, d *chaos.Done) {
	sleep := func(x time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(x): // the fault's length, from the schedule
		}
	}
	fail := func(err error) {
		if err != nil && d.Err == "" {
			d.Err = err.Error()
		}
	}
	kill := func(name string, sig syscall.Signal, exitWithin time.Duration) bool {
		p := l.Proc(name)
		if p == nil {
			fail(fmt.Errorf("no daemon %q", name))
			return false
		}
		if err := l.signal(name, sig); err != nil {
			fail(err)
			return false
		}
		if !p.Wait(exitWithin) {
			fail(fmt.Errorf("%s did not exit within %s of %s", name, exitWithin, sig))
			return false
		}
		return true
	}
	restart := func(names ...string) {
		d.End = time.Now() // back from here on, as far as the checks go
		for _, n := range names {
			fail(l.Restart(n))
		}
	}
	switch d.Kind {
	case chaos.KillScheduler, chaos.KillCenter, chaos.TermScheduler, chaos.TermCenter:
		sig, within := syscall.SIGKILL, 5*time.Second
		if d.Kind == chaos.TermScheduler || d.Kind == chaos.TermCenter {
			sig, within = syscall.SIGTERM, 20*time.Second
		}
		d.Begin = time.Now()
		if !kill(d.Target, sig, within) {
			return
		}
		d.Exited = time.Now()
		sleep(d.For)
		restart(d.Target)
	case chaos.FreezeScheduler, chaos.FreezeCenter:
		d.Begin = time.Now()
		if err := l.signal(d.Target, syscall.SIGSTOP); err != nil {
			fail(err)
			return
		}
		sleep(d.For)
		fail(l.signal(d.Target, syscall.SIGCONT))
		d.End = time.Now()
	case chaos.KillEtcdMember, chaos.QuorumLoss:
		names := strings.Split(d.Target, "+")
		if d.Target == "leader" {
			k, err := l.EtcdLeader(ctx, cli)
			if err != nil {
				fail(err)
				return
			}
			names = []string{etcdName(k)}
			d.Detail = "the leader was " + etcdName(k)
		}
		d.Begin = time.Now()
		for _, n := range names {
			if !kill(n, syscall.SIGKILL, 5*time.Second) {
				return
			}
		}
		d.Exited = time.Now()
		sleep(d.For)
		restart(names...)
	case chaos.KillEdge:
		d.Begin = time.Now()
		if !kill(d.Target, syscall.SIGKILL, 5*time.Second) {
			return
		}
		d.Exited = time.Now()
		sleep(d.For)
		restart(d.Target)
	case chaos.CutLink:
		i := slices.Index(l.o.Cities, d.Target)
		d.Begin = time.Now()
		if err := l.SetCityLink(i, false); err != nil {
			fail(err)
			return
		}
		sleep(d.For)
		fail(l.SetCityLink(i, true))
		d.End = time.Now()
	case chaos.Apply:
		path, err := l.reweigh(d.Target, d.Weight, d.N)
		if err != nil {
			fail(err)
			return
		}
		o, at, err := l.schedctlUntil(ctx, 30*time.Second, "apply", "--yes", "-f", path)
		fail(err)
		d.Begin, d.End = at, time.Now()
		if lines := strings.Split(strings.TrimSpace(o), "\n"); err == nil && len(lines) > 0 {
			d.Detail = lines[len(lines)-1]
		}
	case chaos.Drain:
		// In force from the start of the call that drained it, up to the
		// start of the one that undrained it.
		_, at, err := l.schedctlUntil(ctx, 30*time.Second, "drain", "server", d.Target, "--reason", "chaos run")
		if err != nil {
			fail(err)
			return
		}
		d.Begin = at
		sleep(d.For)
		_, d.End, err = l.schedctlUntil(ctx, 30*time.Second, "undrain", "server", d.Target)
		fail(err)
	default:
		fail(fmt.Errorf("no action for %s", d.Kind))
	}
}

// schedctlUntil runs schedctl until it succeeds (the center or the quorum
// may be away), at most for limit, and returns when the call that
// succeeded started.
func (l *Lab) schedctlUntil(ctx context.Context, limit time.Duration, args ...string) (string, time.Time, error) {
	var out string
	var at time.Time
	var err error
	wait.UntilEvery(limit, 500*time.Millisecond, func() bool {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a frozen center holds a call
		defer cancel()
		at = time.Now()
		out, err = l.Schedctl(tctx, args...)
		return err == nil || ctx.Err() != nil
	})
	return out, at, err
}

// reweigh writes the lab's topology with server's weight changed, for an
// apply.
func (l *Lab) reweigh(server string, weight, n int) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	found := false
	for ni := range l.Topo.Nodes {
		for si := range l.Topo.Nodes[ni].Servers {
			if l.Topo.Nodes[ni].Servers[si].Name == server {
				l.Topo.Nodes[ni].Servers[si].Weight = topology.Weight(weight)
				found = true
			}
		}
	}
	if !found {
		return "", fmt.Errorf("no server %q in the topology", server)
	}
	data, err := topogen.YAML(l.Topo)
	if err != nil {
		return "", err
	}
	path := filepath.Join(l.o.Dir, fmt.Sprintf("chaos-topology-%d.yaml", n))
	return path, os.WriteFile(path, data, 0o644)
}

// appliedRevisions are the topology revisions applies made: the mod
// revisions of the history entries.
func (l *Lab) appliedRevisions(ctx context.Context, cli *clientv3.Client) (map[int64]bool, error) {
	out := map[int64]bool{}
	var err error
	wait.Until(20*time.Second, func() bool {
		var r *clientv3.GetResponse
		r, err = cli.Get(ctx, etcdPrefix+opstate.PrefixTopologyHistory, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err == nil {
			for _, kv := range r.Kvs {
				out[kv.ModRevision] = true
			}
		}
		return err == nil
	})
	if err != nil {
		return out, fmt.Errorf("topology history: %w", err)
	}
	return out, nil
}

// claimHistory is every change of the claims from startRev (the state then
// included, each claim at its own revision) to endRev, from a watch that
// starts at startRev.
func claimHistory(ctx context.Context, cli *clientv3.Client, startRev, endRev int64) ([]chaos.ClaimChange, error) {
	prefix := etcdPrefix + opstate.PrefixAllocClaims
	var out []chaos.ClaimChange
	decode := func(rev int64, key string, v []byte) error {
		if v == nil {
			out = append(out, chaos.ClaimChange{Revision: rev, Key: key})
			return nil
		}
		var c store.Claims
		if err := json.Unmarshal(v, &c); err != nil {
			return fmt.Errorf("claims at %s, revision %d: %w", key, rev, err)
		}
		out = append(out, chaos.ClaimChange{Revision: rev, Key: key, Claims: &c})
		return nil
	}
	r, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(startRev))
	if err != nil {
		return nil, fmt.Errorf("claims at revision %d: %w", startRev, err)
	}
	// The state at startRev, each claim at the revision it was committed:
	// replayed at startRev, a standby's claims committed before its
	// primary started taking STBs would look like a commit that ignored
	// the primary (the standby yields at its next solve, after startRev).
	for _, kv := range r.Kvs {
		if err := decode(kv.ModRevision, string(kv.Key), kv.Value); err != nil {
			return out, err
		}
	}
	if endRev <= startRev {
		return out, nil
	}
	wctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), 30*time.Second)
	defer cancel()
	wch := cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(startRev+1), clientv3.WithProgressNotify())
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case resp, ok := <-wch:
			if !ok {
				return out, fmt.Errorf("claims watch from revision %d ended before revision %d", startRev, endRev)
			}
			if err := resp.Err(); err != nil {
				return out, fmt.Errorf("claims watch: %w", err)
			}
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision > endRev {
					return out, nil
				}
				var v []byte
				if ev.Type == clientv3.EventTypePut {
					v = ev.Kv.Value
				}
				if err := decode(ev.Kv.ModRevision, string(ev.Kv.Key), v); err != nil {
					return out, err
				}
			}
			if resp.IsProgressNotify() && resp.Header.Revision >= endRev {
				return out, nil
			}
		case <-tick.C:
			_ = cli.RequestProgress(wctx) // a progress notice says the watch has caught up
		case <-wctx.Done():
			return out, fmt.Errorf("claims watch: not caught up with revision %d in 30s", endRev)
		}
	}
}

// capacities are the servers' capacities in the claims' units.
func (l *Lab) capacities() map[string]chaos.Capacity {
	out := map[string]chaos.Capacity{}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.Topo.Nodes {
		for _, sv := range n.Servers {
			c := chaos.CapacityOf(sv.Capacity.BandwidthMbps, sv.Capacity.TranscodeUnits)
			if c.Kbps == 0 {
				c.Kbps = math.Inf(1)
			}
			if c.Compute == 0 {
				c.Compute = math.Inf(1)
			}
			out[sv.Name] = c
		}
	}
	return out
}

// checkCameBack: every scheduler the run killed, stopped or froze
// registered again after it and announces its route.
func (l *Lab) checkCameBack(ctx context.Context, cli *clientv3.Client, done []chaos.Done) chaos.Invariant {
	var bad []string
	n := 0
	for _, d := range done {
		switch d.Kind {
		case chaos.KillScheduler, chaos.TermScheduler, chaos.FreezeScheduler, chaos.KillCenter, chaos.TermCenter, chaos.FreezeCenter:
		default:
			continue
		}
		n++
		if d.Err != "" || d.End.IsZero() {
			bad = append(bad, fmt.Sprintf("fault #%d %s %s: %s", d.N, d.Kind, d.Target, d.Err))
			continue
		}
		var last string
		if !wait.UntilEvery(45*time.Second, 250*time.Millisecond, func() bool {
			r, err := cli.Get(ctx, etcdPrefix+opstate.PrefixInstances+d.Target)
			if err != nil || len(r.Kvs) == 0 {
				last = fmt.Sprint("not registered ", err)
				return false
			}
			var in store.Instance
			if err := json.Unmarshal(r.Kvs[0].Value, &in); err != nil {
				last = err.Error()
				return false
			}
			last = fmt.Sprintf("state %s, announced %v (%s), started %s, updated %s", in.State, in.Announced, in.AnnounceWhy, in.StartedAt.Format("15:04:05.000"), in.UpdatedAt.Format("15:04:05.000"))
			back := in.UpdatedAt.After(d.End)
			if d.Kind != chaos.FreezeScheduler && d.Kind != chaos.FreezeCenter {
				back = in.StartedAt.After(d.Begin)
			}
			return back && in.Announced
		}) {
			bad = append(bad, fmt.Sprintf("fault #%d %s %s: not back and announcing 45 s after: %s", d.N, d.Kind, d.Target, last))
		}
	}
	// The members the run killed: each answers again, in the cluster.
	for k, ep := range l.EtcdEndpoints() {
		n++
		var last error
		if !wait.UntilEvery(45*time.Second, 250*time.Millisecond, func() bool {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			st, err := cli.Status(sctx, ep)
			if err == nil && st.Leader == 0 {
				err = fmt.Errorf("no leader")
			}
			last = err
			return err == nil
		}) {
			bad = append(bad, fmt.Sprintf("%s: not back in the cluster 45 s after the run: %v", etcdName(k+1), last))
		}
	}
	return chaos.Expect("every killed, stopped or frozen scheduler and etcd member came back (schedulers announcing again)", n, bad)
}

// checkProcesses: every daemon runs at the end (the run restarted each one
// it killed; any other exit is a crash), and no scheduler log holds a panic.
func (l *Lab) checkProcesses() chaos.Invariant {
	var bad []string
	names := l.Daemons()
	slices.Sort(names)
	for _, n := range names {
		if !l.Running(n) {
			bad = append(bad, n+" exited: "+lastLine(l.Log(n)))
		}
		if log := l.Log(n); strings.Contains(log, "panic:") || strings.Contains(log, "fatal error:") {
			bad = append(bad, n+" panicked (see its log)")
		}
	}
	return chaos.Expect("no daemon exited but the ones the schedule killed (each restarted)", len(names), bad)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return strconv.Quote(s)
}
