package accesslog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/wiring/obs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// syncBuffer collects what the writer writes.
type syncBuffer struct {
	mu     sync.Mutex
	b      strings.Builder
	writes int
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSuffix(s.b.String(), "\n"), "\n")
}

// run starts r's writer and stops it when the test ends (or earlier, by
// calling the returned function, which reports Run's error).
func run(t testing.TB, r *Recorder) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var err error
	stop := func() error { once.Do(func() { cancel(); err = <-done }); return err }
	t.Cleanup(func() { _ = stop() })
	return stop
}

// eventually polls cond until it holds or 5 s have passed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// numbered is decision i of a test run, told apart by its path.
func numbered(i int, at time.Time) Entry {
	return Entry{Time: at, Proto: "http", Host: "live.iptv.example", Path: fmt.Sprintf("/%d", i),
		Result: steer.ResultCZ, Region: "hefei", ClientRegion: "hefei", Status: 302}
}

// TestOrderAcrossShards: one caller's lines spread over many shards come out
// in its order, in one write per batch.
func TestOrderAcrossShards(t *testing.T) {
	var out syncBuffer
	r := New(prometheus.NewRegistry(), &out, Options{Queue: 1 << 12, FlushInterval: time.Hour})
	r.q = newQueue(1<<12, 8)
	t0 := time.Unix(1_800_000_000, 0)
	const n = 1000 // under any shard's half: written only at the end, as one batch
	for i := range n {
		r.Record(numbered(i, t0.Add(time.Duration(i)*time.Microsecond)))
	}
	if err := run(t, r)(); err != nil {
		t.Fatal(err)
	}
	lines := out.lines()
	if len(lines) != n || out.writes != 1 {
		t.Fatalf("%d lines in %d writes, want %d in 1", len(lines), out.writes, n)
	}
	for i, l := range lines {
		if want := fmt.Sprintf(`"path":"/%d"`, i); !strings.Contains(l, want) {
			t.Fatalf("line %d is %s, want %s", i, l, want)
		}
	}
}

// TestWakeAndFlush: a line waits at most FlushInterval, and a half-full
// shard wakes the writer at once.
func TestWakeAndFlush(t *testing.T) {
	for _, tc := range []struct {
		name  string
		o     Options
		lines int
	}{
		{"timer", Options{FlushInterval: 10 * time.Millisecond}, 1},
		{"half full", Options{Queue: 64, FlushInterval: time.Hour}, 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out syncBuffer
			r := New(prometheus.NewRegistry(), &out, tc.o)
			r.q = newQueue(max(tc.o.Queue, 1), 1) // one shard: its half is exact
			run(t, r)
			for i := range tc.lines {
				r.Record(numbered(i, time.Now()))
			}
			eventually(t, "the lines", func() bool { return len(out.lines()) == tc.lines })
		})
	}
}

// blockingWriter blocks every Write until release is closed.
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	syncBuffer
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return b.syncBuffer.Write(p)
}

// TestBlockedSinkDrops: with the sink stuck, Record keeps returning at once
// and counts what it cannot queue; once the sink moves, every decision is
// either written or counted as dropped.
func TestBlockedSinkDrops(t *testing.T) {
	reg := prometheus.NewRegistry()
	out := &blockingWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	r := New(reg, out, Options{Queue: 256, FlushInterval: time.Millisecond})
	stop := run(t, r)
	// Registered after run's cleanup, so it runs first: a failure below
	// must free the stuck writer, or stopping the recorder waits for it
	// forever (the test hung under load once, when its 2 s bound failed).
	var release sync.Once
	unblock := func() { release.Do(func() { close(out.release) }) }
	t.Cleanup(unblock)
	r.Record(numbered(0, time.Now()))
	select {
	case <-out.entered: // the writer is stuck in Write with line 0
	case <-time.After(5 * time.Second):
		t.Fatal("writer never wrote")
	}
	const n = 100_000
	// A Record that waited for the stuck sink would never return: that the
	// loop ends is the check (no wall-clock bound, which a loaded machine
	// breaks).
	for i := 1; i < n; i++ {
		r.Record(numbered(i, time.Now()))
	}
	dropped := testutil.ToFloat64(r.dropped)
	if dropped < n-1-2*256 {
		t.Fatalf("dropped %v of %d with a stuck sink and a 256-line queue", dropped, n)
	}
	unblock()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	written := len(out.lines())
	if written+int(testutil.ToFloat64(r.dropped)) != n {
		t.Fatalf("%d written + %v dropped != %d decisions", written, testutil.ToFloat64(r.dropped), n)
	}
	if got := testutil.ToFloat64(r.requests.WithLabelValues("http", "hefei", "CZ")); got != n {
		t.Fatalf("requests_total = %v, want %d", got, n)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestWriteErrorsCounted: a sink that fails loses its lines, counted.
func TestWriteErrorsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := New(reg, failingWriter{}, Options{})
	if problems := obs.LintMetrics(reg); len(problems) > 0 {
		t.Fatalf("metric lint: %v", problems)
	}
	stop := run(t, r)
	r.Record(numbered(0, time.Now()))
	if err := stop(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Run = %v, want the write error", err)
	}
	if got := testutil.ToFloat64(r.writeErrors); got != 1 {
		t.Fatalf("write errors = %v, want 1", got)
	}
}

// TestNoLines: without a writer the decisions are counted and nothing is
// queued.
func TestNoLines(t *testing.T) {
	r := New(prometheus.NewRegistry(), nil, Options{})
	stop := run(t, r)
	for range 10 {
		r.Record(Entry{Time: time.Now(), Proto: "dns", Result: steer.ResultMiss})
	}
	if r.q != nil {
		t.Fatal("a queue without a writer")
	}
	if got := testutil.ToFloat64(r.requests.WithLabelValues("dns", "none", "MISS")); got != 10 {
		t.Fatalf("requests_total = %v, want 10", got)
	}
	if got := r.Traffic(); len(got) != 1 || got[0].Answered != 10 {
		t.Fatalf("Traffic() = %+v", got)
	}
	if err := r.Reopen(); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRecordDoesNotAllocate: the common path, and the drop and sampled-out
// paths, allocate nothing once a series has been seen.
func TestRecordDoesNotAllocate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"queued", Options{Queue: 1 << 12}},
		{"dropped", Options{Queue: 1}},
		{"sampled out", Options{SampleEvery: 1 << 40}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(prometheus.NewRegistry(), io.Discard, tc.o)
			e := benchEntry()
			r.Record(e)
			if n := testing.AllocsPerRun(1000, func() { r.Record(e) }); n != 0 {
				t.Fatalf("Record allocates %v times", n)
			}
		})
	}
}

// TestSeriesCacheBounded: past maxSeries keys decisions still count, the
// cache stops growing, and what it holds reaches the lock-free map.
func TestSeriesCacheBounded(t *testing.T) {
	r := New(prometheus.NewRegistry(), nil, Options{})
	region := func(i int) Entry { return Entry{Proto: "http", Region: fmt.Sprint("r", i), Result: steer.ResultCZ} }
	for i := range maxSeries + 10 {
		r.Record(region(i))
		r.Record(region(i))
	}
	if got := len(r.series.dirty); got != maxSeries {
		t.Fatalf("cache holds %d series, want %d", got, maxSeries)
	}
	for _, i := range []int{0, maxSeries - 1, maxSeries + 9} {
		if got := testutil.ToFloat64(r.requests.WithLabelValues("http", fmt.Sprint("r", i), "CZ")); got != 2 {
			t.Fatalf("region r%d: requests_total = %v, want 2", i, got)
		}
	}
	// Misses on cached keys copy the cache to the read map in time.
	for range maxSeries {
		if len(*r.series.read.Load()) == maxSeries {
			return
		}
		r.Record(region(maxSeries - 1))
	}
	t.Fatalf("read map holds %d series after %d misses", len(*r.series.read.Load()), maxSeries)
}

// TestConcurrentRecord: many callers, no line lost or doubled, metrics exact
// (run with -race).
func TestConcurrentRecord(t *testing.T) {
	var out syncBuffer
	r := New(prometheus.NewRegistry(), &out, Options{Queue: 1 << 16, FlushInterval: time.Millisecond})
	stop := run(t, r)
	const callers, each = 8, 2000
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				r.Record(numbered(c*each+i, time.Now()))
			}
		})
	}
	wg.Wait()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if d := testutil.ToFloat64(r.dropped); d != 0 {
		t.Fatalf("dropped %v with room for all", d)
	}
	seen := make(map[string]int)
	for _, l := range out.lines() {
		i := strings.Index(l, `"path":`)
		seen[l[i:i+strings.IndexByte(l[i:], ',')]]++
	}
	if len(seen) != callers*each {
		t.Fatalf("%d distinct lines, want %d", len(seen), callers*each)
	}
	for p, n := range seen {
		if n != 1 {
			t.Fatalf("%s written %d times", p, n)
		}
	}
	if got := r.Traffic(); len(got) != 1 || got[0].Answered != callers*each {
		t.Fatalf("Traffic() = %+v", got)
	}
}

// TestDrainYields: a long drain stops every slice to let other goroutines
// run, and still writes every line, in order.
func TestDrainYields(t *testing.T) {
	q := newQueue(DefaultQueue, 1)
	var out syncBuffer
	w := newWriter(q)
	yields := 0
	w.yield = func() { yields++ }
	t0 := time.Unix(1_800_000_000, 0)
	n := 0
	for {
		e := numbered(n, t0.Add(time.Duration(n)*time.Microsecond))
		if !q.push(&e) {
			break
		}
		n++
	}
	start := time.Now()
	if _, err := w.drain(&sink{w: &out}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	lines := out.lines()
	if len(lines) != n {
		t.Fatalf("%d lines written, want %d", len(lines), n)
	}
	for i, l := range lines {
		if want := fmt.Sprintf(`"path":"/%d"`, i); !strings.Contains(l, want) {
			t.Fatalf("line %d is %s, want %s", i, l, want)
		}
	}
	// Encoding a full default queue takes well over a millisecond on any
	// machine: several slices (a write to the sink is not cut short, so
	// the count is not exact).
	if yields < 3 {
		t.Fatalf("%d yields in a drain of %d lines that took %v, want at least 3", yields, n, took)
	}
}

// TestYieldServesTheNetwork: with one P, the writer's yield lets a
// goroutine waiting on a socket run; runtime.Gosched would not (the
// scheduler polls the network only when nothing else is runnable), and a
// drain would then hold every answer of a one-core scheduler.
func TestYieldServesTheNetwork(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var served atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 16)
		if _, _, err := pc.ReadFrom(buf); err == nil {
			served.Store(true)
		}
	}()
	// Let the reader park in the poller.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && !parkedOnNetwork() {
		time.Sleep(time.Millisecond)
	}
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ready")); err != nil {
		t.Fatal(err)
	}
	w := newWriter(newQueue(8, 1))
	for i := 0; i < 100 && !served.Load(); i++ {
		w.yield() // nothing else runs this goroutine's P in between
	}
	if !served.Load() {
		t.Fatal("the goroutine waiting on the socket did not run during 100 yields")
	}
	<-done
}

// parkedOnNetwork reports whether some goroutine waits in the network
// poller.
func parkedOnNetwork() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "[IO wait")
}

// TestOrderWhileDraining: one caller's lines come out in its order even
// when the writer drains while the caller records. A drain takes every
// shard at one instant; taken one by one, a later line pushed into a shard
// not yet taken would be written before an earlier one pushed into a shard
// already taken.
func TestOrderWhileDraining(t *testing.T) {
	var out syncBuffer
	r := New(prometheus.NewRegistry(), &out, Options{Queue: 256, FlushInterval: time.Millisecond})
	r.q = newQueue(256, 16) // 16 lines a shard: the writer wakes every 8
	stop := run(t, r)
	t0 := time.Unix(1_800_000_000, 0)
	const n = 200_000
	for i := range n {
		r.Record(numbered(i, t0.Add(time.Duration(i)*time.Microsecond)))
		if i%64 == 0 {
			runtime.Gosched() // let the writer drain while lines arrive
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	lines := out.lines()
	t.Logf("%d lines in %d writes", len(lines), out.writes)
	if out.writes < 20 {
		t.Fatalf("%d lines in %d writes: the writer did not drain while lines arrived", len(lines), out.writes)
	}
	last := -1
	for j, l := range lines {
		_, rest, _ := strings.Cut(l, `"path":"/`)
		var i int
		if _, err := fmt.Sscanf(rest, "%d", &i); err != nil {
			t.Fatalf("line %d: %s: %v", j, l, err)
		}
		if i <= last {
			t.Fatalf("line %d is decision %d, after decision %d", j, i, last)
		}
		last = i
	}
}
