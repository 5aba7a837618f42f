package app_test

import (
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/routing/announce"
	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
	"github.com/anysched/anysched/internal/testbed/bgptest"
	"github.com/anysched/anysched/internal/wiring/config"
)

func bgpAnnounce(r *bgptest.Router, asn uint32) announcecfg.Config {
	a := config.DefaultRegional().Announce
	a.Mode, a.CheckInterval, a.Rise, a.Fall, a.HoldDown = "bgp", 50*time.Millisecond, 2, 2, 0
	a.Drain.PreWithdraw, a.Drain.Linger = 600*time.Millisecond, 800*time.Millisecond
	a.BGP = announcecfg.BGP{ASN: asn, RouterID: netip.MustParseAddr("10.1.0.2"), MED: 10, Communities: []announcecfg.Community{65101<<16 | 100},
		Peers: []announcecfg.BGPPeer{{Address: netip.MustParseAddr("127.0.0.1"), Port: r.Port, ASN: 65000, HoldTime: 3 * time.Second}}}
	return a
}

// TestAnnouncementFollowsReadiness runs a regional scheduler announcing over
// BGP (embedded GoBGP) to a GoBGP router: the /32 appears once the scheduler
// is ready, stays while any region can take its STBs, goes when none can
// (with the reason in status), and on stop the router sees
// GRACEFUL_SHUTDOWN, then the withdrawal, while the scheduler still answers.
func TestAnnouncementFollowsReadiness(t *testing.T) {
	router := bgptest.New(t, 65000, 65101, "")
	cc := centerConfig(t)
	cc.Drills.AllowProduction = true // the drill below runs as on a production center
	runCenter(t, &cc)
	waitUp(t, "center", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })

	rc := regionalConfig(t, cc, "hefei")
	rc.HTTP.Listen = anyPort
	rc.Announce = bgpAnnounce(router, 65101)
	rc.Anycast.ManageAddress = false // no root: the address is the host's business here
	if err := rc.Validate(); err != nil {
		t.Fatal(err)
	}
	stop := runRegional(t, &rc)
	time.Sleep(500 * time.Millisecond) // what must not happen: several readiness checks (200 ms) pass without a topology
	if rs := router.Routes(t); len(rs) != 0 {
		t.Fatalf("announced before any topology: %v", rs)
	}
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", "../../../deploy/examples/topology.yaml"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	waitUp(t, "the /32 is announced", func() bool {
		rs := router.Routes(t)
		return len(rs) == 1 && rs[0].Prefix == "198.18.0.1/32" && rs[0].MED == 10 && slices.Contains(rs[0].Communities, 65101<<16|100)
	})
	waitUp(t, "status shows the route and the session", func() bool {
		out, _ := schedctl(t, cc.GRPC.Listen, "status")
		return strings.Contains(out, "198.18.0.1/32 announced") && strings.Contains(out, "127.0.0.1(AS65000)=established")
	})

	// hefei's servers drained: other regions can still take hefei's STBs, so
	// the route stays.
	// (An admin forcing past the removal guard: a region left with no
	// serving server is what this is about.)
	if out, err := schedctl(t, cc.GRPC.Listen, "drain", "region", "hefei", "--force"); err != nil {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	time.Sleep(500 * time.Millisecond) // what must not happen: the drain reaches the scheduler within this and must not withdraw
	if rs := router.Routes(t); len(rs) != 1 {
		t.Fatal("withdrawn although other regions can serve")
	}
	// Every region drained: nowhere to send STBs, withdraw and say why.
	out, _ := schedctl(t, cc.GRPC.Listen, "get", "regions", "-o", "json")
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), `"name": "`); ok {
			schedctl(t, cc.GRPC.Listen, "drain", "region", strings.TrimSuffix(name, `",`), "--force")
		}
	}
	waitUp(t, "withdrawn with nothing to serve", func() bool { return len(router.Routes(t)) == 0 })
	waitUp(t, "status says why", func() bool {
		out, _ := schedctl(t, cc.GRPC.Listen, "status")
		return strings.Contains(out, "withdrawn: no available server in any region")
	})
	schedctl(t, cc.GRPC.Listen, "undrain", "region", "wuhu")
	waitUp(t, "announced again", func() bool { return len(router.Routes(t)) == 1 })

	// A failover drill: refused outside a lab unless confirmed; then the
	// route goes for the drill's duration and comes back by itself.
	if _, err := schedctl(t, cc.GRPC.Listen, "drill", "failover", "--region", "hefei", "--duration", "2s"); err == nil || !strings.Contains(err.Error(), "not a lab") {
		t.Fatalf("drill outside a lab without confirmation: %v", err)
	}
	drillOut := make(chan string, 1)
	go func() {
		out, err := schedctl(t, cc.GRPC.Listen, "drill", "failover", "--region", "hefei", "--duration", "3s", "--i-know-this-is-production")
		if err != nil {
			out += err.Error()
		}
		drillOut <- out
	}()
	waitUp(t, "withdrawn by the drill", func() bool { return len(router.Routes(t)) == 0 })
	waitUp(t, "back after the drill", func() bool { return len(router.Routes(t)) == 1 })
	if out := <-drillOut; !strings.Contains(out, "hefei-1 withdrew its route (withdrawn by a failover drill)") || !strings.Contains(out, "hefei-1 announces again") {
		t.Errorf("drill report:\n%s", out)
	}

	// Graceful stop: GRACEFUL_SHUTDOWN first, then the withdrawal; answers go
	// on until the drain is over.
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	waitUp(t, "GRACEFUL_SHUTDOWN seen", func() bool {
		rs := router.Routes(t)
		return len(rs) == 1 && slices.Contains(rs[0].Communities, announce.GracefulShutdown)
	})
	waitUp(t, "withdrawn", func() bool { return len(router.Routes(t)) == 0 })
	req, _ := http.NewRequest("GET", "http://"+rc.HTTP.Listen+"/ch1/index.m3u8", nil)
	req.Host = "live.iptv.example"
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("during the drain the scheduler stopped answering: %v %v", err, resp)
	}
	resp.Body.Close()
	<-stopped
}

// TestDualStackAnnouncement: in a dual-stack province a regional
// scheduler with an IPv4 and an IPv6 session announces its /32 over the one
// and its /128 over the other, each with a next hop of its family; /readyz
// and status show each family's route; a drill withdraws both and both come
// back. With announce.families [ipv6] (an IPv6-only city) it announces the
// /128 alone.
func TestDualStackAnnouncement(t *testing.T) {
	cc := centerConfig(t)
	cc.Lab = true
	runCenter(t, &cc)
	waitUp(t, "center", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })
	doc, err := os.ReadFile("../../../deploy/examples/topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dual := strings.Replace(string(doc), "center_prefix: 198.18.0.0/26", "center_prefix: 198.18.0.0/26\n  service_ip6: 2001:db8:a::1\n  center_prefix6: 2001:db8:a::/48", 1)
	topo := filepath.Join(t.TempDir(), "topology.yaml")
	if err := os.WriteFile(topo, []byte(dual), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", topo); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}

	router := bgptest.NewDualStack(t, 65000, 65101)
	rc := regionalConfig(t, cc, "hefei")
	rc.Announce = bgpAnnounce(router, 65101)
	rc.Announce.BGP.Peers = append(rc.Announce.BGP.Peers, announcecfg.BGPPeer{Address: netip.MustParseAddr("::1"), Port: router.Port, ASN: 65000, HoldTime: 3 * time.Second})
	rc.Anycast.ManageAddress = false
	if err := rc.Validate(); err != nil {
		t.Fatal(err)
	}
	stop := runRegional(t, &rc)
	learned := func() map[string]string {
		out := map[string]string{}
		for _, r := range router.Routes(t) {
			out[r.Prefix] = r.NextHop
		}
		return out
	}
	waitUp(t, "the /32 and the /128 announced, each over its family's session", func() bool {
		got := learned()
		return len(got) == 2 && got["198.18.0.1/32"] == "127.0.0.1" && got["2001:db8:a::1/128"] == "::1"
	})
	readyz := func() string {
		resp, err := http.Get("http://" + rc.Admin.Listen + "/readyz")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waitUp(t, "/readyz shows both routes", func() bool {
		r := readyz()
		return strings.Contains(r, "route ipv4 198.18.0.1/32: announced") && strings.Contains(r, "route ipv6 2001:db8:a::1/128: announced")
	})
	waitUp(t, "status lists both prefixes", func() bool {
		out, _ := schedctl(t, cc.GRPC.Listen, "status")
		return strings.Contains(out, "198.18.0.1/32 2001:db8:a::1/128")
	})
	drillOut := make(chan string, 1)
	go func() {
		// Refused until the center's record says it is ready (it
		// re-registers on its own period after the apply): bounded retries.
		var out string
		for range 40 {
			o, err := schedctl(t, cc.GRPC.Listen, "drill", "failover", "--region", "hefei", "--duration", "2s")
			if out = o; err == nil {
				break
			}
			out += err.Error()
			if !strings.Contains(out, "the center does not announce") {
				break
			}
			time.Sleep(250 * time.Millisecond) // the center's next registration, not a wait on the routes
		}
		drillOut <- out
	}()
	waitUp(t, "both withdrawn by the drill", func() bool {
		select {
		case out := <-drillOut:
			t.Fatalf("the drill ended before the routes went:\n%s\nlearned %v", out, learned())
		default:
		}
		return len(learned()) == 0
	})
	if r := readyz(); !strings.Contains(r, "route ipv6 2001:db8:a::1/128: not announced: withdrawn by a failover drill") {
		t.Errorf("/readyz during the drill:\n%s", r)
	}
	waitUp(t, "both back after the drill", func() bool { return len(learned()) == 2 })
	<-drillOut
	stop()
	waitUp(t, "withdrawn on stop", func() bool { return len(learned()) == 0 })

	// An IPv6-only city's scheduler: its families and its one session.
	rc6 := regionalConfig(t, cc, "hefei")
	rc6.Announce = bgpAnnounce(router, 65101)
	rc6.Announce.Families = []announcecfg.Family{announcecfg.IPv6}
	rc6.Announce.BGP.Peers = []announcecfg.BGPPeer{{Address: netip.MustParseAddr("::1"), Port: router.Port, ASN: 65000, HoldTime: 3 * time.Second}}
	rc6.Anycast.ManageAddress = false
	if err := rc6.Validate(); err != nil {
		t.Fatal(err)
	}
	runRegional(t, &rc6)
	waitUp(t, "the /128 alone", func() bool {
		got := learned()
		return len(got) == 1 && got["2001:db8:a::1/128"] == "::1"
	})
	time.Sleep(300 * time.Millisecond) // what must not happen: several checks (50 ms) announce the /32 too
	if got := learned(); len(got) != 1 {
		t.Fatalf("an IPv6-only scheduler announced %v", got)
	}
}
