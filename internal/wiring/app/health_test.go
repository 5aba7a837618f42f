package app_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/testbed/port"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/internal/wiring/config"
)

// edge is a real HTTP server on loopback standing in for a media server: it
// answers /health, and can be killed and brought back on the same port,
// which the test holds meanwhile (testbed/port) so nobody else takes it.
type edge struct {
	addr string
	port *port.Held
	srv  *http.Server
}

func newEdge(t testing.TB) *edge {
	h := port.Hold(t)
	e := &edge{addr: h.Addr(), port: h}
	e.start(t)
	t.Cleanup(e.kill)
	return e
}

func (e *edge) start(t testing.TB) {
	t.Helper()
	ln, err := e.port.Listen()
	if err != nil {
		t.Fatal(err)
	}
	e.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"cpu": 0.2, "bandwidth_mbps": 100, "connections": 10}`)
	})}
	go e.srv.Serve(ln)
}

func (e *edge) kill() {
	if e.srv != nil {
		e.srv.Close()
		e.srv = nil
	}
}

// healthTopology: one city with one node of three edges on loopback.
func healthTopology(t testing.TB, edges []*edge) string {
	var servers strings.Builder
	for i, e := range edges {
		fmt.Fprintf(&servers, "      - {name: edge-%d, address: \"%s\", health: {url: \"http://%s/stats\"}, capacity: {bandwidth_mbps: 1000}}\n", i, e.addr, e.addr)
	}
	doc := `anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: hefei, location: {lat: 31.82, lon: 117.23}}
nodes:
  - name: hefei-1
    region: hefei
    location: {lat: 31.82, lon: 117.23}
    servers:
` + servers.String() + `zones:
  - {name: hefei-z, region: hefei, networks: [100.64.0.0/16]}
services:
  - {name: live, hostnames: [live.iptv.example], url_template: "http://{server}/live/{channel}/index.m3u8", bitrates_kbps: [2000]}
`
	p := filepath.Join(t.TempDir(), "topology.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type province struct {
	t      testing.TB
	center config.Center
	rc     config.Regional
}

// startHealthProvince runs a center, a regional scheduler and a separate
// healthcheck daemon (interval as given), and applies the topology.
func startHealthProvince(t testing.TB, edges []*edge, interval time.Duration, embedded bool) *province {
	cc := centerConfig(t)
	runCenter(t, &cc)
	waitUp(t, "center", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", healthTopology(t, edges)); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	rc := regionalConfig(t, cc, "hefei")
	rc.HTTP.Listen = anyPort
	rc.HTTP.TrustedProxies = []config.Network{config.MustParseNetwork("127.0.0.1")}
	check := health.DefaultCheckerOptions()
	check.Interval, check.Timeout = interval, interval/2
	if embedded {
		rc.Health.Embedded, rc.Health.Check = true, check
	} else {
		hc := config.DefaultChecker()
		hc.Region, hc.CheckerID, hc.CheckerOptions = "hefei", "checker-1", check
		hc.Etcd.Endpoints = rc.Etcd.Endpoints
		hc.Admin.Listen = ""
		hc.Snapshot.CacheFile = filepath.Join(t.TempDir(), "cache")
		if err := hc.Validate(); err != nil {
			t.Fatal(err)
		}
		runHealthcheck(t, &hc)
	}
	if err := rc.Validate(); err != nil {
		t.Fatal(err)
	}
	runRegional(t, &rc)
	p := &province{t: t, center: cc, rc: rc}
	waitUp(t, "checker alive and all edges up", func() bool {
		out, err := schedctl(t, cc.GRPC.Listen, "status", "-o", "json")
		return err == nil && strings.Contains(out, `"healthy": 3`) && strings.Contains(out, `"checkers": [
    {`)
	})
	return p
}

// target returns the edge address an STB at client is redirected to.
func (p *province) target(client string) string {
	req, _ := http.NewRequest("GET", "http://"+p.rc.HTTP.Listen+"/ch1/index.m3u8", nil)
	req.Host = "live.iptv.example"
	req.Header.Set("X-Forwarded-For", client)
	resp, err := (&http.Client{Timeout: 2 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	resp.Body.Close()
	loc := strings.TrimPrefix(resp.Header.Get("Location"), "http://")
	host, _, _ := strings.Cut(loc, "/")
	return host
}

// clientsOf finds, for each edge, a client address that is sent to it.
func (p *province) clientsOf(edges []*edge) map[string]string {
	out := map[string]string{}
	for i := 1; len(out) < len(edges) && i < 4000; i++ {
		c := fmt.Sprintf("100.64.%d.%d", i/250, i%250+1)
		if tgt := p.target(c); tgt != "" && !strings.HasPrefix(tgt, "error") && out[tgt] == "" {
			out[tgt] = c
		}
	}
	return out
}

// TestHealthRoutesAroundDeadEdges: kill an edge, STBs leave it; bring it back, they return.
func TestHealthRoutesAroundDeadEdges(t *testing.T) {
	for _, embedded := range []bool{false, true} {
		t.Run(fmt.Sprintf("embedded=%v", embedded), func(t *testing.T) {
			edges := []*edge{newEdge(t), newEdge(t), newEdge(t)}
			p := startHealthProvince(t, edges, 200*time.Millisecond, embedded)
			clients := p.clientsOf(edges)
			victim := edges[0]
			client := clients[victim.addr]
			if client == "" {
				t.Fatalf("no client maps to %s: %v", victim.addr, clients)
			}
			victim.kill()
			killed := time.Now()
			waitUp(t, "redirects leave the dead edge", func() bool { return p.target(client) != victim.addr })
			t.Logf("detected after %s", time.Since(killed).Round(time.Millisecond))
			// Afterwards no STB is sent there.
			for _, c := range clients {
				if tgt := p.target(c); tgt == victim.addr || strings.HasPrefix(tgt, "error") {
					t.Fatalf("client %s sent to %s after the kill", c, tgt)
				}
			}
			out, _ := schedctl(t, p.center.GRPC.Listen, "explain", "--client-ip", client, "--host", "live.iptv.example")
			if !strings.Contains(out, "unavailable: down by 1 of 1 checkers") {
				t.Errorf("explain does not say why the edge is out:\n%s", out)
			}
			victim.start(t)
			waitUp(t, "the edge gets its STBs back", func() bool { return p.target(client) == victim.addr })
		})
	}
}

func TestDrainMovesSTBsAndPersists(t *testing.T) {
	edges := []*edge{newEdge(t), newEdge(t), newEdge(t)}
	p := startHealthProvince(t, edges, 200*time.Millisecond, true)
	clients := p.clientsOf(edges)
	victim := edges[1].addr
	// One server of three is past the removal guard's 20%: an admin forces.
	out, err := schedctl(t, p.center.GRPC.Listen, "drain", "server", "edge-1", "--reason", "disk swap", "--force")
	if err != nil || !strings.Contains(out, "drained server edge-1 (1 server)") {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	waitUp(t, "drained edge gets no STBs", func() bool { return p.target(clients[victim]) != victim })
	// The center follows the drain on its own watch: poll its status.
	wait.ForErr(t, "the center's status shows the drain", wait.DefaultTimeout, func() error {
		out, _ = schedctl(t, p.center.GRPC.Listen, "status")
		if !strings.Contains(out, "disk swap") || !strings.Contains(out, "hefei   3        3        0          0          1        2") {
			return fmt.Errorf("status after drain:\n%s", out)
		}
		return nil
	})
	if _, err := schedctl(t, p.center.GRPC.Listen, "drain", "server", "edge-9"); err == nil || !strings.Contains(err.Error(), `no server named "edge-9"`) {
		t.Errorf("drain of an unknown server: %v", err)
	}
	if _, err := schedctl(t, p.center.GRPC.Listen, "drain", "rack", "x"); err == nil {
		t.Error("drain of an unknown kind accepted")
	}
	// A regional scheduler started now (a restart) reads the drain back.
	rc2 := regionalConfig(t, p.center, "hefei")
	rc2.InstanceID, rc2.HTTP.Listen, rc2.HTTP.TrustedProxies = "hefei-2", anyPort, []config.Network{config.MustParseNetwork("127.0.0.1")}
	runRegional(t, &rc2)
	p2 := &province{t: t, center: p.center, rc: rc2}
	waitUp(t, "restarted scheduler answers", func() bool { tgt := p2.target(clients[victim]); return tgt != "" && !strings.HasPrefix(tgt, "error") })
	if tgt := p2.target(clients[victim]); tgt == victim {
		t.Fatal("a restarted scheduler sent STBs to a drained server")
	}
	if out, err := schedctl(t, p.center.GRPC.Listen, "undrain", "server", "edge-1"); err != nil || !strings.Contains(out, "undrained") {
		t.Fatalf("undrain: %v\n%s", err, out)
	}
	waitUp(t, "undrained edge gets its STBs back", func() bool { return p.target(clients[victim]) == victim && p2.target(clients[victim]) == victim })
}

// BenchmarkDetectionLatency: from the moment an edge stops answering to the
// moment the regional scheduler stops redirecting to it, over 20 kills with
// the default 1 s interval (a separate healthcheck daemon, etcd in between).
// Run with -benchtime 1x. Target: max under 2 s.
func BenchmarkDetectionLatency(b *testing.B) {
	for b.Loop() {
		detection(b, 20)
	}
}

func detection(b *testing.B, kills int) {
	edges := []*edge{newEdge(b), newEdge(b), newEdge(b)}
	p := startHealthProvince(b, edges, time.Second, false)
	clients := p.clientsOf(edges)
	var lat []time.Duration
	for i := range kills {
		victim := edges[i%len(edges)]
		client := clients[victim.addr]
		// Kill at a random phase of the probe cycle.
		time.Sleep(time.Duration(i*137%1000) * time.Millisecond)
		victim.kill()
		start := time.Now()
		for p.target(client) == victim.addr {
			time.Sleep(5 * time.Millisecond)
		}
		lat = append(lat, time.Since(start))
		victim.start(b)
		for p.target(client) != victim.addr {
			time.Sleep(50 * time.Millisecond)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
	b.ReportMetric(float64(len(lat)), "kills")
}
