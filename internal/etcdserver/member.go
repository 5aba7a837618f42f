package etcdserver

import (
	"context"
	"encoding/json"
	"errors"
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
	Name    string `json:"name"`
	Running bool   `json:"running"`
	// Left is when a stopped member finished stopping: it had served its
	// clients' last requests and left the raft group. Zero while it runs,
	// and while it stops (etcd drains its clients for up to its request
	// timeout, ~7 s, still voting in the group all that time).
	Left  time.Time `json:"left,omitzero"`
	Until time.Time `json:"until,omitzero"`  // while a drill holds it down: when it starts again
	Error string    `json:"error,omitempty"` // the last failed restart
}

// MemberControl is the drill endpoint of one member of a lab's etcd cluster
// (bin/lab etcd-member serves it next to the member). The central
// scheduler's etcd-loss drill asks it to stop the member for a while; the
// member starts again by itself when the time is up, so it comes back even
// if the center is gone meanwhile.
//
//	GET  /member                 the MemberState
//	POST /member/stop?for=5s     stop now; start again 5 s after it has left
//	                             the group (409 if stopped)
//	POST /member/release?at=T    start again at T (RFC 3339) instead, once
//	                             it has left (409 if not stopped)
//
// The hold counts from when the member has left, not from the request: a
// member that drains watch streams stays in the raft group for seconds
// after it is asked to stop, and two members stopped "for 6 s" could then
// overlap by less, or not at all, and the quorum never be lost. StopMembers
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

func (m *MemberControl) state() MemberState {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Not the server's own state: it is locked while the server stops or
	// starts (seconds), and the endpoint must answer meanwhile.
	return MemberState{Name: m.Etcd.Name(), Running: !m.stopped, Left: m.left, Until: m.until, Error: m.err}
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

// StopMembers stops the members behind the control endpoints at addrs
// together, waits until every one has left the group, then releases them
// all at the same moment, d later: the group is down to the others for d,
// whatever each member took to stop. It returns the members' names (in the
// order of addrs) and when they start again. If a member cannot be asked or
// does not leave within leaveWithin, the error says which; those stopped
// start again by themselves d + leaveWithin after they left (the longer
// hold keeps a member that left early down until the slowest has left).
func StopMembers(ctx context.Context, addrs []string, d, leaveWithin time.Duration) ([]string, time.Time, error) {
	names, errs := make([]string, len(addrs)), make([]error, len(addrs))
	fallback := min(d+leaveWithin, 10*time.Minute)
	var wg sync.WaitGroup
	for i, addr := range addrs { // together: the quorum goes at once
		wg.Go(func() {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			st, err := StopMember(actx, addr, fallback)
			names[i], errs[i] = st.Name, err
		})
	}
	wg.Wait()
	if err := joinMemberErrors(addrs, errs); err != nil {
		return names, time.Time{}, fmt.Errorf("etcdserver: stopping members (those stopped start again by themselves): %w", err)
	}
	deadline := time.Now().Add(leaveWithin)
	for i, addr := range addrs {
		for {
			st, err := GetMember(ctx, addr)
			if err == nil && !st.Left.IsZero() {
				break
			}
			if err == nil && st.Running {
				errs[i] = fmt.Errorf("%s is running again before the others left", st.Name)
				break
			}
			if time.Now().After(deadline) {
				errs[i] = fmt.Errorf("%s had not left the group %s after the stop (last: %+v, %v)", names[i], leaveWithin, st, err)
				break
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return names, time.Time{}, ctx.Err()
			}
		}
	}
	if err := joinMemberErrors(addrs, errs); err != nil {
		return names, time.Time{}, fmt.Errorf("etcdserver: waiting for the members to leave: %w", err)
	}
	until := time.Now().Add(d)
	for i, addr := range addrs {
		errs[i] = releaseMember(ctx, addr, until)
	}
	if err := joinMemberErrors(addrs, errs); err != nil {
		return names, until, fmt.Errorf("etcdserver: releasing the members together (the others start again by themselves): %w", err)
	}
	return names, until, nil
}

// joinMemberErrors joins the errors of the calls to addrs, each named by
// its address; nil when all succeeded.
func joinMemberErrors(addrs []string, errs []error) error {
	var named []error
	for i, err := range errs {
		if err != nil {
			named = append(named, fmt.Errorf("%s: %w", addrs[i], err))
		}
	}
	return errors.Join(named...)
}

// releaseMember asks the control endpoint at addr to start its stopped
// member at t.
func releaseMember(ctx context.Context, addr string, t time.Time) error {
	_, err := memberCall(ctx, http.MethodPost, "http://"+addr+"/member/release?at="+url.QueryEscape(t.Format(time.RFC3339Nano)))
	return err
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
