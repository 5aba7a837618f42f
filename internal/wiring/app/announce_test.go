package app_test

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/province/opstate"
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

// forceDrainRegion drains a whole region as an admin's forced drain does
// (schedulers keep a region's last server serving otherwise); written
// straight to etcd (unsigned: this province has no keys) until schedctl
// drain has --force.
func forceDrainRegion(t *testing.T, cc config.Center, region string) {
	t.Helper()
	cli, err := etcdclient.Connect(config.Etcd{DialTimeout: 2 * time.Second}, []string{"http://" + cc.Etcd.Embedded.ClientListen}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := opstate.SetDrain(ctx, cli, cc.Etcd.Prefix, nil, opstate.Drain{Kind: opstate.DrainRegion, Name: region, Forced: true}); err != nil {
		t.Fatalf("drain region %s: %v", region, err)
	}
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
	forceDrainRegion(t, cc, "hefei")
	time.Sleep(500 * time.Millisecond) // what must not happen: the drain reaches the scheduler within this and must not withdraw
	if rs := router.Routes(t); len(rs) != 1 {
		t.Fatal("withdrawn although other regions can serve")
	}
	// Every region drained: nowhere to send STBs, withdraw and say why.
	out, _ := schedctl(t, cc.GRPC.Listen, "get", "regions", "-o", "json")
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), `"name": "`); ok {
			forceDrainRegion(t, cc, strings.TrimSuffix(name, `",`))
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
