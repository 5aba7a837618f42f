package health

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
)

// AgentOptions configure a health agent: the healthcheck daemon, or the
// checker embedded in a regional scheduler.
type AgentOptions struct {
	CheckerID string
	// Region is the region whose servers to probe, the region the
	// checker's etcd identity is bound to; keyspace.ProvinceRegion
	// (center) probes every region's, as a province-wide checker.
	Region  string
	Servers []string // only these of them (names), when set
	Checker CheckerOptions
}

// Agent probes the servers it is responsible for and publishes its verdicts.
// Its targets follow the topology: call SetSnapshot on every swap.
type Agent struct {
	Checker   *Checker
	Publisher *Publisher
	opts      AgentOptions
	log       *slog.Logger

	mu      sync.Mutex
	where   map[string][2]string // server -> node, region (for the up gauge)
	upGauge *prometheus.GaugeVec
}

// NewAgent builds an agent publishing under prefix through cli.
func NewAgent(cli *clientv3.Client, prefix string, o AgentOptions, reg prometheus.Registerer, log *slog.Logger) (*Agent, error) {
	if o.CheckerID == "" {
		return nil, errors.New("health: agent: checker id required")
	}
	if o.Region == "" {
		// Its verdicts count only for the region its keys name.
		return nil, errors.New("health: agent: region required (" + keyspace.ProvinceRegion + " for a province-wide checker)")
	}
	a := &Agent{opts: o, log: log.With("component", "health-agent", "checker", o.CheckerID), where: map[string][2]string{}}
	a.upGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "anysched_health_server_up", Help: "This checker's verdict on a server: 1 up, 0 down."}, []string{"server", "node", "region"})
	a.Publisher = &Publisher{Client: cli, Prefix: prefix, TTL: 3 * max(o.Checker.Interval, time.Second), Logger: log,
		Info: avail.CheckerInfo{ID: o.CheckerID, Region: o.Region, StartedAt: time.Now().UTC()}}
	if reg != nil {
		reg.MustRegister(a.upGauge)
		a.Publisher.Register(reg)
	}
	co := o.Checker
	co.ID = o.CheckerID
	co.Registerer = reg
	co.OnReport = a.onReport
	co.OnRemove = func(server string) {
		a.Publisher.Forget(context.Background(), server)
		a.mu.Lock()
		if w, ok := a.where[server]; ok {
			a.upGauge.DeleteLabelValues(server, w[0], w[1])
			delete(a.where, server)
		}
		a.mu.Unlock()
	}
	var err error
	if a.Checker, err = NewChecker(co, &Prober{Timeout: co.Timeout}, log); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Agent) onReport(r Report) {
	a.Publisher.Publish(r)
	a.mu.Lock()
	w, ok := a.where[r.Server]
	a.mu.Unlock()
	if ok {
		v := 0.0
		if r.Up {
			v = 1
		}
		a.upGauge.WithLabelValues(r.Server, w[0], w[1]).Set(v)
	}
}

// SetSnapshot points the agent at the servers of its region (or its list) in snap.
func (a *Agent) SetSnapshot(snap *topology.Snapshot) {
	var targets []Target
	where := map[string][2]string{}
	for _, sv := range snap.Servers {
		if len(a.opts.Servers) > 0 && !slices.Contains(a.opts.Servers, sv.Name) {
			continue
		}
		// A server of another region is not probed: nobody would count
		// the verdict.
		if sv.Region < 0 || (a.opts.Region != keyspace.ProvinceRegion && snap.Regions[sv.Region].Name != a.opts.Region) {
			continue
		}
		targets = append(targets, Target{Server: sv.Name, Address: sv.Addr, Address6: sv.Addr6, URL: sv.HealthURL, CapacityMbps: sv.Capacity.BandwidthMbps, Policy: sv.Health})
		where[sv.Name] = [2]string{snap.Nodes[sv.Node].Name, snap.Regions[sv.Region].Name}
	}
	a.mu.Lock()
	a.where = where
	a.mu.Unlock()
	a.Checker.SetTargets(targets)
	a.Publisher.SetTargetCount(len(targets))
	if len(targets) == 0 {
		a.log.Warn("no servers to probe in this topology", "region", a.opts.Region, "servers", a.opts.Servers, "revision", snap.Revision)
	}
}

// Run probes and publishes until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.Checker.Run(gctx) })
	g.Go(func() error { return a.Publisher.Run(gctx) })
	return g.Wait()
}
