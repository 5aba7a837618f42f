// Package accesslog records every STB decision: Prometheus counters and the
// decision-latency histogram inline (cheap), and one JSON line per decision
// through a bounded queue drained by its own goroutine, so a slow log sink
// drops lines (counted) instead of slowing STB answers. Lines are encoded by
// hand into a reused buffer and written in batches: at tens of thousands of
// decisions per second a general-purpose logger costs more than the decision.
package accesslog

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/steer"
	"github.com/prometheus/client_golang/prometheus"
)

// Entry is one decision as the front ends saw it.
type Entry struct {
	Time   time.Time
	Proto  string // http | dns
	Client netip.Addr
	Host   string // service hostname or DNS qname
	Path   string // HTTP path; DNS qtype
	Result steer.Result
	Zone   string
	// ClientRegion is the region of the STB's zone ("" outside every zone).
	ClientRegion string
	Region       string // region of the chosen server ("" when none)
	Server       string
	Target       string // host:port or IP given to the STB
	Status       int    // HTTP status or DNS rcode
	Latency      time.Duration
}

// Options tune the recorder.
type Options struct {
	Queue int // lines buffered before dropping; default 8192
	// SampleEvery logs one decision in N (MISS and ERROR are not sampled);
	// 0 or 1 logs all.
	SampleEvery uint64
	// MaxErrorsPerSecond limits the MISS and ERROR lines, which sampling
	// does not thin out: spoofed UDP queries for names we do not serve
	// cost the sender nothing and must not become a log flood. The burst
	// is the same number. Default 50.
	MaxErrorsPerSecond int
}

// DefaultMaxErrorsPerSecond: see Options.MaxErrorsPerSecond.
const DefaultMaxErrorsPerSecond = 50

// Recorder is shared by the HTTP and DNS front ends of one scheduler.
type Recorder struct {
	out      io.Writer
	q        chan Entry
	sample   uint64
	n        atomic.Uint64
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	dropped  prometheus.Counter
	// errLimit bounds MISS and ERROR lines; what it refuses is counted by
	// result in limited (resolved once: no label lookup per line).
	errLimit              *limiter
	limited               *prometheus.CounterVec
	limitedMiss, limitedE prometheus.Counter
	tallies               tallies
}

// New creates a recorder writing JSON lines to out (nil: discard) and
// registers its metrics.
func New(reg prometheus.Registerer, out io.Writer, o Options) *Recorder {
	if out == nil {
		out = io.Discard
	}
	if o.Queue <= 0 {
		o.Queue = 8192
	}
	if o.MaxErrorsPerSecond <= 0 {
		o.MaxErrorsPerSecond = DefaultMaxErrorsPerSecond
	}
	r := &Recorder{
		out:    out,
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
	r.limited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anysched_accesslog_rate_limited_total", Help: "MISS and ERROR access-log lines not written because access_log.max_errors_per_second was reached, by result.",
	}, []string{"result"})
	r.errLimit = newLimiter(o.MaxErrorsPerSecond)
	r.limitedMiss = r.limited.WithLabelValues(steer.ResultMiss.String())
	r.limitedE = r.limited.WithLabelValues(steer.ResultError.String())
	reg.MustRegister(r.requests, r.latency, r.dropped, r.limited)
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
	client := e.ClientRegion
	if client == "" {
		client = "none"
	}
	r.tallies.record(client, e.Time, failedAnswer(&e))
	switch e.Result {
	case steer.ResultMiss, steer.ResultError:
		now := e.Time.UnixNano()
		if e.Time.IsZero() {
			now = time.Now().UnixNano()
		}
		if !r.errLimit.allow(now) {
			if e.Result == steer.ResultMiss {
				r.limitedMiss.Inc()
			} else {
				r.limitedE.Inc()
			}
			return
		}
	default:
		if r.sample > 1 && r.n.Add(1)%r.sample != 0 {
			return
		}
	}
	select {
	case r.q <- e:
	default:
		r.dropped.Inc()
	}
}

// Run writes queued lines until ctx ends, then flushes what is queued.
func (r *Recorder) Run(ctx context.Context) error {
	bw := bufio.NewWriterSize(r.out, 64<<10)
	buf := make([]byte, 0, 512)
	for {
		select {
		case e := <-r.q:
			buf = appendLine(buf[:0], &e)
			_, _ = bw.Write(buf)
			if len(r.q) == 0 { // idle: let the line out now
				_ = bw.Flush()
			}
		case <-ctx.Done():
			for {
				select {
				case e := <-r.q:
					buf = appendLine(buf[:0], &e)
					_, _ = bw.Write(buf)
				default:
					return bw.Flush()
				}
			}
		}
	}
}

// appendLine encodes one entry as a JSON object and a newline.
func appendLine(b []byte, e *Entry) []byte {
	b = append(b, `{"ts":"`...)
	b = e.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
	b = append(b, `","proto":`...)
	b = appendString(b, e.Proto)
	b = append(b, `,"client":`...)
	if e.Client.IsValid() {
		b = append(b, '"')
		b = e.Client.AppendTo(b)
		b = append(b, '"')
	} else {
		b = append(b, `""`...)
	}
	for _, f := range [...]struct{ k, v string }{
		{`,"host":`, e.Host}, {`,"path":`, e.Path}, {`,"result":`, e.Result.String()},
		{`,"zone":`, e.Zone}, {`,"client_region":`, e.ClientRegion}, {`,"region":`, e.Region}, {`,"server":`, e.Server}, {`,"target":`, e.Target},
	} {
		b = append(b, f.k...)
		b = appendString(b, f.v)
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"latency":`...)
	b = strconv.AppendInt(b, int64(e.Latency), 10) // nanoseconds
	return append(b, "}\n"...)
}

// appendString appends s as a JSON string; the fast path copies it as is.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q, _ := json.Marshal(s) // rare: escape properly (and replace invalid UTF-8)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
