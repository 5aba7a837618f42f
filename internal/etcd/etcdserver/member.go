package etcdserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdmember"
)

// MemberControl is the drill endpoint of one member of a lab's etcd cluster
// (bin/lab etcd-member serves it next to the member). The central
// scheduler's etcd-loss drill asks it to stop the member for a while; the
// member starts again by itself when the time is up, so it comes back even
// if the center is gone meanwhile.
//
//	GET  /member                 the etcdmember.State
//	POST /member/stop?for=5s     stop now; start again 5 s after it has left
//	                             the group (409 if stopped)
//	POST /member/release?at=T    start again at T (RFC 3339) instead, once
//	                             it has left (409 if not stopped)
//
// The hold counts from when the member has left, not from the request: a
// member that drains watch streams stays in the raft group for seconds
// after it is asked to stop, and two members stopped "for 6 s" could then
// overlap by less, or not at all, and the quorum never be lost. etcdmember.StopAll
// releases the members it stopped together, once all have left.
type MemberControl struct {
	Etcd *Embedded
	Ctx  context.Context // bounds the restarts (the member process's life)
	Log  *slog.Logger

	mu      sync.Mutex
	stopped bool
	left    time.Time
	until   time.Time     // zero until the member has left, unless released earlier
	hold    time.Duration // the stop's duration, counted from left
	moved   chan struct{} // closed when until changes
	err     string
}

func (m *MemberControl) state() etcdmember.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Not the server's own state: it is locked while the server stops or
	// starts (seconds), and the endpoint must answer meanwhile.
	return etcdmember.State{Name: m.Etcd.Name(), Running: !m.stopped, Left: m.left, Until: m.until, Error: m.err}
}

// ServeHTTP implements the endpoint.
func (m *MemberControl) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/member" && r.Method == http.MethodGet:
	case r.URL.Path == "/member/stop" && r.Method == http.MethodPost:
		d, err := time.ParseDuration(r.URL.Query().Get("for"))
		if err != nil || d < time.Second || d > 10*time.Minute {
			http.Error(w, "for: a duration in [1s, 10m]", http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		if m.stopped {
			m.mu.Unlock()
			http.Error(w, "already stopped by a drill", http.StatusConflict)
			return
		}
		m.stopped, m.left, m.until, m.hold, m.err = true, time.Time{}, time.Time{}, d, ""
		m.moved = make(chan struct{})
		m.mu.Unlock()
		go m.run() // stopping takes a moment (etcd drains clients, hands over leadership): answer now
	case r.URL.Path == "/member/release" && r.Method == http.MethodPost:
		at, err := time.Parse(time.RFC3339Nano, r.URL.Query().Get("at"))
		if err != nil || time.Until(at) > 10*time.Minute {
			http.Error(w, "at: an RFC 3339 time within 10 minutes", http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		if !m.stopped {
			m.mu.Unlock()
			http.Error(w, "not stopped by a drill", http.StatusConflict)
			return
		}
		m.until = at
		close(m.moved)
		m.moved = make(chan struct{})
		m.mu.Unlock()
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m.state())
}

// run stops the member, holds it down until its release (hold after it
// left, or the time release set), then starts it again (retrying until it
// runs or the process ends).
func (m *MemberControl) run() {
	m.Log.Warn("etcd-loss drill: stopping this member", "member", m.Etcd.Name())
	asked := time.Now()
	m.Etcd.Stop()
	m.mu.Lock()
	m.left = time.Now()
	if m.until.IsZero() {
		m.until = m.left.Add(m.hold)
	}
	m.mu.Unlock()
	m.Log.Warn("etcd-loss drill: member left the group", "member", m.Etcd.Name(), "stopping_took", m.left.Sub(asked).Round(time.Millisecond))
	for {
		m.mu.Lock()
		until, moved := m.until, m.moved
		m.mu.Unlock()
		d := time.Until(until)
		if d <= 0 {
			break
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-moved:
			t.Stop()
		case <-m.Ctx.Done():
			t.Stop()
			return
		}
	}
	for {
		err := m.Etcd.Start(m.Ctx)
		if err == nil {
			break
		}
		m.mu.Lock()
		m.err = err.Error()
		m.mu.Unlock()
		m.Log.Error("etcd-loss drill: restarting this member failed; retrying", "member", m.Etcd.Name(), "err", err)
		select {
		case <-time.After(time.Second):
		case <-m.Ctx.Done():
			return
		}
	}
	m.mu.Lock()
	m.stopped, m.left, m.until, m.err = false, time.Time{}, time.Time{}, ""
	m.mu.Unlock()
	m.Log.Info("etcd-loss drill over: member running again", "member", m.Etcd.Name())
}
