// Package accesslog records every STB decision: Prometheus counters, the
// decision-latency histogram and the per-region answer tallies inline, and
// one JSON line per decision, written by a goroutine of its own (Run).
//
// Record runs on the serving goroutines, so it is cheap and never blocks:
// the metric series and tally of a (proto, region, client region, result)
// are resolved once and cached (no label lookup per request), and the entry
// is copied into one of a few mutex-guarded queue shards picked at random,
// so concurrent callers rarely meet on a lock. Nothing is allocated. A full
// queue drops the line and counts it (anysched_accesslog_dropped_total): a
// slow log sink loses lines, never slows an answer.
//
// The writer swaps every shard's buffer for an empty one at one instant
// (all shard locks held, so one caller's lines keep their order across
// batches), merges the shards
// by decision time, encodes the lines by hand into one reused buffer and
// writes the batch with one Write (per 256 KiB): at hundreds of thousands of
// decisions per second a general-purpose logger, or a write per line, costs
// more than the decision. It wakes when a shard is half full, and at least every
// Options.FlushInterval while lines wait.
//
// A file sink (NewFile) is opened for appending; Reopen switches to a new
// file at the same path after logrotate has renamed the old one. Each batch
// goes whole to one file or the other, so no line is lost or written twice.
package accesslog

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/prometheus/client_golang/prometheus"
)

// Entry is one decision as the front ends saw it. Its strings are kept
// until the line is written, so they must be ordinary immutable strings, not
// views of a buffer the caller reuses.
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
	// Rule is the rights rule that decided ("2 (derby)"), if one did.
	Rule string
	// Steering is a content steering manifest's outcome (pinned, stay,
	// moved, forced, deferred, unsteerable) and From the server the
	// player was on; both "" for every other answer. Server is then the
	// pathway the manifest puts first.
	Steering, From string
	// Family is the address family the STB asked for (HTTP: its own; DNS:
	// the record type's), TargetFamily that of the address given (the
	// other one under family_fallback other); FamilyAny: none.
	Family, TargetFamily steer.Family
}

// Options tune the recorder. The yaml tags are the access_log section's
// keys (Config); FlushInterval is the program's (yaml:"-").
type Options struct {
	// Queue is how many lines wait for the writer before new ones are
	// dropped; default 8192. They are split over a few shards (one per P,
	// at most 16), and the writer holds as many again while it writes:
	// memory is about 2 * Queue * 200 bytes. Where the scheduler runs on
	// one core the writer runs only when the serving loop yields, so the
	// queue should hold a few scheduler slices' worth of decisions
	// (10 ms each).
	Queue int `yaml:"queue"`
	// SampleEvery logs one decision in N (MISS and ERROR are not sampled);
	// 0 or 1 logs all.
	SampleEvery uint64 `yaml:"sample_every"`
	// MaxErrorsPerSecond limits the MISS and ERROR lines, which sampling
	// does not thin out: spoofed UDP queries for names we do not serve
	// cost the sender nothing and must not become a log flood. The burst
	// is the same number. Default 50.
	MaxErrorsPerSecond int `yaml:"max_errors_per_second"`
	// FlushInterval is the longest a line waits for the writer when the
	// queue stays under half full; default 100ms.
	FlushInterval time.Duration `yaml:"-"`
}

// Defaults for Options.
const (
	DefaultQueue              = 8192
	DefaultMaxErrorsPerSecond = 50
	DefaultFlushInterval      = 100 * time.Millisecond
)

// Recorder is shared by the HTTP and DNS front ends of one scheduler.
type Recorder struct {
	series  seriesCache
	tallies tallies
	// q and out are nil when lines are off (New with a nil writer).
	q             *queue
	out           *sink
	sample        uint64
	n             atomic.Uint64
	flushInterval time.Duration

	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	dropped     prometheus.Counter
	writeErrors prometheus.Counter
	// errLimit bounds MISS and ERROR lines; what it refuses is counted by
	// result in limited (resolved once: no label lookup per line).
	errLimit              *limiter
	limited               *prometheus.CounterVec
	limitedMiss, limitedE prometheus.Counter
	// byFamily[proto][asked][given-1]: anysched_answers_by_family_total
	// (proto 0 http, 1 dns), resolved once.
	byFamily [2][3][2]prometheus.Counter
}

// New creates a recorder writing JSON lines to out and registers its
// metrics. With a nil out no lines are kept at all (the metrics and
// Traffic still count every decision): that is access_log.enabled: false,
// which should not pay for encoding lines nobody reads.
func New(reg prometheus.Registerer, out io.Writer, o Options) *Recorder {
	var s *sink
	if out != nil {
		s = &sink{w: out}
	}
	return newRecorder(reg, s, o)
}

// NewFile creates a recorder appending JSON lines to the file at path,
// created with mode 0640 if missing. Reopen reopens it; Run closes it when
// it returns.
func NewFile(reg prometheus.Registerer, path string, o Options) (*Recorder, error) {
	s, err := openSink(path)
	if err != nil {
		return nil, err
	}
	return newRecorder(reg, s, o), nil
}

func newRecorder(reg prometheus.Registerer, out *sink, o Options) *Recorder {
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.MaxErrorsPerSecond <= 0 {
		o.MaxErrorsPerSecond = DefaultMaxErrorsPerSecond
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	r := &Recorder{
		out:           out,
		sample:        max(o.SampleEvery, 1),
		flushInterval: o.FlushInterval,
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
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anysched_accesslog_write_errors_total", Help: "Access-log writes that failed, losing their lines (a full disk, a closed pipe).",
		}),
	}
	if out != nil {
		r.q = newQueue(o.Queue, runtime.GOMAXPROCS(0))
	}
	r.series.build = r.buildSeries
	r.limited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anysched_accesslog_rate_limited_total", Help: "MISS and ERROR access-log lines not written because access_log.max_errors_per_second was reached, by result.",
	}, []string{"result"})
	r.errLimit = newLimiter(o.MaxErrorsPerSecond)
	r.limitedMiss = r.limited.WithLabelValues(steer.ResultMiss.String())
	r.limitedE = r.limited.WithLabelValues(steer.ResultError.String())
	families := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anysched_answers_by_family_total", Help: "STB answers that gave an edge address, by protocol, the family the STB asked for and the family of the address given (they differ under family_fallback other).",
	}, []string{"proto", "family", "given"})
	for p, proto := range [2]string{"http", "dns"} {
		for f := range r.byFamily[p] {
			for g := range r.byFamily[p][f] {
				r.byFamily[p][f][g] = families.WithLabelValues(proto, familyLabel(steer.Family(f)), familyLabel(steer.Family(g+1)))
			}
		}
	}
	reg.MustRegister(r.requests, r.latency, r.dropped, r.writeErrors, r.limited, families)
	return r
}

// Record counts e and queues its log line; it never blocks.
func (r *Recorder) Record(e Entry) { r.RecordPtr(&e) }

// RecordPtr is Record without copying the entry at the call; e is read,
// not kept, so the caller may reuse it at once.
func (r *Recorder) RecordPtr(e *Entry) {
	s := r.series.get(seriesKey{proto: e.Proto, region: e.Region, client: e.ClientRegion, result: e.Result})
	s.requests.Inc()
	s.latency.Observe(e.Latency.Seconds())
	s.tally.record(e.Time, failedAnswer(e))
	if g := e.TargetFamily; g != steer.FamilyAny && e.Family <= steer.FamilyV6 && g <= steer.FamilyV6 {
		p := 0
		if e.Proto == "dns" {
			p = 1
		}
		r.byFamily[p][e.Family][g-1].Inc()
	}
	if r.q == nil {
		return
	}
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
	if !r.q.push(e) {
		r.dropped.Inc()
	}
}

// Reopen reopens the log file at its path, for logrotate: call it after the
// file was renamed (SIGHUP). Lines already written stay in the renamed
// file, the rest go to the new one. If the path cannot be opened the
// recorder keeps writing to the old file and the error is returned. It does
// nothing for a recorder that was not made by NewFile.
func (r *Recorder) Reopen() error {
	if r.out == nil {
		return nil
	}
	return r.out.reopen()
}

// Run writes queued lines until ctx ends, then writes what is queued,
// closes a file sink and returns the first error of that last write or the
// close (earlier write errors are counted in
// anysched_accesslog_write_errors_total). Run it once per recorder.
func (r *Recorder) Run(ctx context.Context) error {
	if r.q == nil {
		<-ctx.Done()
		return nil
	}
	w := newWriter(r.q)
	tick := time.NewTicker(r.flushInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			failed, err := w.drain(r.out)
			r.writeErrors.Add(float64(failed))
			return errors.Join(err, r.out.close())
		case <-tick.C:
		case <-r.q.wake:
		}
		failed, _ := w.drain(r.out)
		r.writeErrors.Add(float64(failed))
	}
}

// familyLabel is a family's metric label: "any" for a request that asked
// for none.
func familyLabel(f steer.Family) string {
	if f == steer.FamilyAny {
		return "any"
	}
	return f.String()
}
