package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"golang.org/x/sync/errgroup"
)

// Instances of the bench's province: two schedulers a city (the primary,
// rank 0, takes the STBs and plans; the standby, rank 1, idles with its
// arrival reserve) and two centers.
func primary(c *city) string { return c.name + "-1" }
func standby(c *city) string { return c.name + "-2" }

const capacityKbps = topogen.BandwidthMbps * 1000

// claimsWriter: every scheduler of a city commits its capacity claims every
// alloc.period through the real store.ClaimBoard (read the peers, commit
// against their revision, once more on a conflict): the primary its plan's
// use of each server plus the free capacity, the standby the arrival
// reserve (10%).
func claimsWriter(b *bench) (*writer, error) {
	w := &writer{name: "capacity claims"}
	cli, err := b.client(w)
	if err != nil {
		return nil, err
	}
	st := store.New(cli, b.prefix, b.log)
	type inst struct {
		board *store.ClaimBoard
		c     *city
		rank  int
		rng   *rand.Rand
	}
	var insts []inst
	for i := range b.cities {
		c := &b.cities[i]
		for rank, id := range []string{primary(c), standby(c)} {
			insts = append(insts, inst{board: &store.ClaimBoard{Store: st, Region: c.name, Instance: id, TTL: max(10*time.Second, b.clock.Wall(3*b.cfg.Period))},
				c: c, rank: rank, rng: rand.New(rand.NewPCG(b.cfg.Seed, uint64(c.index*2+rank)))})
		}
	}
	w.run = func(ctx context.Context) error {
		var wg sync.WaitGroup
		for _, in := range insts {
			wg.Go(func() {
				perServer := float64(in.c.viewers) / float64(max(1, len(in.c.servers))) * 3000
				b.clock.every(ctx, b.cfg.Period, time.Duration(in.rng.Int64N(int64(b.cfg.Period))), &w.late, func(ctx context.Context) {
					claims := store.Claims{Rank: in.rank, Idle: in.rank > 0, Made: b.clock.Now().UnixMilli(), Servers: map[string]store.Claim{}}
					if !claims.Idle {
						claims.Sessions = in.c.viewers
					}
					for _, s := range in.c.servers {
						if claims.Idle {
							claims.Servers[s] = store.Claim{BandwidthKbps: 0.1 * capacityKbps, Compute: 0.1 * topogen.TranscodeUnits}
							continue
						}
						use := perServer * (0.8 + 0.4*in.rng.Float64())
						claims.Servers[s] = store.Claim{BandwidthKbps: use + (0.9*capacityKbps - use), Compute: use / capacityKbps * topogen.TranscodeUnits * (1 + 0.1*in.rng.Float64())}
					}
					for range 2 {
						cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
						_, rev, err := in.board.Peers(cctx)
						ok := false
						if err == nil {
							ok, err = in.board.Commit(cctx, claims, rev)
						}
						cancel()
						if err != nil {
							w.fail(ctx, err)
							return
						}
						if ok {
							return
						}
					}
				})
				rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = in.board.Release(rctx)
				cancel()
			})
		}
		wg.Wait()
		return nil
	}
	return w, nil
}

// registrationWriter: every scheduler keeps its record under instances/
// with the real store.Registration (a lease refresh every 2 s; a put when
// the record changed, a city's answer counts alone every 10 s, as
// internal/wiring/app has it).
// The records are what the schedulers publish: a primary's carries its QoE
// plan's summary with the drain forecasts (one per server and node of its
// city, renewed every period), its answers to its city's STBs; a standby's
// an idle plan; a center's its answers by region.
func registrationWriter(b *bench) (*writer, error) {
	w := &writer{name: "instance records"}
	cli, err := b.client(w)
	if err != nil {
		return nil, err
	}
	st := store.New(cli, b.prefix, b.log)
	started := b.clock.Now().UTC()
	var regs []*store.Registration
	for i := range b.cities {
		c := &b.cities[i]
		for rank, id := range []string{primary(c), standby(c)} {
			rec := &record{b: b, c: c, active: rank == 0, rng: rand.New(rand.NewPCG(b.cfg.Seed^0x5eed, uint64(i*2+rank))),
				in: store.Instance{ID: id, Role: instance.Regional, Region: c.name, Version: "v1.0.0", Hostname: id + ".sched.example",
					AdminAddress: fmt.Sprintf("10.0.%d.%d:9090", i, rank+1), SnapshotRevision: 42, State: instance.Ready, Announced: true,
					Announces: topogen.ServiceIP + "/32", StartedAt: started,
					Peers: []store.Peer{{Address: fmt.Sprintf("10.1.%d.1", i), ASN: 64512, State: "established"}, {Address: fmt.Sprintf("10.1.%d.2", i), ASN: 64512, State: "established"}}}}
			regs = append(regs, &store.Registration{Store: st, TTL: 10 * time.Second, Interval: b.clock.Wall(b.cfg.Registration),
				Refresh: b.clock.Wall(b.cfg.RegistrationRefresh), Current: rec.current})
		}
	}
	for k := 1; k <= 2; k++ {
		id := fmt.Sprintf("center-%d", k)
		rec := &record{b: b, rng: rand.New(rand.NewPCG(b.cfg.Seed^0xce, uint64(k))),
			in: store.Instance{ID: id, Role: instance.Central, Version: "v1.0.0", Hostname: id + ".sched.example", AdminAddress: fmt.Sprintf("10.0.99.%d:9090", k),
				SnapshotRevision: 42, State: instance.Ready, Announced: true, Announces: topogen.CenterPrefix, StartedAt: started,
				Peers: []store.Peer{{Address: "10.1.99.1", ASN: 64512, State: "established"}}}}
		for _, c := range b.cities {
			rec.in.Traffic = append(rec.in.Traffic, store.RegionTraffic{ClientRegion: c.name, Answered: uint64(rec.rng.IntN(5000)), RunStart: started, Last: started})
		}
		regs = append(regs, &store.Registration{Store: st, TTL: 10 * time.Second, Interval: b.clock.Wall(b.cfg.Registration), Current: rec.current})
	}
	w.run = func(ctx context.Context) error {
		g, gctx := errgroup.WithContext(ctx)
		for _, r := range regs {
			g.Go(func() error { return r.Run(gctx) })
		}
		return g.Wait()
	}
	return w, nil
}

// record is one scheduler's registration as it changes: the QoE summary
// every period, the answers and the snapshot's age at every refresh.
type record struct {
	b      *bench
	c      *city // nil: a center
	active bool
	rng    *rand.Rand
	mu     sync.Mutex
	in     store.Instance
	period int64 // of the summary in in.QoE
}

func (r *record) current() store.Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.b.clock.Now()
	r.in.SnapshotAge = r.rng.Float64() * 2
	if r.c == nil {
		return r.in
	}
	if p := now.UnixNano() / int64(r.b.cfg.Period); p != r.period || r.in.QoE == nil {
		r.period = p
		r.in.QoE = r.summary(now)
	}
	if r.active {
		// Its city's STBs ask about once a minute each.
		n := uint64(float64(r.c.viewers) * r.b.cfg.Registration.Seconds() / 60)
		if len(r.in.Traffic) == 0 {
			r.in.Traffic = []store.RegionTraffic{{ClientRegion: r.c.name, RunStart: r.in.StartedAt}}
		}
		r.in.Traffic[0].Answered += n
		r.in.Traffic[0].Last = now.UTC()
	}
	return r.in
}

func (r *record) summary(now time.Time) *store.QoEPlan {
	c := r.c
	q := &store.QoEPlan{Region: c.name, MadeAt: now.UTC(), Peers: 1, CapacityKbps: float64(len(c.servers)) * capacityKbps}
	if !r.active {
		q.Idle, q.HeldKbps = true, 0.1*q.CapacityKbps
		return q
	}
	q.Sessions, q.Planned = c.viewers, c.viewers
	q.Fallback = c.viewers / 100
	q.Objective = float64(c.viewers) * (4 + 0.01*r.rng.Float64())
	q.Gap, q.AtDesired = 0.005+0.004*r.rng.Float64(), 0.9+0.05*r.rng.Float64()
	q.Switches, q.Drops = r.rng.IntN(c.viewers/100+1), r.rng.IntN(c.viewers/200+1)
	q.HeldKbps = 0.9 * q.CapacityKbps
	per := float64(c.viewers) / float64(max(1, len(c.servers)))
	forecast := func(kind opstate.DrainKind, name string, n int) store.DrainForecast {
		same := int(float64(n) * (0.6 + 0.3*r.rng.Float64()))
		lower := (n - same) * 9 / 10
		return store.DrainForecast{Kind: kind, Name: name, Sessions: n, SameRung: same, LowerRung: lower, ToFallback: n - same - lower,
			ObjectiveDelta: -float64(n) * (0.1 + 0.2*r.rng.Float64())}
	}
	nodeSessions := make([]int, len(c.nodes))
	for i, s := range c.servers {
		n := int(per * (0.8 + 0.4*r.rng.Float64()))
		nodeSessions[c.nodeOf[i]] += n
		q.Drain = append(q.Drain, forecast(opstate.DrainServer, s, n))
	}
	for i, nd := range c.nodes {
		q.Drain = append(q.Drain, forecast(opstate.DrainNode, nd, nodeSessions[i]))
	}
	return q
}

// stateWriter: every city's primary publishes its plan for the next
// planner every alloc.state_interval through store.PutAllocState (or, with
// -state-format legacy, the format it replaced), with its viewers moving
// on between two publications as churn says.
func stateWriter(b *bench) (*writer, error) {
	w := &writer{name: "plan state"}
	cli, err := b.client(w)
	if err != nil {
		return nil, err
	}
	st := store.New(cli, b.prefix, b.log)
	put := st.PutAllocState
	if b.cfg.StateFormat == "legacy" {
		put = func(ctx context.Context, region string, s *store.AllocState) error {
			return putLegacyState(ctx, cli, b.prefix, region, s)
		}
	}
	w.run = func(ctx context.Context) error {
		var wg sync.WaitGroup
		for i := range b.cities {
			c := &b.cities[i]
			if len(b.cfg.StateCities) > 0 && !slices.Contains(b.cfg.StateCities, c.name) {
				continue
			}
			wg.Go(func() {
				now := b.clock.Now()
				p := newPlanCity(c, b.cfg.Seed, now)
				phase := time.Duration(p.rng.Int64N(int64(b.cfg.StateInterval)))
				b.clock.every(ctx, b.cfg.StateInterval, phase, &w.late, func(ctx context.Context) {
					now := b.clock.Now()
					p.step(now, b.cfg.Churn)
					s := p.state(primary(c), now, 42)
					// As the allocator publishes (Allocator.etcdTimeout): a
					// publication that takes longer fails, and the next one
					// starts a generation.
					pctx, cancel := context.WithTimeout(ctx, min(b.cfg.Period/4, 2*time.Second))
					began := time.Now()
					err := put(pctx, c.name, s)
					w.took(c.name, time.Since(began))
					cancel()
					if err != nil {
						w.fail(ctx, err)
					}
				})
			})
		}
		wg.Wait()
		return nil
	}
	return w, nil
}

// auditWriter: the operators' audited calls (drains, applies, drills) at
// -audit-per-hour, as a Poisson process, through the real audit.Trail with
// the center's defaults (keep 10,000, 90 days).
func auditWriter(b *bench) (*writer, error) {
	w := &writer{name: "audit trail"}
	cli, err := b.client(w)
	if err != nil {
		return nil, err
	}
	trail := audit.New(cli, b.prefix, audit.Options{Keep: 10000, MaxAge: 90 * 24 * time.Hour}, nil, b.log)
	rng := rand.New(rand.NewPCG(b.cfg.Seed, 0xa0d1))
	methods := []string{"/anysched.v1.Admin/Drain", "/anysched.v1.Admin/Undrain", "/anysched.v1.Admin/Apply", "/anysched.v1.Admin/Drill"}
	w.run = func(ctx context.Context) error {
		if b.cfg.AuditPerHour <= 0 {
			<-ctx.Done()
			return nil
		}
		mean := float64(time.Hour) / b.cfg.AuditPerHour
		for {
			wait := time.Duration(rng.ExpFloat64() * mean)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(b.clock.Wall(wait)):
			}
			c := b.cities[rng.IntN(len(b.cities))]
			rec := audit.Record{At: b.clock.Now(), Identity: "operator-" + fmt.Sprint(rng.IntN(5)), Role: "operator", Peer: "10.0.9.5:51234",
				Method: methods[rng.IntN(len(methods))], Target: "server " + c.servers[rng.IntN(len(c.servers))], Code: "OK", Revision: 42}
			if err := trail.Write(ctx, rec); err != nil {
				w.fail(ctx, err)
			}
		}
	}
	return w, nil
}
