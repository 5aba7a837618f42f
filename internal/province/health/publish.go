package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Keys under the store prefix:
//
//	health/<region>/<checker>/<server>  a checker's Report on a server, under the checker's lease
//	checkers/<region>/<checker>         CheckerInfo, under the same lease: the checker is alive
//	drain/<kind>/<name>                 an operator's drain (no lease: it survives restarts)
//
// Region and checker come first so that one etcd permission
// (health/<region>/<checker>/) confines a checker to its own verdicts on
// its own region, which is what lets the mergers trust the region.
func reportKey(prefix, region, checker, server string) string {
	return prefix + keyspace.Verdict(region, checker, server)
}

func checkerKey(prefix, region, checker string) string {
	return prefix + keyspace.Checker(region, checker)
}

// Publisher writes one checker's reports to etcd under one lease of about
// three probe intervals, so a checker that dies takes its verdicts with it.
// Reports queue per server (the latest wins), so a slow or absent etcd loses
// nothing but intermediate states: when it returns, the current verdicts go out.
type Publisher struct {
	Client *clientv3.Client
	Prefix string
	// Info is the liveness record; Info.Region (the region checked, or
	// keyspace.ProvinceRegion) places the keys, and must be the region
	// the checker's etcd identity names, or etcd refuses the writes.
	Info   avail.CheckerInfo
	TTL    time.Duration // lease TTL; about 3 probe intervals, at least 2s
	Logger *slog.Logger

	mu      sync.Mutex
	pending map[string]Report
	last    map[string]Report // last written per server, rewritten under a new lease
	kick    chan struct{}
	writes  prometheus.Counter
}

// Register adds the publisher's metrics.
func (p *Publisher) Register(reg prometheus.Registerer) {
	p.writes = prometheus.NewCounter(prometheus.CounterOpts{Name: "anysched_health_publish_writes_total", Help: "Verdict writes to etcd (reports are written only when they change meaningfully, plus a slow refresh)."})
	reg.MustRegister(p.writes)
}

func (p *Publisher) init() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending == nil {
		p.pending, p.last, p.kick = map[string]Report{}, map[string]Report{}, make(chan struct{}, 1)
	}
}

// Publish queues r; it never blocks.
func (p *Publisher) Publish(r Report) {
	p.init()
	p.mu.Lock()
	p.pending[r.Server] = r
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// SetTargetCount updates the target count in the checker's liveness record.
func (p *Publisher) SetTargetCount(n int) {
	p.init() // the snapshot may arrive before Run has started
	p.mu.Lock()
	p.Info.Targets = n
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Forget removes a server's verdict (it left the checker's targets).
func (p *Publisher) Forget(ctx context.Context, server string) {
	p.init()
	p.mu.Lock()
	delete(p.pending, server)
	delete(p.last, server)
	p.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, _ = p.Client.Delete(cctx, reportKey(p.Prefix, p.Info.Region, p.Info.ID, server))
}

// Run keeps the lease alive and writes queued reports until ctx ends; then it
// revokes the lease so the checker's verdicts disappear at once.
func (p *Publisher) Run(ctx context.Context) error {
	if p.Info.ID == "" || p.Info.Region == "" {
		return fmt.Errorf("health: publisher: checker id %q and region %q are both required: they place its keys", p.Info.ID, p.Info.Region)
	}
	p.init()
	log := p.Logger.With("component", "health-publisher", "checker", p.Info.ID)
	ttl := max(int64(p.TTL/time.Second), 2)
	var lease clientv3.LeaseID
	var keepalive <-chan *clientv3.LeaseKeepAliveResponse
	var kaCancel context.CancelFunc = func() {}
	defer func() { kaCancel() }()
	backoff := 100 * time.Millisecond
	failing := false
	infoWritten := avail.CheckerInfo{}
	for {
		err := func() error {
			if lease == 0 {
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				g, err := p.Client.Grant(cctx, ttl)
				cancel()
				if err != nil {
					return err
				}
				kaCancel()
				var kctx context.Context
				kctx, kaCancel = context.WithCancel(ctx)
				if keepalive, err = p.Client.KeepAlive(kctx, g.ID); err != nil {
					return err
				}
				lease = g.ID
				infoWritten = avail.CheckerInfo{}
				// A new lease: everything this checker said must be said again.
				p.mu.Lock()
				for s, r := range p.last {
					if _, queued := p.pending[s]; !queued {
						p.pending[s] = r
					}
				}
				p.mu.Unlock()
			}
			p.mu.Lock()
			info := p.Info
			batch := p.pending
			p.pending = map[string]Report{}
			p.mu.Unlock()
			if info != infoWritten {
				b, _ := json.Marshal(info)
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				_, err := p.Client.Put(cctx, checkerKey(p.Prefix, info.Region, info.ID), string(b), clientv3.WithLease(lease))
				cancel()
				if err != nil {
					p.requeue(batch)
					return err
				}
				infoWritten = info
			}
			if err := p.write(ctx, lease, batch); err != nil {
				p.requeue(batch)
				return err
			}
			return nil
		}()
		switch {
		case ctx.Err() != nil:
			p.revoke(lease)
			return nil
		case err != nil:
			if !failing {
				log.Warn("publishing verdicts failed; they stay queued", "err", err)
			}
			failing = true
			if errors.Is(err, errLeaseLost) {
				lease = 0
			}
			select {
			case <-ctx.Done():
				p.revoke(lease)
				return nil
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 2*time.Second)
			continue
		}
		if failing {
			log.Info("publishing verdicts again")
		}
		failing, backoff = false, 100*time.Millisecond
		select {
		case <-ctx.Done():
			p.revoke(lease)
			return nil
		case <-p.kick:
		case _, ok := <-keepalive:
			if !ok {
				log.Warn("lease keepalive ended; granting a new lease")
				lease = 0
			}
		}
	}
}

var errLeaseLost = errors.New("lease lost")

// write puts a batch in transactions of at most 64 operations (etcd's
// default limit is 128).
func (p *Publisher) write(ctx context.Context, lease clientv3.LeaseID, batch map[string]Report) error {
	ops := make([]clientv3.Op, 0, 64)
	done := make([]Report, 0, 64)
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := p.Client.Txn(cctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			if isLeaseNotFound(err) {
				return errLeaseLost
			}
			return err
		}
		if p.writes != nil {
			p.writes.Add(float64(len(ops)))
		}
		p.mu.Lock()
		for _, r := range done {
			p.last[r.Server] = r
		}
		p.mu.Unlock()
		ops, done = ops[:0], done[:0]
		return nil
	}
	for _, r := range batch {
		b, _ := json.Marshal(r)
		ops = append(ops, clientv3.OpPut(reportKey(p.Prefix, p.Info.Region, p.Info.ID, r.Server), string(b), clientv3.WithLease(lease)))
		done = append(done, r)
		if len(ops) == 64 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// requeue puts back what was not written, unless a newer report arrived.
func (p *Publisher) requeue(batch map[string]Report) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s, r := range batch {
		if _, newer := p.pending[s]; !newer {
			p.pending[s] = r
		}
	}
}

func (p *Publisher) revoke(lease clientv3.LeaseID) {
	if lease == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = p.Client.Revoke(ctx, lease)
}

func isLeaseNotFound(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound)
}
