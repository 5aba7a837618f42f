package announce_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/routing/announce"
	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
	"github.com/anysched/anysched/internal/testbed/bgptest"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var (
	vip4 = netip.MustParsePrefix("198.18.0.1/32")
	vip6 = netip.MustParsePrefix("fd00:a::1/128")
)

func dualTargets() []announce.Target {
	return []announce.Target{{Family: announce.IPv4, Prefix: vip4}, {Family: announce.IPv6, Prefix: vip6}}
}

// routesByPrefix is what the router learned: prefix -> next hop.
func routesByPrefix(t *testing.T, r *bgptest.Router) map[string]string {
	out := map[string]string{}
	for _, rt := range r.Routes(t) {
		if _, dup := out[rt.Prefix]; dup {
			out[rt.Prefix] += " " + rt.NextHop
			continue
		}
		out[rt.Prefix] = rt.NextHop
	}
	return out
}

// dualStackSpeaker runs a speaker with an IPv4 and an IPv6 session to a
// dual-stack GoBGP router until the test ends.
func dualStackSpeaker(t *testing.T) (*bgptest.Router, *announce.BGP) {
	r := bgptest.NewDualStack(t, 65000, 65101)
	sp := announce.NewBGP(announcecfg.BGP{ASN: 65101, RouterID: netip.MustParseAddr("10.1.0.1"), Peers: []announcecfg.BGPPeer{
		{Address: netip.MustParseAddr("127.0.0.1"), Port: r.Port, ASN: 65000, HoldTime: 3 * time.Second},
		{Address: netip.MustParseAddr("::1"), Port: r.Port, ASN: 65000, HoldTime: 3 * time.Second},
	}}, quiet)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sp.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, sp
}

// TestBGPEachFamilyOverItsSession: a dual-stack speaker with an IPv4 and an
// IPv6 session announces the /32 over the IPv4 one and the /128 over the
// IPv6 one, each with a next hop of its family (the session's local
// address), and withdraws one family without touching the other.
func TestBGPEachFamilyOverItsSession(t *testing.T) {
	r, sp := dualStackSpeaker(t)
	ctx := context.Background()

	if err := sp.Set(ctx, map[netip.Prefix]announce.Attrs{vip4: {}, vip6: {}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"198.18.0.1/32": "127.0.0.1", "fd00:a::1/128": "::1"}
	wait.For(t, "both families learned, each once, with a next hop of its family", wait.DefaultTimeout, func() bool {
		got := routesByPrefix(t, r)
		return len(got) == 2 && got["198.18.0.1/32"] == want["198.18.0.1/32"] && got["fd00:a::1/128"] == want["fd00:a::1/128"]
	})
	if err := sp.Set(ctx, map[netip.Prefix]announce.Attrs{vip4: {}}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the /128 withdrawn, the /32 kept", wait.DefaultTimeout, func() bool {
		got := routesByPrefix(t, r)
		return len(got) == 1 && got["198.18.0.1/32"] == "127.0.0.1"
	})
}

// TestDrillWithdrawsAndRestoresBothFamilies: the controller over a real
// GoBGP peer announces both families, a drill withdraws both at the router
// and both come back after it; the state gauge follows per family.
func TestDrillWithdrawsAndRestoresBothFamilies(t *testing.T) {
	r, sp := dualStackSpeaker(t)

	var until atomic.Int64
	c := &announce.Controller{Speaker: sp, Logger: quiet, Ready: func() error { return nil },
		Drilled: func(now time.Time) bool { return now.UnixNano() < until.Load() },
		Options: announce.ControllerOptions{Targets: dualTargets, Timing: announcecfg.Timing{CheckInterval: 10 * time.Millisecond, Rise: 1, Fall: 3}}}
	reg := prometheus.NewRegistry()
	c.Register(reg)
	run(t, c)
	wait.For(t, "both learned", wait.DefaultTimeout, func() bool { return len(routesByPrefix(t, r)) == 2 })
	if v4, v6 := stateOf(c, "ipv4"), stateOf(c, "ipv6"); v4 != 1 || v6 != 1 {
		t.Fatalf("anysched_announce_state ipv4 %v ipv6 %v, want 1 1", v4, v6)
	}
	until.Store(time.Now().Add(time.Second).UnixNano())
	wait.For(t, "both withdrawn by the drill", wait.DefaultTimeout, func() bool { return len(routesByPrefix(t, r)) == 0 })
	for _, f := range c.Families() {
		if f.Announced || f.Why != "withdrawn by a failover drill" {
			t.Fatalf("during the drill %s: %+v", f.Family, f)
		}
	}
	if v4, v6 := stateOf(c, "ipv4"), stateOf(c, "ipv6"); v4 != 0 || v6 != 0 {
		t.Fatalf("during the drill anysched_announce_state ipv4 %v ipv6 %v, want 0 0", v4, v6)
	}
	wait.For(t, "both back after the drill", wait.DefaultTimeout, func() bool { return len(routesByPrefix(t, r)) == 2 })
	for _, f := range []string{"ipv4", "ipv6"} {
		if n := testutil.ToFloat64(c.Changes().WithLabelValues("drill", f)); n != 1 {
			t.Fatalf("anysched_announce_changes_total{reason=drill,family=%s} = %v, want 1", f, n)
		}
	}
}

func stateOf(c *announce.Controller, f string) float64 {
	return testutil.ToFloat64(c.StateGauge().WithLabelValues(f))
}

// failing6 is a speaker whose IPv6 routes fail while broken is set.
type failing6 struct {
	mu     sync.Mutex
	on     map[netip.Prefix]bool
	broken atomic.Bool
}

func (f *failing6) Set(_ context.Context, routes map[netip.Prefix]announce.Attrs) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	next := map[netip.Prefix]bool{}
	for p := range routes {
		if p.Addr().Is6() && f.broken.Load() {
			errs = append(errs, &announce.RouteError{Prefix: p, Err: errors.New("no route to the IPv6 peer")})
			continue
		}
		next[p] = true
	}
	f.on = next
	return errors.Join(errs...)
}
func (f *failing6) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (f *failing6) announced(p netip.Prefix) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.on[p]
}

// TestOneFamilyFailingIsVisible: an IPv6 announcement that fails does not
// hold the IPv4 route back; the IPv6 route's state, its errors counter and
// its reason say so, and it is announced once the speaker recovers.
func TestOneFamilyFailingIsVisible(t *testing.T) {
	sp := &failing6{}
	sp.broken.Store(true)
	c := &announce.Controller{Speaker: sp, Logger: quiet, Ready: func() error { return nil },
		Options: announce.ControllerOptions{Targets: dualTargets, Timing: announcecfg.Timing{CheckInterval: 10 * time.Millisecond, Rise: 1, Fall: 3}}}
	reg := prometheus.NewRegistry()
	c.Register(reg)
	run(t, c)
	wait.For(t, "IPv4 announced", wait.DefaultTimeout, func() bool { return sp.announced(vip4) })
	wait.For(t, "IPv6 failure counted", wait.DefaultTimeout, func() bool { return testutil.ToFloat64(c.Errors().WithLabelValues("ipv6")) >= 2 })
	if ok, _ := c.State(); !ok {
		t.Fatal("State says nothing is announced while the IPv4 route is")
	}
	fs := c.Families()
	if len(fs) != 2 || !fs[0].Announced || fs[1].Announced || !strings.Contains(fs[1].Why, "no route to the IPv6 peer") {
		t.Fatalf("families %+v", fs)
	}
	if v4, v6 := stateOf(c, "ipv4"), stateOf(c, "ipv6"); v4 != 1 || v6 != 0 {
		t.Fatalf("anysched_announce_state ipv4 %v ipv6 %v, want 1 0", v4, v6)
	}
	if n := testutil.ToFloat64(c.Errors().WithLabelValues("ipv4")); n != 0 {
		t.Fatalf("ipv4 errors %v, want 0", n)
	}
	sp.broken.Store(false)
	wait.For(t, "IPv6 announced after the speaker recovered", wait.DefaultTimeout, func() bool { return sp.announced(vip6) })
	wait.For(t, "IPv6 state 1", wait.DefaultTimeout, func() bool { return stateOf(c, "ipv6") == 1 })
}

// TestFamilyWithoutRouteIsReported: a target that cannot be announced (the
// route safety check refused it) is reported with its reason while the
// other family is announced.
func TestFamilyWithoutRouteIsReported(t *testing.T) {
	sp := &failing6{}
	refused := errors.New("topology: refusing to announce fd00::/8: shorter than /48")
	c := &announce.Controller{Speaker: sp, Logger: quiet, Ready: func() error { return nil },
		Options: announce.ControllerOptions{Targets: func() []announce.Target {
			return []announce.Target{{Family: announce.IPv4, Prefix: vip4}, {Family: announce.IPv6, Err: refused}}
		}, Timing: announcecfg.Timing{CheckInterval: 10 * time.Millisecond, Rise: 1, Fall: 3}}}
	run(t, c)
	wait.For(t, "IPv4 announced", wait.DefaultTimeout, func() bool { return sp.announced(vip4) })
	fs := c.Families()
	if len(fs) != 2 || !fs[0].Announced || fs[1].Announced || fs[1].Why != refused.Error() {
		t.Fatalf("families %+v", fs)
	}
}
