package lab_test

import (
	"bytes"
	"context"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/lab"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// The rights lab: live's ch1 and all of VOD blacked out in hefei; a third
// service, spill, served by hefei's live servers only, with a tiny request
// budget and a bypass to the national CDN.
const (
	spillHost   = "spill.iptv.example"
	spillCNAME  = "spill.national-cdn.example"
	slateAddr   = "192.0.2.50"
	spillPerSrv = 1 // requests/s per server: hefei's live node (2 servers) is over at 2/s
)

func rightsTopology(tp *topology.Topology) {
	now := time.Now().UTC()
	for i := range tp.Nodes {
		n := &tp.Nodes[i]
		if n.Region != "hefei" || n.Labels[topogen.FleetLabel] != topogen.FleetLive {
			continue
		}
		n.Labels = topology.Labels{topogen.FleetLabel: topogen.FleetLive, "spill": "yes"}
	}
	var spill topology.Service
	for i := range tp.Services {
		sv := &tp.Services[i]
		switch sv.Name {
		case topogen.ServiceName:
			spill = *sv
			sv.Slate = &topology.Slate{URL: "http://slate.iptv.example/{region}/{channel}.m3u8"}
			sv.Rights = []topology.Rule{{Name: "derby", Channels: []string{"ch1"}, Regions: []string{"hefei"}, Action: topology.ActionBlackout,
				From: now.Add(-time.Hour).Format(time.RFC3339), Until: now.Add(time.Hour).Format(time.RFC3339)}}
		case topogen.VODServiceName:
			sv.Slate = &topology.Slate{URL: "http://slate.iptv.example/vod.m3u8", Addresses: []string{slateAddr}}
			sv.Rights = []topology.Rule{{Regions: []string{"hefei"}, Action: topology.ActionBlackout}}
		}
	}
	spill.Name, spill.Hostnames = "spill", []string{spillHost}
	spill.Match = topology.Labels{topogen.FleetLabel: topogen.FleetLive, "spill": "yes"}
	spill.Overflow = &topology.Overflow{RPSPerServer: spillPerSrv}
	spill.Bypass = &topology.Bypass{URLTemplate: "http://national-cdn.example/{region}/{channel}/index.m3u8", CNAME: spillCNAME}
	tp.Services = append(tp.Services, spill)
}

// dig asks the Anycast address from city i's client namespace, as a
// DNS-steered STB does, and returns the answer's records' data.
func dig(t *testing.T, l *lab.Lab, i int, name string) string {
	t.Helper()
	ns := l.NS("c1")
	if i == 1 {
		ns = l.NS("c2")
	}
	out, err := exec.Command("ip", "netns", "exec", ns, "dig", "+short", "+norecurse", "+time=1", "+tries=2",
		"@"+lab.ServiceIP.String(), name, "A").Output()
	if err != nil {
		t.Fatalf("dig %s from city %d: %v", name, i, err)
	}
	return string(bytes.TrimSpace(out))
}

// TestPrivilegedRights: with real clients (curl, dig) against two cities'
// schedulers, a channel blacked out in hefei is sent to the slate there and
// served in wuhu; a service blacked out in hefei is answered over DNS with
// the slate's address there and an edge's in wuhu; and a service whose
// every node is over its overflow threshold sends new STBs to its bypass
// (302 and CNAME) while the load lasts, and to the province again after.
func TestPrivilegedRights(t *testing.T) {
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skip("needs dig")
	}
	start := time.Now()
	cities := []string{"hefei", "wuhu"}
	l := provinceWith(t, "rtb", lab.Options{Cities: cities, Topology: rightsTopology})
	for i, c := range cities {
		answeredBy(t, l, i, lab.PrimaryID(c), 60*time.Second)
	}
	t.Logf("province up in %s", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()

	// Item: a channel blacked out in one city and not the other (HTTP).
	for _, tc := range []struct {
		city       int
		path, want string
		loc        string // the redirect, or "" for an edge of the city's live fleet
	}{
		{0, "/ch1/index.m3u8", steer.ResultBlackout.String(), "http://slate.iptv.example/hefei/ch1.m3u8"},
		{0, "/ch2/index.m3u8", steer.ResultCZ.String(), ""},
		{1, "/ch1/index.m3u8", steer.ResultCZ.String(), ""},
	} {
		a, err := l.Ask(ctx, tc.city, lab.Query{Path: tc.path})
		ok := err == nil && a.Status == 302 && a.Result == tc.want && a.Instance == lab.PrimaryID(cities[tc.city])
		if tc.loc != "" {
			ok = ok && a.Location == tc.loc
		} else {
			ok = ok && containsAny(a.Location, fleetAddrs(l, cities[tc.city], topogen.FleetLive)...)
		}
		if !ok {
			t.Errorf("%s from %s: %+v %v; want %s %s", tc.path, cities[tc.city], a, err, tc.want, tc.loc)
		}
	}
	// A service blacked out in hefei, over DNS.
	if got := dig(t, l, 0, topogen.VODHostname); got != slateAddr {
		t.Errorf("dig %s from hefei: %q, want the slate %s", topogen.VODHostname, got, slateAddr)
	}
	if got := dig(t, l, 1, topogen.VODHostname); !containsAny(got, hostsOf(fleetAddrs(l, "wuhu", topogen.FleetVOD))...) {
		t.Errorf("dig %s from wuhu: %q, want one of wuhu's VOD servers", topogen.VODHostname, got)
	}
	if m, err := l.Metrics(ctx, 0); err != nil {
		t.Error(err)
	} else if v, ok := metric(m, "anysched_requests_total", `proto="http"`, `result="BLACKOUT"`); !ok || v < 1 {
		t.Errorf("hefei: anysched_requests_total{proto=\"http\",result=\"BLACKOUT\"} = %v (found %v)", v, ok)
	}

	// Item: the province bypass. wuhu has no server of spill: its STBs
	// fall back to hefei's node until that is over its budget.
	hefeiLive := fleetAddrs(l, "hefei", topogen.FleetLive)
	spill := lab.Query{Host: spillHost}
	if a, err := l.Ask(ctx, 1, spill); err != nil || a.Status != 302 || a.Result != steer.ResultFallback.String() || !containsAny(a.Location, hefeiLive...) {
		t.Fatalf("spill before the load: %+v %v; want FALLBACK to hefei", a, err)
	}
	loadCtx, stopLoad := context.WithTimeout(ctx, 15*time.Second)
	load := exec.CommandContext(loadCtx, "ip", "netns", "exec", l.NS("c2"), "curl", "-s", "--max-time", "2", "--rate", "20/s",
		"-H", "Host: "+spillHost, "http://"+lab.ServiceIP.String()+"/load[1-300]/index.m3u8")
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	loadDone := make(chan struct{})
	go func() { _ = load.Wait(); close(loadDone) }()
	t.Cleanup(func() { stopLoad(); <-loadDone })
	const bypassURL = "http://national-cdn.example/wuhu/ch1/index.m3u8"
	var last lab.Answer
	wait.ForEvery(t, "wuhu's spill STBs bypassing the province", 8*time.Second, 200*time.Millisecond, func() bool {
		a, err := l.Ask(ctx, 1, spill)
		last = a
		return err == nil && a.Status == 302 && a.Result == steer.ResultBypass.String() && a.Location == bypassURL
	})
	if got := dig(t, l, 1, spillHost); got != spillCNAME+"." {
		t.Errorf("dig %s from wuhu under load: %q, want the CNAME %s.", spillHost, got, spillCNAME)
	}
	if m, err := l.Metrics(ctx, 1); err != nil {
		t.Error(err)
	} else if v, ok := metric(m, "anysched_requests_total", `proto="http"`, `result="BYPASS"`); !ok || v < 1 {
		t.Errorf("wuhu: anysched_requests_total{proto=\"http\",result=\"BYPASS\"} = %v (found %v)", v, ok)
	}
	t.Logf("bypassing: %+v", last)
	stopLoad()
	<-loadDone
	// Polled once a second: each ask is demand at hefei's node too (2
	// servers at 1/s each, back under 0.8 of that), and asking twice a
	// second kept it over for as long as the asks came quickly.
	back := wait.ForEvery(t, "wuhu's spill STBs back in the province", 15*time.Second, time.Second, func() bool {
		a, err := l.Ask(ctx, 1, spill)
		last = a
		return err == nil && a.Status == 302 && a.Result == steer.ResultFallback.String() && containsAny(a.Location, hefeiLive...)
	})
	t.Logf("back in the province %s after the load's end", back.Round(time.Millisecond))
	t.Logf("done in %s", time.Since(start).Round(time.Millisecond))
}

// hostsOf drops the ports of host:port addresses.
func hostsOf(addrs []string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = netip.MustParseAddrPort(a).Addr().String()
	}
	return out
}
