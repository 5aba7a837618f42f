package accesslog

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// benchEntry is a typical HTTP decision.
func benchEntry() Entry {
	return Entry{
		Time: time.Now(), Proto: "http", Client: netip.MustParseAddr("100.64.12.34"),
		Host: "live.iptv.example", Path: "/live/cctv1/index.m3u8", Result: steer.ResultCZ,
		Zone: "hefei-z17", ClientRegion: "hefei", Region: "hefei", Server: "hefei-n03-s2",
		Target: "10.16.3.2:80", Status: 302, Latency: 850 * time.Nanosecond,
	}
}

// BenchmarkRecord measures Record:
//   - serial: its cost on a serving goroutine alone (the queue is emptied
//     with the timer stopped);
//   - parallel: one caller per P, each emptying the queue (timed) every
//     1024 lines, so that lines are queued, not dropped;
//   - parallel+writer: one caller per P while the writer runs (lines to
//     io.Discard; callers in a tight loop outrun it, so most are dropped);
//   - pinned: one P, and a caller that yields now and then, as a serving
//     loop does, so the writer shares its core: Record plus the writer's
//     encoding, the CPU one logged decision costs where the scheduler is
//     pinned to a core;
//   - full: a queue nobody drains (every line dropped);
//   - nolines: access log off (New with a nil writer): metrics only.
//
// dropped/op says whether the writer kept up.
func BenchmarkRecord(b *testing.B) {
	newRec := func(b *testing.B, out io.Writer, o Options, writer bool) *Recorder {
		r := New(prometheus.NewRegistry(), out, o)
		if writer {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- r.Run(ctx) }()
			b.Cleanup(func() { cancel(); <-done })
		}
		b.ReportAllocs()
		b.Cleanup(func() { b.ReportMetric(testutil.ToFloat64(r.dropped)/float64(b.N), "dropped/op") })
		return r
	}
	b.Run("serial", func(b *testing.B) {
		r, e := newRec(b, io.Discard, Options{}, false), benchEntry()
		for i := 0; b.Loop(); i++ {
			if i%1024 == 0 {
				b.StopTimer()
				emptyQueue(r)
				b.StartTimer()
			}
			r.Record(e)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		r := newRec(b, io.Discard, Options{}, false)
		b.RunParallel(func(pb *testing.PB) {
			e := benchEntry()
			for i := 0; pb.Next(); i++ {
				if i%1024 == 0 {
					emptyQueue(r)
				}
				r.Record(e)
			}
		})
	})
	b.Run("parallel+writer", func(b *testing.B) {
		r := newRec(b, io.Discard, Options{}, true)
		b.RunParallel(func(pb *testing.PB) {
			e := benchEntry()
			for pb.Next() {
				r.Record(e)
			}
		})
	})
	b.Run("pinned", func(b *testing.B) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		r, e := newRec(b, io.Discard, Options{}, true), benchEntry()
		for i := 0; b.Loop(); i++ {
			if i%256 == 0 {
				runtime.Gosched()
			}
			r.Record(e)
		}
	})
	b.Run("full", func(b *testing.B) {
		r, e := newRec(b, io.Discard, Options{Queue: 1}, false), benchEntry()
		for b.Loop() {
			r.Record(e)
		}
	})
	b.Run("nolines", func(b *testing.B) {
		r, e := newRec(b, nil, Options{}, true), benchEntry()
		for b.Loop() {
			r.Record(e)
		}
	})
}

// emptyQueue forgets the queued lines.
func emptyQueue(r *Recorder) {
	for i := range r.q.shards {
		s := &r.q.shards[i]
		s.mu.Lock()
		s.buf = s.buf[:0]
		s.mu.Unlock()
	}
}

// BenchmarkFormat: lines the writer encodes per second.
func BenchmarkFormat(b *testing.B) {
	e := benchEntry()
	buf := make([]byte, 0, 512)
	var c encoder
	b.ReportAllocs()
	for b.Loop() {
		e.Time = e.Time.Add(time.Microsecond)
		buf = c.appendLine(buf[:0], &e)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkDrain: lines the writer takes from the shards, merges, encodes and
// writes (to io.Discard) per second, in batches of a full default queue.
func BenchmarkDrain(b *testing.B) {
	for _, shards := range []int{1, 4} {
		b.Run(fmt.Sprint("shards=", shards), func(b *testing.B) {
			q := newQueue(DefaultQueue, shards)
			w, out := newWriter(q), &sink{w: io.Discard}
			e := benchEntry()
			b.ReportAllocs()
			lines := 0
			for b.Loop() {
				b.StopTimer()
				for q.push(&e) {
					e.Time = e.Time.Add(time.Microsecond)
				}
				b.StartTimer()
				_, _ = w.drain(out)
				lines += DefaultQueue
			}
			b.ReportMetric(float64(lines)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}
