package watchdog_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/dnsd"
	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/anysched/anysched/internal/testbed/syncbuf"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/internal/wiring/watchdog"
	"github.com/prometheus/client_golang/prometheus"
)

// notes collects what the watchdog tells the service manager.
type notes struct {
	mu     sync.Mutex
	states []string
}

func (n *notes) notify(s string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.states = append(n.states, s)
	return nil
}

func (n *notes) count(s string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, x := range n.states {
		if x == s {
			c++
		}
	}
	return c
}

func (n *notes) last() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.states) == 0 {
		return ""
	}
	return n.states[len(n.states)-1]
}

// stalling accepts connections and, while stalled, reads them without
// answering: a front end whose accept loop or handler hangs.
type stalling struct {
	ln    net.Listener
	mu    sync.Mutex
	stall bool
}

func (s *stalling) run(t *testing.T, answer func(net.Conn)) {
	go func() {
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			stall := s.stall
			s.mu.Unlock()
			if stall {
				go func() { _, _ = c.Read(make([]byte, 512)) }() // held open, never answered
				continue
			}
			go answer(c)
		}
	}()
	t.Cleanup(func() { s.ln.Close() })
}

func (s *stalling) set(v bool) {
	s.mu.Lock()
	s.stall = v
	s.mu.Unlock()
}

// TestNotifiesOnlyWhileAnswering: with the real HTTP and DNS front ends
// the watchdog says READY and notifies; while the HTTP front end stops
// answering it stops notifying, says so once at ERROR with the goroutines'
// stacks, and resumes when the front end answers again; on stop it says
// STOPPING.
func TestNotifiesOnlyWhileAnswering(t *testing.T) {
	noEngine := func() *steer.Engine { return nil }
	log := slog.New(slog.DiscardHandler)

	// The real HTTP front end behind a gate that can stall it.
	h := httpd.New(httpd.Config{}, noEngine, nil, log)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = h.Serve(ctx, inner) }()
	outer, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gate := &stalling{ln: outer}
	gate.run(t, func(c net.Conn) { // relays to the real server
		defer c.Close()
		up, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			return
		}
		defer up.Close()
		go func() { _, _ = io.Copy(up, c) }()
		_, _ = io.Copy(c, up)
	})

	// The real DNS front end.
	d := dnsd.New(dnsd.Config{}, func() *steer.Engine { return nil }, nil, log)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.Serve(ctx, pc, tl) }()

	n := &notes{}
	rec := logtest.New()
	var dump syncbuf.Buffer
	w := &watchdog.Watchdog{
		Timeout: time.Second,
		Probes: func() []watchdog.Probe {
			return []watchdog.Probe{watchdog.HTTP(outer.Addr().String()), watchdog.DNS(pc.LocalAddr().String())}
		},
		Notify: n.notify, Logger: rec.Logger(), Dump: &dump,
	}
	reg := prometheus.NewRegistry()
	w.Register(reg)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()

	wait.For(t, "READY and notifications", wait.DefaultTimeout, func() bool { return n.count("READY=1") == 1 && n.count("WATCHDOG=1") >= 3 })

	gate.set(true)
	wait.For(t, "the failure said", wait.DefaultTimeout, func() bool { return len(rec.Containing(slog.LevelError, "does not answer")) == 1 })
	// Probes start every 250 ms and give up after 500 ms: well past that,
	// nothing more is notified.
	stalled := n.count("WATCHDOG=1")
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if n.count("WATCHDOG=1") > stalled+1 { // one probe may have been under way
			t.Fatalf("notified while the HTTP front end did not answer: %d -> %d", stalled, n.count("WATCHDOG=1"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := failures(t, reg, "http"); got < 2 {
		t.Errorf("anysched_watchdog_probe_failures_total{frontend=http} = %v, want >= 2", got)
	}
	if got := failures(t, reg, "dns"); got != 0 {
		t.Errorf("the DNS front end answered, yet %v failures counted for it", got)
	}
	if e := rec.Containing(slog.LevelError, "does not answer")[0]; !strings.Contains(e.String(), "http:") {
		t.Errorf("the ERROR should name the front end: %s", e)
	}
	if !strings.Contains(dump.String(), "goroutine ") {
		t.Errorf("no goroutine dump written: %q", dump.String())
	}

	gate.set(false)
	wait.For(t, "notifications again", wait.DefaultTimeout, func() bool { return n.count("WATCHDOG=1") >= stalled+3 })
	if len(rec.Containing(slog.LevelInfo, "answer again")) != 1 {
		t.Error("the recovery was not said once at INFO")
	}
	if len(rec.Containing(slog.LevelError, "does not answer")) != 1 {
		t.Error("the failure was said more than once")
	}
	stop()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run: %v, want context.Canceled", err)
	}
	if n.last() != "STOPPING=1" {
		t.Errorf("the last state sent: %q, want STOPPING=1", n.last())
	}
}

// TestBusyIsNotHung: a front end at http.max_connections resets the
// probe's connection like any other; that is its accept loop answering,
// and the watchdog goes on notifying (killing a busy scheduler would move
// its load onto the center, and then the center's). An address not on
// this host (a service address not yet on its interface) is not probed.
func TestBusyIsNotHung(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	h := httpd.New(httpd.Config{MaxConnections: 1}, func() *steer.Engine { return nil }, nil, log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = h.Serve(ctx, ln) }()
	held, err := net.Dial("tcp", ln.Addr().String()) // the one connection allowed, kept open
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := io.WriteString(held, "HEAD "+httpd.AlivePath+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := held.Read(make([]byte, 512)); err != nil { // served: it counts against the cap now
		t.Fatal(err)
	}
	n := &notes{}
	rec := logtest.New()
	w := &watchdog.Watchdog{Timeout: time.Second, Notify: n.notify, Logger: rec.Logger(), Probes: func() []watchdog.Probe {
		return []watchdog.Probe{watchdog.HTTP(ln.Addr().String()), watchdog.HTTP("192.0.2.1:80")}
	}}
	reg := prometheus.NewRegistry()
	w.Register(reg)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = w.Run(wctx) }()
	wait.For(t, "notifications while at the cap", wait.DefaultTimeout, func() bool { return n.count("WATCHDOG=1") >= 4 })
	if e := rec.Records(slog.LevelError); len(e) > 0 {
		t.Errorf("a busy front end was taken for a hung one: %v", e)
	}
	if got := failures(t, reg, "http"); got != 0 {
		t.Errorf("%v probe failures counted at the cap", got)
	}
}

// TestWithoutWatchdog: with no watchdog interval the scheduler still says
// READY and STOPPING, and probes nothing.
func TestWithoutWatchdog(t *testing.T) {
	n := &notes{}
	w := &watchdog.Watchdog{Notify: n.notify, Logger: slog.New(slog.DiscardHandler), Probes: func() []watchdog.Probe {
		t.Error("probed without a watchdog")
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	wait.For(t, "READY", wait.DefaultTimeout, func() bool { return n.count("READY=1") == 1 })
	cancel()
	<-done
	if n.count("STOPPING=1") != 1 || n.count("WATCHDOG=1") != 0 {
		t.Errorf("states sent: %v", n.states)
	}
}

// failures reads anysched_watchdog_probe_failures_total for a front end.
func failures(t *testing.T, reg *prometheus.Registry, frontend string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "anysched_watchdog_probe_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "frontend" && l.GetValue() == frontend {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
