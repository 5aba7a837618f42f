// Package accesslog records every STB decision: Prometheus counters and the
// decision-latency histogram inline (cheap), and one structured log line per
// decision through a bounded queue drained by its own goroutine, so a slow log
// sink drops lines (counted) instead of slowing STB answers.
package accesslog

import (
	"context"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/steer"
	"github.com/prometheus/client_golang/prometheus"
)

// Entry is one decision as the front ends saw it.
type Entry struct {
	Time    time.Time
	Proto   string // http | dns
	Client  netip.Addr
	Host    string // service hostname or DNS qname
	Path    string // HTTP path; DNS qtype
	Result  steer.Result
	Zone    string
	Region  string // region of the chosen server ("" when none)
	Server  string
	Target  string // host:port or IP given to the STB
	Status  int    // HTTP status or DNS rcode
	Latency time.Duration
}

// Options tune the recorder.
type Options struct {
	Queue int // lines buffered before dropping; default 8192
	// SampleEvery logs one decision in N (errors always); 0 or 1 logs all.
	SampleEvery uint64
}

// Recorder is shared by the HTTP and DNS front ends of one scheduler.
type Recorder struct {
	log      *slog.Logger
	q        chan Entry
	sample   uint64
	n        atomic.Uint64
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	dropped  prometheus.Counter
}

// New creates a recorder and registers its metrics.
func New(reg prometheus.Registerer, log *slog.Logger, o Options) *Recorder {
	if o.Queue <= 0 {
		o.Queue = 8192
	}
	r := &Recorder{
		log:    log.With("component", "access"),
		q:      make(chan Entry, o.Queue),
		sample: max(o.SampleEvery, 1),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anysched_requests_total", Help: "STB requests answered, by protocol, region of the chosen server, and result type.",
		}, []string{"proto", "region", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "anysched_decision_duration_seconds", Help: "Time from a parsed request to its answer being ready, by protocol.",
			Buckets: []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 1e-2},
		}, []string{"proto"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anysched_accesslog_dropped_total", Help: "Access-log lines dropped because the log queue was full.",
		}),
	}
	reg.MustRegister(r.requests, r.latency, r.dropped)
	return r
}

// Record counts e and queues its log line; it never blocks.
func (r *Recorder) Record(e Entry) {
	region := e.Region
	if region == "" {
		region = "none"
	}
	r.requests.WithLabelValues(e.Proto, region, e.Result.String()).Inc()
	r.latency.WithLabelValues(e.Proto).Observe(e.Latency.Seconds())
	if r.sample > 1 && e.Result != steer.ResultError && e.Result != steer.ResultMiss && r.n.Add(1)%r.sample != 0 {
		return
	}
	select {
	case r.q <- e:
	default:
		r.dropped.Inc()
	}
}

// Run writes queued lines until ctx ends, then flushes what is queued.
func (r *Recorder) Run(ctx context.Context) error {
	for {
		select {
		case e := <-r.q:
			r.write(e)
		case <-ctx.Done():
			for {
				select {
				case e := <-r.q:
					r.write(e)
				default:
					return nil
				}
			}
		}
	}
}

func (r *Recorder) write(e Entry) {
	r.log.LogAttrs(context.Background(), slog.LevelInfo, "decision",
		slog.Time("ts", e.Time),
		slog.String("proto", e.Proto),
		slog.String("client", e.Client.String()),
		slog.String("host", e.Host),
		slog.String("path", e.Path),
		slog.String("result", e.Result.String()),
		slog.String("zone", e.Zone),
		slog.String("region", e.Region),
		slog.String("server", e.Server),
		slog.String("target", e.Target),
		slog.Int("status", e.Status),
		slog.Duration("latency", e.Latency),
	)
}
