package app

import (
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/stb/outlier"
	"github.com/anysched/anysched/internal/stb/overflow"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/prometheus/client_golang/prometheus"
)

func allUp(n int) *avail.Availability {
	av := &avail.Availability{Figures: make([]avail.Figures, n), Available: make([]bool, n), Why: make([]string, n)}
	for i := range av.Available {
		av.Available[i] = true
	}
	return av
}

// TestPolicyInputs: an ejected server enters the build unavailable with
// its reason (steer's TestBuilderDatesComebacks dates returns for slow
// start).
func TestPolicyInputs(t *testing.T) {
	snap := fixture.Compile(t, fixture.Shaped(t, topogen.Options{NodesPerRegion: 1, ServersPerNode: 4, ZonesPerRegion: 1, NetworksPerZone: 1}, fixture.Cities(1)...))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := &policy{over: overflow.New(prometheus.NewRegistry(), log)}
	t0 := time.Unix(1_800_000_000, 0)

	build := func(av *avail.Availability, now time.Time) steer.Inputs {
		in := steer.Inputs{Now: now}
		p.inputs(snap, av, &in)
		return in
	}
	in := build(allUp(len(snap.Servers)), t0)
	if in.Count == nil || in.Overflow != nil {
		t.Errorf("counters %v, overflow %v: want counters and no state before an evaluation", in.Count, in.Overflow)
	}

	// Ejection: with consecutive_failures 2, two re-asks after answers from
	// server 2 take it out of the next build.
	cfg := outlier.DefaultConfig()
	cfg.Enabled, cfg.ConsecutiveFailures = true, 2
	d, err := outlier.New(cfg, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	p.eject = d
	build(allUp(len(snap.Servers)), t0.Add(3*time.Second)) // SetServers
	at := t0.Add(4 * time.Second).UnixNano()
	for client := uint64(1); client <= 3; client++ {
		d.Observe(client, 7, 2, at)
		d.Observe(client, 7, 3, at+int64(time.Second)) // the same STB asks again: a failure of server 2
	}
	if !d.Evaluate(t0.Add(6 * time.Second)) {
		t.Fatal("no ejection after 3 consecutive re-asks")
	}
	av := allUp(len(snap.Servers))
	build(av, t0.Add(6*time.Second))
	if av.Available[2] || av.Why[2] == "" {
		t.Errorf("server 2 after ejection: available %v, why %q", av.Available[2], av.Why[2])
	}
}

// TestPolicyEjectsAFamily: re-asks after redirects to a dual-stack
// server's IPv6 address eject that address alone: the server stays
// available, its IPv6 address marked down with the reason; re-asks after
// its IPv4 address eject the server, as before dual-stack.
func TestPolicyEjectsAFamily(t *testing.T) {
	doc := fixture.Shaped(t, topogen.Options{NodesPerRegion: 1, ServersPerNode: 4, ZonesPerRegion: 1, NetworksPerZone: 1}, fixture.Cities(1)...)
	fixture.DualStack(doc)
	snap := fixture.Compile(t, doc)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := outlier.DefaultConfig()
	cfg.Enabled, cfg.ConsecutiveFailures = true, 2
	d, err := outlier.New(cfg, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	p := &policy{over: overflow.New(prometheus.NewRegistry(), log), eject: d}
	t0 := time.Unix(1_800_000_000, 0)
	p.inputs(snap, allUp(len(snap.Servers)), &steer.Inputs{Now: t0}) // SetServers
	eng := steer.New(snap, steer.Options{})
	at := t0.Add(4 * time.Second)
	redirect := func(server int32, f steer.Family, client string) {
		req := steer.Request{Client: netip.MustParseAddr(client), Host: topogen.Hostname, Path: "/ch1", Family: f}
		p.Observe(eng, steer.Decision{Service: 0, Server: server, Family: f}, req, at)
	}
	for _, c := range []string{"fd00::1", "fd00::2", "fd00::3"} {
		redirect(2, steer.FamilyV6, c)
		at = at.Add(time.Second)
		redirect(3, steer.FamilyV6, c) // the same STB asks again: its IPv6 address of server 2 failed it
	}
	for _, c := range []string{"100.64.0.1", "100.64.0.2", "100.64.0.3"} {
		redirect(1, steer.FamilyV4, c)
		at = at.Add(time.Second)
		redirect(3, steer.FamilyV4, c)
	}
	if !d.Evaluate(at.Add(time.Second)) {
		t.Fatal("no ejection")
	}
	av := allUp(len(snap.Servers))
	p.inputs(snap, av, &steer.Inputs{Now: at.Add(time.Second)})
	if !av.Available[2] || av.FamilyDown == nil || !av.FamilyDown[1][2] || av.FamilyDown[0][2] || !strings.HasPrefix(av.FamilyWhy[1][2], "ejected: ") {
		t.Errorf("server 2 (IPv6 address failing): available %v, family down %v", av.Available[2], av.FamilyDown)
	}
	if av.Available[1] || !strings.HasPrefix(av.Why[1], "ejected: ") || av.FamilyDown[1][1] {
		t.Errorf("server 1 (IPv4 address failing): available %v, why %q", av.Available[1], av.Why[1])
	}
	if !av.Available[3] || av.FamilyDown[0][3] || av.FamilyDown[1][3] {
		t.Errorf("server 3 ejected")
	}
}
