package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/testbed/chaos"
	"github.com/anysched/anysched/internal/testbed/wait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// checkRun checks the invariants over what the run saw: the STBs'
// answers and edges, the schedulers' snapshot revisions and their
// freshness, the claims in the store from startRev on, and that every
// daemon came back.
func (l *Lab) checkRun(ctx context.Context, cli *clientv3.Client, rep *chaos.Report, targets chaos.Targets, samples []chaos.Sample, startRev int64) {
	primaries := make([]string, len(l.o.Cities))
	for i, c := range l.o.Cities {
		primaries[i] = PrimaryID(c)
	}
	answers, windows := chaos.CheckAnswers(rep.Requests, rep.Done, l.o.Cities, primaries, 2*time.Second)
	edges, ews := chaos.CheckEdges(rep.Requests, rep.Done, targets.Edges, l.o.Cities)
	rep.Windows, rep.Edges = windows, ews
	rep.Invariants = append(rep.Invariants, answers, edges)
	rep.Invariants = append(rep.Invariants, l.checkRevisions(ctx, cli, samples))
	rep.Invariants = append(rep.Invariants, chaos.CheckFreshness(samples, rep.Done, l.cityOfInstance))
	rep.Invariants = append(rep.Invariants, l.checkClaims(ctx, cli, startRev))
	rep.Invariants = append(rep.Invariants, l.checkCameBack(ctx, cli, rep.Done), l.checkProcesses())
}

// checkRevisions: the schedulers answered from revisions that applies
// made.
func (l *Lab) checkRevisions(ctx context.Context, cli *clientv3.Client, samples []chaos.Sample) chaos.Invariant {
	applied, err := l.appliedRevisions(ctx, cli)
	revs := chaos.CheckRevisions(samples, applied)
	if err != nil {
		revs.Bad++
		revs.Examples = append(revs.Examples, err.Error())
	}
	return revs
}

// cityOfInstance is the index of the city whose scheduler instance is, -1
// for the center.
func (l *Lab) cityOfInstance(instance string) int {
	for i, c := range l.o.Cities {
		if strings.HasPrefix(instance, c+"-") {
			return i
		}
	}
	return -1
}

// checkClaims: the claims the store held from startRev to now never add
// up above a server's capacity.
func (l *Lab) checkClaims(ctx context.Context, cli *clientv3.Client, startRev int64) chaos.Invariant {
	endRev := int64(0)
	if r, err := cli.Get(ctx, etcdPrefix+keyspace.KeyTopologyCurrent); err == nil {
		endRev = r.Header.Revision
	}
	changes, err := claimHistory(ctx, cli, startRev, endRev)
	claims := chaos.CheckClaims(changes, l.capacities(), 5*time.Second) // the lab's 2 s period: 2 periods and a second
	if err != nil {
		claims.Bad++
		claims.Examples = append(claims.Examples, err.Error())
	}
	claims.Notes = append(claims.Notes, fmt.Sprintf("store revisions %d..%d", startRev, endRev))
	return claims
}

// appliedRevisions are the topology revisions applies made: the mod
// revisions of the history entries.
func (l *Lab) appliedRevisions(ctx context.Context, cli *clientv3.Client) (map[int64]bool, error) {
	out := map[int64]bool{}
	var err error
	wait.Until(20*time.Second, func() bool {
		var r *clientv3.GetResponse
		r, err = cli.Get(ctx, etcdPrefix+keyspace.PrefixTopologyHistory, clientv3.WithPrefix(), clientv3.WithKeysOnly())
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
	prefix := etcdPrefix + keyspace.PrefixAllocClaims
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
			region := keyspace.ProvinceRegion
			if i := l.cityOfInstance(d.Target); i >= 0 {
				region = l.o.Cities[i]
			}
			r, err := cli.Get(ctx, etcdPrefix+keyspace.Instance(region, d.Target))
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
