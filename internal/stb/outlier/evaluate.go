package outlier

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// Ejection reasons, as the ejections metric labels them.
const (
	reasonConsecutive = "consecutive"
	reasonRate        = "rate"
)

// buckets is how many samples of the counters the rate rule keeps per
// interval: the window it looks back over is interval to interval+interval/buckets.
const buckets = 10

// state is what Evaluate knows of one server; it follows the server's name
// across SetServers. Guarded by Detector.mu.
type state struct {
	name string
	idx  int32
	node int32
	c    *counters

	ejected  bool
	until    time.Time
	count    int       // ejections in a row (decays, see Evaluate)
	returned time.Time // when the last ejection ended
	reason   string    // of the current or last ejection
	skipped  string    // reason it qualifies while its node is at the share; "" otherwise

	// consumed: failures of requests numbered up to it were spent by an
	// ejection (see spend).
	consumed  uint64
	seenFailN uint64 // failN at the last run check
	run       int    // the longest run found then
	recheck   bool

	hist []sample // counters over the last interval, oldest first
}

// sample is a server's cumulative counters at a time:
// requests, failures, edge requests, edge errors.
type sample struct {
	at time.Time
	v  [4]uint64
}

type candidate struct {
	s        *state
	kind     string // reasonConsecutive or reasonRate
	reason   string
	severity float64 // share of requests failed; 1 for a consecutive run
}

func (s *state) read() [4]uint64 {
	return [4]uint64{s.c.requests.Load(), s.c.failures.Load(), s.c.edgeReq.Load(), s.c.edgeErr.Load()}
}

// spend forgets the server's past when it returns: its rate history and
// the failures of requests sent so far (while ejected, late re-asks of
// answers sent before the ejection keep arriving; they are not news).
func (s *state) spend() {
	s.consumed = s.c.requests.Load()
	s.recheck, s.run = true, 0
	s.hist = s.hist[:0]
}

// longestRun is the longest run of consecutively numbered requests of the
// server among its recent failures (after consumed): requests in a row
// that were all re-asked, with no answer between them that held.
func (s *state) longestRun() int {
	fn := s.c.failN.Load()
	if fn == s.seenFailN && !s.recheck {
		return s.run
	}
	s.seenFailN, s.recheck = fn, false
	var buf [ringSize]uint64
	v := buf[:0]
	for i := range s.c.recent {
		if q := s.c.recent[i].Load(); q > s.consumed {
			v = append(v, q)
		}
	}
	slices.Sort(v)
	best, cur := 0, 0
	for i, q := range v {
		switch {
		case i > 0 && q == v[i-1]:
		case i > 0 && q == v[i-1]+1:
			cur++
		default:
			cur = 1
		}
		best = max(best, cur)
	}
	s.run = best
	return best
}

// base records the current counters (once a bucket) and returns the
// sample the rate rule measures from: the newest one at least interval
// old, or the oldest there is.
func (s *state) base(now time.Time, cur [4]uint64, interval time.Duration) sample {
	if len(s.hist) == 0 || now.Sub(s.hist[len(s.hist)-1].at) >= interval/buckets {
		s.hist = append(s.hist, sample{now, cur})
	}
	cut := now.Add(-interval)
	i := 0
	for i+1 < len(s.hist) && !s.hist[i+1].at.After(cut) {
		i++
	}
	s.hist = s.hist[:copy(s.hist, s.hist[i:])]
	return s.hist[0]
}

// check applies the rules to a server that is in.
func (d *Detector) check(s *state, now time.Time) (candidate, bool) {
	c := candidate{s: s}
	found := false
	if run := s.longestRun(); run >= d.cfg.ConsecutiveFailures {
		c.kind, c.reason, c.severity, found = reasonConsecutive, fmt.Sprintf("%d consecutive re-asks", run), 1, true
	}
	cur := s.read()
	b := s.base(now, cur, d.cfg.Interval)
	span := now.Sub(b.at).Round(time.Second)
	rate := func(req, fail uint64, reason func() string) {
		if req < uint64(d.cfg.MinRequests) || float64(fail) < d.cfg.FailureRate*float64(req) {
			return
		}
		// Late re-asks of requests sent before the window can push the
		// share above 1; it ranks like a full failure.
		if sev := min(float64(fail)/float64(req), 1); !found || sev > c.severity {
			c.kind, c.reason, c.severity, found = reasonRate, reason(), sev, true
		}
	}
	req, fail := cur[0]-b.v[0], cur[1]-b.v[1]
	rate(req, fail, func() string {
		return fmt.Sprintf("failure rate %.0f%% (%d/%d) over %v", 100*float64(fail)/float64(req), fail, req, span)
	})
	ereq, eerr := cur[2]-b.v[2], cur[3]-b.v[3]
	rate(ereq, eerr, func() string {
		return fmt.Sprintf("edge reported %d errors in %d requests over %v", eerr, ereq, span)
	})
	return c, found
}

// allowed is how many of a node's k servers may be ejected at once.
func (d *Detector) allowed(k int) int {
	// The epsilon keeps 0.3 x 10 at 3, not 2.9999.
	return max(0, min(int(math.Floor(d.cfg.MaxEjectedShare*float64(k)+1e-9)), k-1))
}

// Evaluate applies the rules at now: it returns the servers whose ejection
// is over, ejects failing ones (the most failing first, within
// max_ejected_share of each node) and reports whether the ejected set
// changed, i.e. whether the routing engine must be rebuilt (EjectedSet).
// Call it about once a second (Run does).
func (d *Detector) Evaluate(now time.Time) (changed bool) {
	if d.slots == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.states {
		if s.ejected && !now.Before(s.until) {
			d.restore(s, now, "ejection over")
			changed = true
		}
	}
	clear(d.nodeTotal)
	clear(d.nodeOut)
	for _, s := range d.states {
		d.nodeTotal[s.node]++
		if s.ejected {
			d.nodeOut[s.node]++
		}
	}
	// A node can hold more ejected servers than its share allows after
	// SetServers shrank it: return those closest to the end first.
	for node, out := range d.nodeOut {
		if excess := out - d.allowed(d.nodeTotal[node]); excess > 0 {
			changed = true
			d.returnEarly(node, excess, now)
			d.nodeOut[node] -= excess
		}
	}
	cands := d.cands[:0]
	for _, s := range d.states {
		if s.ejected {
			continue
		}
		if s.count > 0 && now.Sub(s.returned) >= d.cfg.MaxEjection {
			s.count = 0
		}
		if c, ok := d.check(s, now); ok {
			cands = append(cands, c)
		} else {
			s.skipped = ""
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if c := cmp.Compare(b.severity, a.severity); c != 0 {
			return c
		}
		return cmp.Compare(a.s.idx, b.s.idx)
	})
	for _, c := range cands {
		s := c.s
		if d.nodeOut[s.node] >= d.allowed(d.nodeTotal[s.node]) {
			if s.skipped == "" {
				d.m.skipped.Inc()
				d.log.Info("outlier: server failing but node at max_ejected_share; left in",
					"server", s.name, "reason", c.reason)
			}
			s.skipped = c.reason
			continue
		}
		d.nodeOut[s.node]++
		d.eject(s, c, now)
		changed = true
	}
	clear(cands) // drop the state pointers
	d.cands = cands[:0]
	d.m.ejected.Set(float64(d.ejectedCount()))
	return changed
}

func (d *Detector) eject(s *state, c candidate, now time.Time) {
	s.count++
	dur := min(time.Duration(s.count)*d.cfg.BaseEjection, d.cfg.MaxEjection)
	s.ejected, s.until, s.reason, s.skipped = true, now.Add(dur), c.reason, ""
	d.m.ejections.WithLabelValues(c.kind).Inc()
	d.log.Info("outlier: server ejected", "server", s.name, "reason", c.reason,
		"for", dur, "ejections", s.count)
}

func (d *Detector) restore(s *state, now time.Time, why string) {
	s.ejected, s.returned = false, now
	s.spend()
	d.log.Info("outlier: server returned", "server", s.name, "why", why,
		"ejected_for", s.reason, "ejections", s.count)
}

func (d *Detector) returnEarly(node int32, n int, now time.Time) {
	var out []*state
	for _, s := range d.states {
		if s.node == node && s.ejected {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *state) int {
		if c := a.until.Compare(b.until); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	for _, s := range out[:n] {
		d.restore(s, now, "node over max_ejected_share")
	}
}

// Run calls Evaluate every interval until ctx is done, and onChange (if
// not nil) after each evaluation that changed the ejected set.
func (d *Detector) Run(ctx context.Context, interval time.Duration, onChange func()) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if d.Evaluate(now) && onChange != nil {
				onChange()
			}
		}
	}
}
