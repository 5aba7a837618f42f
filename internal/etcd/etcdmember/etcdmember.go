// Package etcdmember is the client side of a lab etcd member's drill
// endpoint (etcdserver.MemberControl): the state it reports and the calls
// that stop and release members. Apart from etcdserver so that the admin
// API, which a city scheduler's console links too, links no etcd server.
package etcdmember

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// State is what a lab etcd member's control endpoint reports.
type State struct {
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

// StopAll stops the members behind the control endpoints at addrs
// together, waits until every one has left the group, then releases them
// all at the same moment, d later: the group is down to the others for d,
// whatever each member took to stop. It returns the members' names (in the
// order of addrs) and when they start again. If a member cannot be asked or
// does not leave within leaveWithin, the error says which; those stopped
// start again by themselves d + leaveWithin after they left (the longer
// hold keeps a member that left early down until the slowest has left).
func StopAll(ctx context.Context, addrs []string, d, leaveWithin time.Duration) ([]string, time.Time, error) {
	names, errs := make([]string, len(addrs)), make([]error, len(addrs))
	fallback := min(d+leaveWithin, 10*time.Minute)
	var wg sync.WaitGroup
	for i, addr := range addrs { // together: the quorum goes at once
		wg.Go(func() {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			st, err := Stop(actx, addr, fallback)
			names[i], errs[i] = st.Name, err
		})
	}
	wg.Wait()
	if err := joinMemberErrors(addrs, errs); err != nil {
		return names, time.Time{}, fmt.Errorf("etcdmember: stopping members (those stopped start again by themselves): %w", err)
	}
	deadline := time.Now().Add(leaveWithin)
	for i, addr := range addrs {
		for {
			st, err := Get(ctx, addr)
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
		return names, time.Time{}, fmt.Errorf("etcdmember: waiting for the members to leave: %w", err)
	}
	until := time.Now().Add(d)
	for i, addr := range addrs {
		errs[i] = releaseMember(ctx, addr, until)
	}
	if err := joinMemberErrors(addrs, errs); err != nil {
		return names, until, fmt.Errorf("etcdmember: releasing the members together (the others start again by themselves): %w", err)
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

// Stop asks the control endpoint at addr (host:port) to stop its
// member for d.
func Stop(ctx context.Context, addr string, d time.Duration) (State, error) {
	return memberCall(ctx, http.MethodPost, "http://"+addr+"/member/stop?for="+url.QueryEscape(d.String()))
}

// Get reads the state of the member behind the control endpoint at addr.
func Get(ctx context.Context, addr string) (State, error) {
	return memberCall(ctx, http.MethodGet, "http://"+addr+"/member")
}

func memberCall(ctx context.Context, method, u string) (State, error) {
	st, err := callMember(ctx, method, u)
	if err != nil {
		return st, fmt.Errorf("etcdmember: member control: %w", err)
	}
	return st, nil
}

func callMember(ctx context.Context, method, u string) (State, error) {
	var st State
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
