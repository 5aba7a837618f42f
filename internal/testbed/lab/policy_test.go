package lab_test

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/lab"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// fleetAddrs returns the addresses (host:port) of a region's servers in a
// fleet (topogen.FleetLive or topogen.FleetVOD), by their labels.
func fleetAddrs(l *lab.Lab, region, fleet string) []string {
	var out []string
	for _, n := range l.Topo.Nodes {
		if n.Region != region {
			continue
		}
		for _, sv := range n.Servers {
			f := n.Labels[topogen.FleetLabel]
			if v, ok := sv.Labels[topogen.FleetLabel]; ok {
				f = v
			}
			if f == fleet {
				out = append(out, sv.Address)
			}
		}
	}
	return out
}

// serverNamed returns the topology's name of the server at a redirect
// target's address.
func serverNamed(l *lab.Lab, target string) string {
	for _, n := range l.Topo.Nodes {
		for _, sv := range n.Servers {
			if strings.Contains(target, "//"+sv.Address+"/") {
				return sv.Name
			}
		}
	}
	return ""
}

// metric returns the value of the first sample of name whose labels
// include every one of labels (`server="hefei-1-a"`), from Prometheus text.
func metric(text, name string, labels ...string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') || !containsAll(rest, labels...) {
			continue
		}
		f := strings.Fields(rest)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		return v, err == nil
	}
	return 0, false
}

// servicesOnTheirFleets asks for live and VOD from several STB addresses
// of city 0 and checks each answer names a server of the service's fleet
// (the lab's live and VOD services each on their own servers); an STB then
// plays the VOD title from its edge.
func servicesOnTheirFleets(t *testing.T, l *lab.Lab) {
	t.Helper()
	ctx := context.Background()
	clients, err := l.AddClients(0, 6)
	if err != nil {
		t.Fatal(err)
	}
	city := l.Topo.Regions[0].Name
	for _, tc := range []struct {
		host, path, fleet, urlPath string
	}{
		{topogen.Hostname, "/ch1/index.m3u8", topogen.FleetLive, "/live/ch1/"},
		{topogen.VODHostname, "/title7/index.m3u8", topogen.FleetVOD, "/vod/title7/"},
	} {
		mine := fleetAddrs(l, city, tc.fleet)
		for _, from := range append([]netip.Addr{{}}, clients...) {
			a, err := l.Ask(ctx, 0, lab.Query{From: from, Host: tc.host, Path: tc.path})
			if err != nil || a.Status != 302 || a.Result != "CZ" || !containsAny(a.Location, mine...) || !strings.Contains(a.Location, tc.urlPath) {
				t.Fatalf("%s from %v: %+v %v; want CZ to one of %v (%s)", tc.host, from, a, err, mine, tc.fleet)
			}
		}
	}
	a, err := l.Ask(ctx, 0, lab.Query{Host: topogen.VODHostname, Path: "/title7/index.m3u8"})
	if err != nil {
		t.Fatal(err)
	}
	playlist, err := exec.Command("ip", "netns", "exec", l.NS("c1"), "curl", "-sf", "--max-time", "2", a.Location).Output()
	if err != nil || !containsAll(string(playlist), "#EXTM3U", "#EXT-X-ENDLIST") {
		t.Fatalf("VOD playlist from %s: %v\n%s", a.Location, err, playlist)
	}
}

// TestPrivilegedOverflow: a city whose node gets more new STBs a second
// than the live service's overflow threshold sends them on to its fallback
// region (result OVERFLOW) while the load lasts, keeps its VOD STBs, and
// takes its live STBs back within seconds of the load stopping.
func TestPrivilegedOverflow(t *testing.T) {
	cities := []string{"hefei", "wuhu"}
	const perServer = 5 // requests/s per live server: wuhu's node (2 servers) overflows at 10/s, is back under 8/s
	l := provinceWith(t, "asv", lab.Options{Cities: cities, Topology: func(tp *topology.Topology) {
		for i := range tp.Services {
			if tp.Services[i].Name == topogen.ServiceName {
				tp.Services[i].Overflow = &topology.Overflow{RPSPerServer: perServer}
			}
		}
	}})
	for i, c := range cities {
		answeredBy(t, l, i, lab.PrimaryID(c), 60*time.Second)
	}
	ctx := context.Background()
	wuhuLive, hefeiLive, wuhuVOD := fleetAddrs(l, "wuhu", topogen.FleetLive), fleetAddrs(l, "hefei", topogen.FleetLive), fleetAddrs(l, "wuhu", topogen.FleetVOD)
	atHome := func(a lab.Answer) bool {
		return a.Status == 302 && a.Result == "CZ" && containsAny(a.Location, wuhuLive...)
	}
	spilled := func(a lab.Answer) bool {
		return a.Status == 302 && a.Result == "OVERFLOW" && containsAny(a.Location, hefeiLive...) && a.Instance == lab.PrimaryID("wuhu")
	}
	if a, err := l.Ask(ctx, 1, lab.Query{}); err != nil || !atHome(a) {
		t.Fatalf("before the load: %+v %v; want CZ to one of %v", a, err, wuhuLive)
	}

	// The load: 40 new STBs a second (8 times the node's budget) from
	// wuhu's STB namespace, at most 400 of them: 10 s.
	loadCtx, stopLoad := context.WithTimeout(ctx, 20*time.Second)
	load := exec.CommandContext(loadCtx, "ip", "netns", "exec", l.NS("c2"), "curl", "-s", "--max-time", "2", "--rate", "40/s",
		"-H", "Host: "+topogen.Hostname, "http://"+lab.ServiceIP.String()+"/load[1-400]/index.m3u8")
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	loadStart := time.Now()
	loadDone := make(chan struct{})
	go func() { _ = load.Wait(); close(loadDone) }()
	t.Cleanup(func() { stopLoad(); <-loadDone })
	running := func() bool {
		select {
		case <-loadDone:
			return false
		default:
			return true
		}
	}

	// The probes keep to about 6 a second throughout, below even the
	// resume level: the load alone puts the node over.
	const probePace = 150 * time.Millisecond
	var last lab.Answer
	wait.ForEvery(t, "wuhu's live STBs spilling to hefei", 8*time.Second, probePace, func() bool {
		a, err := l.Ask(ctx, 1, lab.Query{})
		last = a
		return err == nil && spilled(a)
	})
	spill := time.Since(loadStart)
	// While the load lasts every new live STB of wuhu goes to hefei, and
	// VOD, a service without thresholds, stays at home.
	n := 0
	for from := time.Now(); time.Since(from) < 2*time.Second; n++ {
		a, err := l.Ask(ctx, 1, lab.Query{})
		if !running() {
			t.Fatalf("the load ended after %s, before the overflow was checked", time.Since(loadStart))
		}
		if err != nil || !spilled(a) {
			t.Fatalf("under load, probe %d: %+v %v; want OVERFLOW to one of %v", n, a, err, hefeiLive)
		}
		last = a
		time.Sleep(probePace) // the probes' pace, not a wait
	}
	if a, err := l.Ask(ctx, 1, lab.Query{Host: topogen.VODHostname, Path: "/title1/index.m3u8"}); err != nil || a.Status != 302 || a.Result != "CZ" || !containsAny(a.Location, wuhuVOD...) {
		t.Errorf("VOD under live's overflow: %+v %v; want CZ to %v", a, err, wuhuVOD)
	}
	if m, err := l.Metrics(ctx, 1); err != nil {
		t.Error(err)
	} else if v, ok := metric(m, "anysched_overflow_nodes", `service="live"`); !ok || v != 1 {
		t.Errorf("wuhu's scheduler: anysched_overflow_nodes{service=\"live\"} = %v (found %v), want 1", v, ok)
	}
	t.Logf("spilled %s after the load started; %d probes under load all OVERFLOW (last to %s)", spill.Round(time.Millisecond), n, last.Location)

	// The load stops; the probes (under the resume level of 0.8 x 10/s)
	// see wuhu's node take its STBs back.
	stopLoad()
	<-loadDone
	stopped := time.Now()
	wait.ForEvery(t, "wuhu's node taking its live STBs back", 10*time.Second, probePace, func() bool {
		a, err := l.Ask(ctx, 1, lab.Query{})
		last = a
		return err == nil && atHome(a)
	})
	back := time.Since(stopped)
	t.Logf("back at wuhu's node %s after the load stopped (%s)", back.Round(time.Millisecond), last.Location)
	if back > 6*time.Second {
		t.Errorf("wuhu's node took its STBs back only after %s", back)
	}
	// And stays so: no flapping at a quiet rate.
	for k := range 4 {
		if a, err := l.Ask(ctx, 1, lab.Query{}); err != nil || !atHome(a) {
			t.Fatalf("after the return, probe %d: %+v %v", k, a, err)
		}
		time.Sleep(probePace) // the probes' pace, not a wait
	}
}

// TestPrivilegedOutlierEjection: an edge whose media path fails while its
// health endpoint answers is ejected by the city's scheduler from what the
// STBs do (they ask again for the channel the edge failed), for the
// ejection time, then gets STBs again once it is back.
func TestPrivilegedOutlierEjection(t *testing.T) {
	l := provinceWith(t, "asx", lab.Options{Cities: []string{"hefei"}, Edges: true, Outlier: true})
	answeredBy(t, l, 0, lab.PrimaryID("hefei"), 60*time.Second)
	ctx := context.Background()
	clients, err := l.AddClients(0, 12)
	if err != nil {
		t.Fatal(err)
	}
	player := netip.Addr{} // the client namespace's own address plays
	// Every request below names a channel of its own unless it is a
	// re-ask: asking twice for one channel is what the detector counts.
	channels := 0
	fresh := func() string { channels++; return fmt.Sprintf("/ch%d/index.m3u8", 100+channels) }
	ask := func(from netip.Addr, path string) lab.Answer {
		t.Helper()
		a, err := l.Ask(ctx, 0, lab.Query{From: from, Path: path})
		if err != nil || a.Status != 302 {
			t.Fatalf("ask from %v for %s: %+v %v", from, path, a, err)
		}
		return a
	}
	edgeOf := func(a lab.Answer) string { e, _ := l.EdgeAt(a.Location); return e }

	a := ask(player, fresh())
	victim, victimServer := edgeOf(a), serverNamed(l, a.Location)
	if victim == "" || victimServer == "" {
		t.Fatalf("the player was sent to %q, not one of the lab's edges", a.Location)
	}
	// The STB addresses the victim serves (rendezvous hashing of the
	// address); the check after the ejection needs some besides the player.
	var onVictim []netip.Addr
	for _, c := range clients {
		if edgeOf(ask(c, fresh())) == victim {
			onVictim = append(onVictim, c)
		}
	}
	if len(onVictim) == 0 {
		t.Fatalf("none of %d client addresses is sent to %s", len(clients), victim)
	}
	healthUp := func() (float64, bool) {
		m, err := l.Metrics(ctx, 0)
		if err != nil {
			return 0, false
		}
		return metric(m, "anysched_health_server_up", `server="`+victimServer+`"`)
	}
	ejectedServers := func() float64 {
		m, err := l.Metrics(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := metric(m, "anysched_outlier_ejected_servers")
		return v
	}
	// The embedded checker's first verdict on the victim may still be on
	// its way (the series appears with it).
	wait.ForErr(t, "the victim healthy before the break", 15*time.Second, func() error {
		if v, ok := healthUp(); !ok || v != 1 {
			return fmt.Errorf("anysched_health_server_up for %s = %v (found %v)", victimServer, v, ok)
		}
		return nil
	})

	// Break the victim's media path; its health endpoint keeps answering.
	if err := l.BreakEdge(victim, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.BreakEdge(victim, false) })
	broke := time.Now()
	// The player plays as an STB does: asks for a channel, fetches the
	// playlist from the edge it is sent to and, when that fails, asks
	// again for the same channel at once.
	channel := fresh()
	reasks := 0
	var moved lab.Answer
	wait.ForErr(t, "the player sent past the broken edge", 15*time.Second, func() error {
		a := ask(player, channel)
		if edgeOf(a) != victim {
			moved = a
			return nil
		}
		if code, err := l.Fetch(ctx, 0, player, a.Location); err != nil || code != 500 {
			t.Fatalf("the broken edge answered the playlist with %d %v, want 500", code, err)
		}
		reasks++
		return fmt.Errorf("sent to the broken %s (%d re-asks)", victim, reasks)
	})
	ejectedAfter := time.Since(broke)
	observeFrom := time.Now()
	if code, err := l.Fetch(ctx, 0, player, moved.Location); err != nil || code != 200 {
		t.Fatalf("the player's re-ask went to %s, which answered %d %v", moved.Location, code, err)
	}
	if n := ejectedServers(); n != 1 {
		t.Errorf("anysched_outlier_ejected_servers = %v, want 1", n)
	}
	if v, ok := healthUp(); !ok || v != 1 {
		t.Errorf("ejected: anysched_health_server_up for %s = %v (found %v), want 1 (its probes still succeed)", victimServer, v, ok)
	}
	// For 2 s (well inside the 5 s ejection) no STB is sent to the victim,
	// not even those it served.
	asked := 0
	for time.Since(observeFrom) < 2*time.Second {
		for _, c := range append([]netip.Addr{player}, onVictim...) {
			if a := ask(c, fresh()); edgeOf(a) == victim || a.Result != "CZ" {
				t.Fatalf("%s after the ejection: %v sent to %s (%s)", time.Since(broke).Round(time.Millisecond), c, a.Location, a.Result)
			}
			asked++
		}
	}
	t.Logf("%s ejected %s after its media path broke (%d re-asks by the player); no STB sent to it in %d requests over the next 2s; its health check still up",
		victim, ejectedAfter.Round(time.Millisecond), reasks, asked)

	// Heal the edge: once the ejection ends, it gets STBs again.
	if err := l.BreakEdge(victim, false); err != nil {
		t.Fatal(err)
	}
	var back lab.Answer
	var backFrom netip.Addr
	cands := append([]netip.Addr{player}, onVictim...)
	k := 0
	wait.ForErr(t, "the healed edge getting STBs again", 15*time.Second, func() error {
		backFrom = cands[k%len(cands)]
		k++
		back = ask(backFrom, fresh())
		if edgeOf(back) == victim {
			return nil
		}
		return fmt.Errorf("sent to %s", back.Location)
	})
	returned := time.Since(observeFrom)
	if code, err := l.Fetch(ctx, 0, backFrom, back.Location); err != nil || code != 200 {
		t.Errorf("the healed edge answered the playlist with %d %v", code, err)
	}
	if n := ejectedServers(); n != 0 {
		t.Errorf("after the return: anysched_outlier_ejected_servers = %v, want 0", n)
	}
	t.Logf("%s got STBs again %s after the ejection was seen (base ejection 5s)", victim, returned.Round(time.Millisecond))
	if returned < 4*time.Second || returned > 10*time.Second {
		t.Errorf("the ejection lasted about %s, want about 5s", returned)
	}
}
