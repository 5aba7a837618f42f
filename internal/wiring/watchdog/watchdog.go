// Package watchdog feeds the service manager's watchdog (systemd's
// WatchdogSec, or the lab's supervisor speaking the same protocol) only
// while the scheduler's serving path answers.
//
// A frozen scheduler (SIGSTOP, a stuck host, a deadlock) keeps its BGP
// session until the router's hold time expires, and the kernel still
// completes TCP handshakes for it: for those seconds its city's STBs are
// routed to a scheduler that does not answer. With the watchdog the
// service manager kills it once the watchdog interval passes without a
// notification, the session closes with the process, and the city's route
// moves to the center at once, in about a second instead of the hold time.
// A process alive but not answering (a deadlocked front end) stops
// notifying too: each notification follows a real request to each STB
// front end, answered through the same accept loops and handler an STB
// reaches.
package watchdog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/prometheus/client_golang/prometheus"
)

// Probe asks one front end for an answer.
type Probe struct {
	Name  string // http, dns
	Check func(ctx context.Context) error
	// Misses is how many failures in a row are forgiven: UDP may drop a
	// query in a flood that the front end is answering through.
	Misses int
}

// Watchdog notifies every Timeout/4 while every probe answers.
type Watchdog struct {
	// Timeout is the service manager's watchdog interval (WATCHDOG_USEC);
	// 0: no watchdog, Run only says READY and STOPPING.
	Timeout time.Duration
	// Probes returns what to probe; called once Run starts, when the
	// listeners are bound.
	Probes func() []Probe
	// Notify sends one state ("READY=1", "WATCHDOG=1", "STOPPING=1") to
	// the service manager.
	Notify func(state string) error
	Logger *slog.Logger
	// Dump receives the goroutines' stacks when the probes first fail: the
	// process is about to be killed, and the stacks show what hung.
	Dump io.Writer

	notified prometheus.Counter
	failed   *prometheus.CounterVec
	// notifyFailing: the last notification failed (said once).
	notifyFailing bool
}

// Register adds the watchdog's metrics to reg.
func (w *Watchdog) Register(reg prometheus.Registerer) {
	w.notified = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "anysched_watchdog_notifications_total",
		Help: "Watchdog notifications sent to the service manager (each after every STB front end answered a probe).",
	})
	w.failed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anysched_watchdog_probe_failures_total",
		Help: "Watchdog probes of an STB front end that got no answer in time; the service manager kills the scheduler after its watchdog interval without a notification.",
	}, []string{"frontend"})
	reg.MustRegister(w.notified, w.failed)
}

// Run says READY, then probes and notifies until ctx ends, then says
// STOPPING (a graceful stop is no hang).
func (w *Watchdog) Run(ctx context.Context) error {
	log := w.Logger.With("component", "watchdog")
	w.notify(log, "READY=1")
	defer w.notify(log, "STOPPING=1")
	if w.Timeout <= 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	probes := w.Probes()
	missed := make([]int, len(probes))
	every := w.Timeout / 4
	tick := time.NewTicker(every)
	defer tick.Stop()
	failing := false
	for {
		// A probe may take up to half the interval: an answer slower than
		// that is no answer an STB waits for, and the notification that
		// follows still comes before the interval ends.
		pctx, cancel := context.WithTimeout(ctx, w.Timeout/2)
		err := w.probe(pctx, probes, missed)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			w.notify(log, "WATCHDOG=1")
			if w.notified != nil {
				w.notified.Inc()
			}
			if failing {
				log.Info("the STB front ends answer again; watchdog notifications resumed")
			}
			failing = false
		case !failing:
			failing = true
			log.Error("an STB front end does not answer; watchdog notifications stopped: the service manager stops this scheduler after its watchdog interval unless it answers again", "err", err, "watchdog", w.Timeout)
			if w.Dump != nil {
				_, _ = fmt.Fprintln(w.Dump, "watchdog: the goroutines while an STB front end does not answer:")
				_ = pprof.Lookup("goroutine").WriteTo(w.Dump, 2)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// probe asks every front end at once, so that one hanging does not take
// the others' time; a probe's failures count once more than its Misses
// in a row (missed holds each probe's run of failures).
func (w *Watchdog) probe(ctx context.Context, probes []Probe, missed []int) error {
	errs := make([]error, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Go(func() {
			err := p.Check(ctx)
			if err == nil {
				missed[i] = 0
				return
			}
			if w.failed != nil {
				w.failed.WithLabelValues(p.Name).Inc()
			}
			if missed[i]++; missed[i] > p.Misses {
				errs[i] = fmt.Errorf("%s: %w", p.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (w *Watchdog) notify(log *slog.Logger, state string) {
	if w.Notify == nil {
		return
	}
	// Said once until a notification goes through again: a socket gone
	// would otherwise fill the log five lines a second.
	err := w.Notify(state)
	switch {
	case err != nil && !w.notifyFailing:
		w.notifyFailing = true
		log.Warn("notifying the service manager failed; said again only once it works", "state", state, "err", err)
	case err == nil && w.notifyFailing:
		w.notifyFailing = false
		log.Info("notifying the service manager works again")
	}
}

// HTTP probes an HTTP front end listening on addr (its bound address;
// a wildcard is probed on loopback). A reset before any answer counts as
// one: it is the accept loop turning away a connection over
// http.max_connections, so a scheduler at its cap is not killed for being
// busy (and its load moved onto the center, which would be next). While
// addr is not on this host (a service address not put on its interface
// yet, or removed), nothing routes STBs here and the probe would be
// answered by another host: it passes without a request.
func HTTP(addr string) Probe {
	addr = dialable(addr)
	req := "HEAD " + httpd.AlivePath + " HTTP/1.1\r\nHost: watchdog\r\nConnection: close\r\n\r\n"
	return Probe{Name: "http", Check: func(ctx context.Context) error {
		if !local(addr) {
			return nil
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if turnedAway(err) {
			return nil
		}
		if err != nil {
			return err
		}
		defer c.Close()
		if dl, ok := ctx.Deadline(); ok {
			_ = c.SetDeadline(dl)
		}
		if _, err := io.WriteString(c, req); err != nil {
			if turnedAway(err) {
				return nil // reset before the request was written: turned away at the cap
			}
			return err
		}
		var b [32]byte
		n, err := io.ReadAtLeast(c, b[:], len("HTTP/1.1 204"))
		if n == 0 && turnedAway(err) {
			return nil // turned away at the cap: the accept loop answers
		}
		if err != nil {
			return err
		}
		if line := string(b[:n]); !strings.HasPrefix(line, "HTTP/1.1 204") {
			return fmt.Errorf("answered %q", strings.TrimSpace(strings.SplitN(line, "\r\n", 2)[0]))
		}
		return nil
	}}
}

// DNS probes a DNS front end on addr with a CHAOS-class query, which it
// answers REFUSED without looking anything up: any answer with the
// query's ID is an answer. Two misses in a row are forgiven (a flood may
// drop the query), and, as for HTTP, an address not on this host passes.
func DNS(addr string) Probe {
	addr = dialable(addr)
	// ID 0x5744, RD off, one question: id.server. CH TXT.
	q := []byte{0x57, 0x44, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0,
		2, 'i', 'd', 6, 's', 'e', 'r', 'v', 'e', 'r', 0, 0, 16, 0, 3}
	return Probe{Name: "dns", Misses: 2, Check: func(ctx context.Context) error {
		if !local(addr) {
			return nil
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "udp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		if dl, ok := ctx.Deadline(); ok {
			_ = c.SetDeadline(dl)
		}
		if _, err := c.Write(q); err != nil {
			return err
		}
		var b [512]byte
		for {
			n, err := c.Read(b[:])
			if err != nil {
				return err
			}
			if n >= 4 && b[0] == q[0] && b[1] == q[1] && b[2]&0x80 != 0 {
				return nil
			}
		}
	}}
}

// turnedAway: the connection was reset (or its write end closed by a
// reset) before any answer, as the accept loop does past
// http.max_connections; it may show on the dial, the write or the read.
func turnedAway(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// local reports whether addr's IP is one of this host's (loopback
// included); an address it cannot tell is taken as local.
func local(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil || ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// dialable turns a bound wildcard address into one on loopback.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if ip != nil && ip.To4() == nil {
			return net.JoinHostPort("::1", port)
		}
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
