package allocator

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/prometheus/client_golang/prometheus"
)

// CenterRank is a center's rank in every region's route preference: after
// any city scheduler, since routers send a city's STBs to the center only
// when none of the city's schedulers announces.
const CenterRank = 1000

// Regions plans, in a central scheduler, the QoE sessions of the cities
// whose STBs reach it: a city's STB starts a planner for its city (an
// Allocator with the center's rank) that adopts the city's last published
// plan, shares the city's capacity through the city's claims, and stops
// once the STBs go back to the city (idle, or yielding to a city
// scheduler that takes them). Until a city's planner has a plan, and for
// other requests, the Gate decides.
type Regions struct {
	tmpl     Config
	boardFor func(region string) Board
	engine   func() *steer.Engine
	reg      prometheus.Registerer
	log      *slog.Logger

	want   chan string
	active atomic.Pointer[map[string]*Allocator] // running planners by region, copy on write
	mu     sync.Mutex
	all    map[string]*regionPlanner // every planner made, running or not
}

type regionPlanner struct {
	a      *Allocator
	cancel context.CancelFunc
	done   chan struct{}
}

// NewRegions builds the center's planners. cfg is every planner's
// configuration but Region (and Rank: CenterRank); cfg.Gate checks the
// tokens, also of requests no planner takes. boardFor gives a region's
// claim board for this instance; reg may be nil.
func NewRegions(cfg Config, boardFor func(region string) Board, engine func() *steer.Engine, reg prometheus.Registerer, log *slog.Logger) *Regions {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Rank, cfg.IdleNoReserve = CenterRank, true
	r := &Regions{tmpl: cfg.withDefaults(), boardFor: boardFor, engine: engine, reg: reg, log: log,
		want: make(chan string, 64), all: map[string]*regionPlanner{}}
	r.active.Store(&map[string]*Allocator{})
	return r
}

// Allocate hands a QoE request of a city's STB to the city's planner; it
// asks for one to be started when there is none.
func (r *Regions) Allocate(eng *steer.Engine, d *steer.Decision, req steer.Request, tok string) error {
	snap := eng.Snapshot()
	if d.Service < 0 || snap.Services[d.Service].Selection != Selection || d.ClientRegion < 0 {
		return r.tmpl.Gate.Allocate(eng, d, req, tok)
	}
	name := snap.Regions[d.ClientRegion].Name
	if a := (*r.active.Load())[name]; a != nil {
		return a.Allocate(eng, d, req, tok)
	}
	select {
	case r.want <- name:
	default: // asked already; the loop catches up
	}
	return r.tmpl.Gate.Allocate(eng, d, req, tok)
}

// Run starts planners as cities' STBs arrive and stops the idle ones,
// every period, until ctx ends; then it stops them all.
func (r *Regions) Run(ctx context.Context) error {
	t := time.NewTicker(r.tmpl.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.mu.Lock()
			for _, p := range r.all {
				if p.cancel != nil {
					p.cancel()
					<-p.done
				}
			}
			r.mu.Unlock()
			return nil
		case name := <-r.want:
			r.start(ctx, name)
		case <-t.C:
			r.reap()
		}
	}
}

// start runs region's planner unless it runs already.
func (r *Regions) start(ctx context.Context, region string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.all[region]
	if p != nil && p.cancel != nil {
		return
	}
	if p == nil {
		cfg := r.tmpl
		cfg.Region = region
		var reg prometheus.Registerer
		if r.reg != nil {
			reg = prometheus.WrapRegistererWith(prometheus.Labels{"region": region}, r.reg)
		}
		a, err := New(cfg, r.boardFor(region), r.engine, reg, r.log.With("region", region))
		if err != nil {
			r.log.Error("cannot plan a fallen city", "region", region, "err", err)
			return
		}
		p = &regionPlanner{a: a}
		r.all[region] = p
	}
	// The STB that asked counts: the first solve is not idle.
	p.a.lastSTB.Store(p.a.now().UnixNano())
	pctx, cancel := context.WithCancel(ctx)
	p.cancel, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		_ = p.a.Run(pctx)
	}()
	r.publishActive()
	r.log.Info("planning a city whose STBs reach the center", "region", region)
}

// reap stops the planners whose plan is idle: their city's STBs went back.
func (r *Regions) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := false
	for region, p := range r.all {
		if p.cancel == nil {
			continue
		}
		if pl := p.a.plan.Load(); pl != nil && pl.idle {
			p.cancel()
			<-p.done
			p.cancel = nil
			changed = true
			r.log.Info("stopped planning a city: its STBs went back to it", "region", region)
		}
	}
	if changed {
		r.publishActive()
	}
}

func (r *Regions) publishActive() {
	m := map[string]*Allocator{}
	for region, p := range r.all {
		if p.cancel != nil {
			m[region] = p.a
		}
	}
	r.active.Store(&m)
}

// Summaries are the running planners' plans, by region name.
func (r *Regions) Summaries() []store.QoEPlan {
	act := *r.active.Load()
	names := slices.Sorted(maps.Keys(act))
	var out []store.QoEPlan
	for _, name := range names {
		if q := act[name].Summary(); q != nil {
			out = append(out, *q)
		}
	}
	return out
}
