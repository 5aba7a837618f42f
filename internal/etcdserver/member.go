package etcdserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// MemberState is what a lab etcd member's control endpoint reports.
type MemberState struct {
	Name    string    `json:"name"`
	Running bool      `json:"running"`
	Until   time.Time `json:"until,omitzero"`  // while a drill holds it down
	Error   string    `json:"error,omitempty"` // the last failed restart
}

// MemberControl is the drill endpoint of one member of a lab's etcd cluster
// (bin/lab etcd-member serves it next to the member). The central
// scheduler's etcd-loss drill asks it to stop the member for a while; the
// member starts again by itself when the time is up, so it comes back even
// if the center is gone meanwhile.
//
//	GET  /member              the MemberState
//	POST /member/stop?for=5s  stop now, start again after 5 s (409 if stopped)
type MemberControl struct {
	Etcd *Embedded
	Ctx  context.Context // bounds the restarts (the member process's life)
	Log  *slog.Logger

	mu    sync.Mutex
	until time.Time
	err   string
}

func (m *MemberControl) state() MemberState {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Not the server's own state: it is locked while the server stops or
	// starts (seconds), and the endpoint must answer meanwhile.
	return MemberState{Name: m.Etcd.Name(), Running: m.until.IsZero(), Until: m.until, Error: m.err}
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
		if !m.until.IsZero() {
			m.mu.Unlock()
			http.Error(w, "already stopped by a drill", http.StatusConflict)
			return
		}
		m.until, m.err = time.Now().Add(d), ""
		until := m.until
		m.mu.Unlock()
		go m.hold(until) // stopping takes a moment (etcd hands over leadership): answer now
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m.state())
}

// hold stops the member until the given time, then starts it again (retrying
// until it runs or the process ends).
func (m *MemberControl) hold(until time.Time) {
	m.Log.Warn("etcd-loss drill: stopping this member", "member", m.Etcd.Name(), "until", until)
	m.Etcd.Stop()
	select {
	case <-time.After(time.Until(until)):
	case <-m.Ctx.Done():
		return
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
	m.until, m.err = time.Time{}, ""
	m.mu.Unlock()
	m.Log.Info("etcd-loss drill over: member running again", "member", m.Etcd.Name())
}

// StopMember asks the control endpoint at addr (host:port) to stop its
// member for d.
func StopMember(ctx context.Context, addr string, d time.Duration) (MemberState, error) {
	return memberCall(ctx, http.MethodPost, "http://"+addr+"/member/stop?for="+url.QueryEscape(d.String()))
}

// GetMember reads the state of the member behind the control endpoint at addr.
func GetMember(ctx context.Context, addr string) (MemberState, error) {
	return memberCall(ctx, http.MethodGet, "http://"+addr+"/member")
}

func memberCall(ctx context.Context, method, u string) (MemberState, error) {
	st, err := callMember(ctx, method, u)
	if err != nil {
		return st, fmt.Errorf("etcdserver: member control: %w", err)
	}
	return st, nil
}

func callMember(ctx context.Context, method, u string) (MemberState, error) {
	var st MemberState
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("unreadable answer: %w", err)
	}
	return st, nil
}
