package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/ctl"
	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/testcerts"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/internal/wiring/app"
	"github.com/anysched/anysched/internal/wiring/app/center"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/daemon"
	"github.com/anysched/anysched/internal/wiring/healthd"
	"github.com/anysched/anysched/internal/wiring/obs"
	"github.com/miekg/dns"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func centerConfig(t testing.TB) config.Center {
	dir := t.TempDir()
	c := config.DefaultCenter()
	c.InstanceID = "center"
	c.Etcd.Embedded = config.Embedded{Dir: filepath.Join(dir, "etcd"), Name: "center", ClientListen: anyPort, PeerListen: anyPort}
	c.GRPC.Listen = anyPort
	c.Admin.Listen = anyPort
	c.Snapshot.CacheFile = filepath.Join(dir, "snapshot.cache")
	c.Snapshot.ConfirmInterval = 200 * time.Millisecond
	c.AccessLog.Enabled = false // keep test output readable
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// withSigningKey makes the center sign its topology and operator state
// with a key of its own and trust it, as every province where others may
// write etcd must (regionalConfig then trusts it too).
func withSigningKey(t testing.TB, c *config.Center) {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "topology.key")
	if _, err := signing.WriteKeyPair(keyFile, keyFile+".pub"); err != nil {
		t.Fatal(err)
	}
	c.Apply.SigningKeyFile, c.Snapshot.TrustedKeys = keyFile, []string{keyFile + ".pub"}
}

// regionalConfig is a city scheduler of c's province; it trusts the keys
// c trusts.
func regionalConfig(t testing.TB, c config.Center, region string) config.Regional {
	r := config.DefaultRegional()
	r.InstanceID = region + "-1"
	r.Region = region
	r.Etcd.Endpoints = []string{"http://" + c.Etcd.Embedded.ClientListen}
	r.Snapshot.TrustedKeys = c.Snapshot.TrustedKeys
	r.Admin.Listen = anyPort
	r.Snapshot.CacheFile = filepath.Join(t.TempDir(), "snapshot.cache")
	r.Snapshot.ConfirmInterval = 200 * time.Millisecond
	r.AccessLog.Enabled = false
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	return r
}

// anyPort asks a daemon for any free port; runCenter, runRegional and
// runHealthcheck read the bound addresses back (daemon.OnListening).
const anyPort = "127.0.0.1:0"

// runCenter runs the central scheduler until the test ends (or stop is
// called) and, once it listens, sets cc's listen addresses (and the
// embedded etcd's client address) to the bound ones.
func runCenter(t testing.TB, cc *config.Center) (stop func()) {
	t.Helper()
	c := *cc
	l, stop := started(t, func(ctx context.Context, on daemon.Option) error { return center.Run(ctx, c, quiet, on) })
	cc.Admin.Listen, cc.HTTP.Listen, cc.DNS.Listen, cc.GRPC.Listen = l.Admin, l.HTTP, l.DNS, l.GRPC
	if l.Etcd != "" {
		cc.Etcd.Embedded.ClientListen = l.Etcd
	}
	return stop
}

// runRegional is runCenter for a regional scheduler.
func runRegional(t testing.TB, rc *config.Regional) (stop func()) {
	t.Helper()
	c := *rc
	l, stop := started(t, func(ctx context.Context, on daemon.Option) error { return app.RunRegional(ctx, c, quiet, on) })
	rc.Admin.Listen, rc.HTTP.Listen, rc.HTTPS.Listen, rc.DNS.Listen = l.Admin, l.HTTP, l.HTTPS, l.DNS
	return stop
}

// runHealthcheck is runCenter for a healthcheck daemon.
func runHealthcheck(t testing.TB, hc *config.Checker) (stop func()) {
	t.Helper()
	c := *hc
	l, stop := started(t, func(ctx context.Context, on daemon.Option) error { return healthd.Run(ctx, c, quiet, on) })
	hc.Admin.Listen = l.Admin
	return stop
}

// started runs a daemon and waits until it reports its listeners.
func started(t testing.TB, run func(context.Context, daemon.Option) error) (daemon.Listeners, func()) {
	t.Helper()
	ch := make(chan daemon.Listeners, 1)
	exited := make(chan struct{})
	stop := runDaemon(t, func(ctx context.Context) error {
		defer close(exited)
		return run(ctx, daemon.OnListening(func(l daemon.Listeners) { ch <- l }))
	})
	select {
	case l := <-ch:
		return l, stop
	case <-exited:
		stop()
		t.Fatal("daemon exited before it listened")
	case <-time.After(60 * time.Second):
		t.Fatal("daemon not listening within 60s")
	}
	return daemon.Listeners{}, stop
}

// runDaemon runs fn until the test ends (or stop is called) and fails the test
// if fn returns an error.
func runDaemon(t testing.TB, fn func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("daemon did not stop within 15s")
		}
	}
	t.Cleanup(stop)
	return stop
}

func schedctl(t testing.TB, server string, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := ctl.Run(context.Background(), append([]string{"--server", server, "--timeout", "30s"}, args...), &out, &errb)
	return out.String() + errb.String(), err
}

type snapInfo struct {
	Revision int64  `json:"revision"`
	Ready    bool   `json:"ready"`
	Why      string `json:"not_ready_because"`
}

func info(admin string) (snapInfo, error) {
	var si snapInfo
	resp, err := http.Get("http://" + admin + "/debug/snapshot")
	if err != nil {
		return si, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&si)
	return si, err
}

// stbGet is one STB request to a scheduler's HTTP front end, located at
// client (X-Forwarded-For, from a trusted loopback proxy; "" for none); it
// returns the status, the redirect and the instance that answered, without
// following the redirect.
func stbGet(listen, host, pathQuery, client string) (code int, location, instance string) {
	req, _ := http.NewRequest("GET", "http://"+listen+pathQuery, nil)
	req.Host = host
	if client != "" {
		req.Header.Set("X-Forwarded-For", client)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		return 0, err.Error(), ""
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("X-Anysched-Instance")
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 5 * time.Second}

// waitUp polls cond for up to 30 s: daemons start, elect and converge.
func waitUp(t testing.TB, what string, cond func() bool) {
	t.Helper()
	wait.For(t, what, 30*time.Second, cond)
}

// writeTopology writes the small fixture province with its first server's
// weight set (two weights: two documents, two revisions).
func writeTopology(t testing.TB, weight int) string {
	t.Helper()
	return fixture.WriteYAML(t, fixture.Weighted(t, weight))
}

// TestProvince runs the center with its embedded etcd and two regional
// schedulers in-process, drives them with schedctl, and checks that every
// scheduler holds each applied revision within a second.
func TestProvince(t *testing.T) {
	cc := centerConfig(t)
	runCenter(t, &cc)
	waitUp(t, "center admin API", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })

	cities := topogen.Cities(nil, 3)
	admins := []string{cc.Admin.Listen}
	for _, city := range cities[:2] {
		rc := regionalConfig(t, cc, city.Name)
		runRegional(t, &rc)
		admins = append(admins, rc.Admin.Listen)
	}
	for _, a := range admins {
		waitUp(t, "admin listener "+a, func() bool { _, err := info(a); return err == nil })
		if si, _ := info(a); si.Ready {
			t.Fatalf("%s ready before any topology was applied", a)
		}
	}

	for i, weight := range []int{100, 200} {
		out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", writeTopology(t, weight))
		if err != nil {
			t.Fatalf("apply: %v\n%s", err, out)
		}
		var rev int64
		m := regexp.MustCompile(`(?m)^applied revision (\d+):`).FindStringSubmatch(out) // after the diff
		if m == nil {
			t.Fatalf("apply output %q: no applied revision", out)
		}
		fmt.Sscan(m[1], &rev)
		applied := time.Now()
		for _, a := range admins {
			for {
				si, err := info(a)
				if err == nil && si.Revision == rev && si.Ready {
					break
				}
				if time.Since(applied) > time.Second {
					t.Fatalf("apply %d: %s holds %+v (err %v) one second after revision %d was applied", i, a, si, err, rev)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		t.Logf("apply %d: revision %d held by all %d schedulers after %s", i, rev, len(admins), time.Since(applied).Round(time.Millisecond))
	}

	// status lists every instance with its role and revision.
	waitUp(t, "status shows 3 ready instances", func() bool {
		out, err := schedctl(t, cc.GRPC.Listen, "status", "-o", "json")
		return err == nil && strings.Count(out, `"state": "ready"`) == 3
	})
	out, _ := schedctl(t, cc.GRPC.Listen, "status")
	for _, want := range []string{"center", "central", cities[0].Name + "-1", cities[1].Name + "-1", "regional"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	// A bad document is rejected whole, with every problem named, and the
	// previous topology stays.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	good, _ := os.ReadFile(writeTopology(t, 300))
	broken := strings.Replace(string(good), "weight: 300", "weight: -1", 1)
	broken = regexp.MustCompile(`lat: [0-9.]+`).ReplaceAllLiteralString(broken, "lat: 131.82")
	if err := os.WriteFile(bad, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := schedctl(t, cc.GRPC.Listen, "get", "topology")
	out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", bad)
	if err == nil {
		t.Fatalf("a broken topology was applied:\n%s", out)
	}
	c0 := cities[0].Name
	for _, want := range []string{"nodes[0] (" + c0 + "-1).servers[0] (" + c0 + "-1-a).weight", "regions[0] (" + c0 + ").location.lat", "regions[2] (" + cities[2].Name + ").location.lat", "zones[0] (" + c0 + "-z1).location.lat"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("apply error lacks %q:\n%v", want, err)
		}
	}
	if after, _ := schedctl(t, cc.GRPC.Listen, "get", "topology"); after != before {
		t.Fatal("a rejected apply changed the stored topology")
	}

	// Stale: an edit of an older `get topology` is refused unless forced.
	older := filepath.Join(t.TempDir(), "older.yaml")
	if err := os.WriteFile(older, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", writeTopology(t, 400)); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if _, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", older); err == nil || !strings.Contains(err.Error(), "based on revision") {
		t.Fatalf("apply of a stale document: %v, want a refusal naming the revisions", err)
	}
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "--force", "-f", older); err != nil || !strings.Contains(out, "applied revision") {
		t.Fatalf("forced apply: %v\n%s", err, out)
	}

	// get in every form.
	for _, what := range []string{"regions", "nodes", "servers", "zones", "services"} {
		for _, o := range []string{"table", "yaml", "json"} {
			out, err := schedctl(t, cc.GRPC.Listen, "get", what, "-o", o)
			if err != nil || !strings.Contains(out, cities[0].Name) && what != "services" {
				t.Errorf("get %s -o %s: %v\n%s", what, o, err, out)
			}
		}
	}

	// The daemons' metrics follow the naming rule.
	resp, err := http.Get("http://" + cc.Admin.Listen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "anysched_snapshot_age_seconds") {
		t.Error("/metrics lacks anysched_snapshot_age_seconds")
	}
}

func TestMetricNames(t *testing.T) {
	e := etcdtest.Start(t)
	s := app.New(instance.Regional, "hefei", config.DefaultRegional().Common, e.Store(), quiet)
	// The embedded checker's metrics too.
	if _, err := health.NewAgent(s.Store.Client(), "/anysched/", health.AgentOptions{CheckerID: "c", Region: "hefei"}, s.Registry, quiet); err != nil {
		t.Fatal(err)
	}
	if problems := obs.LintMetrics(s.Registry); len(problems) > 0 {
		t.Fatalf("metric lint:\n%s", strings.Join(problems, "\n"))
	}
}

// TestAdminMutualTLS: with grpc.tls.client_ca_file set, schedctl needs a
// client certificate signed by that CA.
func TestAdminMutualTLS(t *testing.T) {
	certs := testcerts.Write(t, t.TempDir())
	cc := centerConfig(t)
	cc.GRPC.TLS = config.ServerTLS{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, ClientCAFile: certs.CA}
	if err := cc.Validate(); err != nil {
		t.Fatal(err)
	}
	runCenter(t, &cc)
	withCert := []string{"--tls-ca", certs.CA, "--tls-cert", certs.ClientCert, "--tls-key", certs.ClientKey, "status"}
	waitUp(t, "center over mTLS", func() bool { _, err := schedctl(t, cc.GRPC.Listen, withCert...); return err == nil })

	if _, err := schedctl(t, cc.GRPC.Listen, "status"); err == nil {
		t.Error("plaintext client accepted by a TLS server")
	}
	if _, err := schedctl(t, cc.GRPC.Listen, "--tls-ca", certs.CA, "status"); err == nil {
		t.Error("client without a certificate accepted")
	}
	if _, err := schedctl(t, cc.GRPC.Listen, "--tls-ca", certs.CA, "--tls-cert", certs.OtherClientCert, "--tls-key", certs.OtherClientKey, "status"); err == nil {
		t.Error("client certificate from another CA accepted")
	}
}

// TestSTBAnswers: STB requests to the regional and central schedulers are
// redirected by the current topology, follow an apply within a second, and
// keep being answered while etcd is down.
func TestSTBAnswers(t *testing.T) {
	e := etcdtest.Start(t)
	cc := centerConfig(t)
	cc.Etcd.Endpoints = []string{e.Endpoint()}
	cc.HTTP.Listen = anyPort
	cc.HTTP.TrustedProxies = []config.Network{config.MustParseNetwork("127.0.0.1")}
	cc.DefaultRegion = "wuhu"
	runCenter(t, &cc)
	rc := regionalConfig(t, cc, "hefei")
	rc.Etcd.Endpoints = []string{e.Endpoint()}
	rc.HTTP.Listen = anyPort
	rc.HTTP.TrustedProxies = []config.Network{config.MustParseNetwork("127.0.0.0/8")}
	rc.DNS.Listen = anyPort
	rc.DNS.TrustedResolvers = []config.Network{config.MustParseNetwork("127.0.0.0/8")} // the test speaks ECS for its STBs
	runRegional(t, &rc)
	waitUp(t, "center admin API", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", "../../../deploy/examples/topology.yaml"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}

	get := func(listen, xff string) (int, string, string) {
		return stbGet(listen, "live.iptv.example", "/cctv1/index.m3u8", xff)
	}
	waitUp(t, "regional answers", func() bool { code, _, _ := get(rc.HTTP.Listen, ""); return code == http.StatusFound })
	waitUp(t, "center answers", func() bool { code, _, _ := get(cc.HTTP.Listen, ""); return code == http.StatusFound })

	tests := []struct {
		name, listen, xff, wantPrefix, wantInstance string
	}{
		{"regional, client in no zone: its own region", rc.HTTP.Listen, "", "http://10.1.", "hefei-1"},
		{"regional, client in wuhu's zone", rc.HTTP.Listen, "100.68.0.9", "http://10.2.", "hefei-1"},
		{"center, client in hefei's zone", cc.HTTP.Listen, "100.64.0.9", "http://10.1.", "center"},
		{"center, client in no zone: default_region", cc.HTTP.Listen, "", "http://10.2.", "center"},
	}
	for _, tt := range tests {
		code, loc, inst := get(tt.listen, tt.xff)
		if code != http.StatusFound || !strings.HasPrefix(loc, tt.wantPrefix) || !strings.HasSuffix(loc, "/live/cctv1/6000/index.m3u8") || inst != tt.wantInstance {
			t.Errorf("%s: %d %q from %q, want 302 to %s... from %s", tt.name, code, loc, inst, tt.wantPrefix, tt.wantInstance)
		}
	}

	// DNS from the regional scheduler: a client subnet in wuhu's zone gets a
	// wuhu server, the same one HTTP would redirect it to.
	q := new(dns.Msg)
	q.SetQuestion("live.iptv.example.", dns.TypeA)
	q.SetEdns0(1232, false)
	q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 32, Address: net.ParseIP("100.68.0.9").To4()})
	for _, proto := range []string{"udp", "tcp"} {
		r, _, err := (&dns.Client{Net: proto, Timeout: 2 * time.Second}).Exchange(q, rc.DNS.Listen)
		_, loc, _ := get(rc.HTTP.Listen, "100.68.0.9")
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || !strings.Contains(loc, "//"+r.Answer[0].(*dns.A).A.String()+":") {
			t.Errorf("DNS over %s: %v %v; HTTP said %s", proto, err, r, loc)
		}
	}

	// schedctl explain shows the same decision as the center made.
	out, err := schedctl(t, cc.GRPC.Listen, "explain", "--client-ip", "100.64.0.9", "--host", "live.iptv.example", "--path", "/cctv1/index.m3u8")
	_, loc, _ := get(cc.HTTP.Listen, "100.64.0.9")
	if err != nil || !strings.Contains(out, "CZ") || !strings.Contains(out, loc) || !strings.Contains(out, "chosen: nearest available") || !strings.Contains(out, "coverage zone hefei-z1") {
		t.Errorf("explain: %v\n%s", err, out)
	}

	// An apply that moves hefei's servers changes the answers within a second.
	doc, _ := os.ReadFile("../../../deploy/examples/topology.yaml")
	moved := strings.ReplaceAll(string(doc), ":8080", ":9080")
	path := filepath.Join(t.TempDir(), "moved.yaml")
	os.WriteFile(path, []byte(moved), 0o644)
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", path); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	applied := time.Now()
	for {
		_, loc, _ := get(rc.HTTP.Listen, "")
		if strings.Contains(loc, ":9080/") {
			t.Logf("answers changed %s after the apply", time.Since(applied).Round(time.Millisecond))
			break
		}
		if time.Since(applied) > time.Second {
			t.Fatalf("answers still %q one second after the apply", loc)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The center follows on its own watch: it must hold the new revision
	// before etcd goes, or the check below would test the race instead.
	waitUp(t, "the center answers from the new revision", func() bool {
		_, loc, _ := get(cc.HTTP.Listen, "100.64.0.9")
		return strings.Contains(loc, ":9080/")
	})

	// etcd gone: both keep answering from their snapshots.
	e.Stop()
	time.Sleep(500 * time.Millisecond) // etcd stays gone a while: the answers below must not need it
	for _, l := range []string{rc.HTTP.Listen, cc.HTTP.Listen} {
		if code, loc, _ := get(l, "100.64.0.9"); code != http.StatusFound || !strings.Contains(loc, ":9080/") {
			t.Errorf("%s with etcd down: %d %q", l, code, loc)
		}
	}
}

// TestEtcdLossDrill stops the lab center's embedded etcd: both schedulers go
// on answering STBs from their snapshots, and the store comes back.
func TestEtcdLossDrill(t *testing.T) {
	cc := centerConfig(t)
	cc.Lab = true
	cc.HTTP.Listen = anyPort
	runCenter(t, &cc)
	waitUp(t, "center", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })
	rc := regionalConfig(t, cc, "hefei")
	rc.HTTP.Listen = anyPort
	runRegional(t, &rc)
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", "../../../deploy/examples/topology.yaml"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	get := func(listen string) int {
		req, _ := http.NewRequest("GET", "http://"+listen+"/ch1/index.m3u8", nil)
		req.Host = "live.iptv.example"
		resp, err := (&http.Client{Timeout: 2 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, l := range []string{cc.HTTP.Listen, rc.HTTP.Listen} {
		waitUp(t, "answers", func() bool { return get(l) == http.StatusFound })
	}
	done := make(chan string, 1)
	go func() {
		out, err := schedctl(t, cc.GRPC.Listen, "drill", "etcd-loss", "--duration", "3s")
		if err != nil {
			out += err.Error()
		}
		done <- out
	}()
	// The drill stops etcd within moments: status, which reads the store,
	// must then fail (the drill lasts 3 s; each try gives up after 1 s).
	waitUp(t, "status fails with etcd stopped", func() bool {
		_, err := schedctl(t, cc.GRPC.Listen, "--timeout", "1s", "status")
		return err != nil
	})
	for _, l := range []string{cc.HTTP.Listen, rc.HTTP.Listen} {
		if code := get(l); code != http.StatusFound {
			t.Errorf("%s answered %d with etcd down, want 302 from its snapshot", l, code)
		}
	}
	out := <-done
	if !strings.Contains(out, "store unreachable") || !strings.Contains(out, "store back") {
		t.Fatalf("drill report:\n%s", out)
	}
	// Another province altogether: past the removal guard (local is admin).
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "--force", "-f", writeTopology(t, 150)); err != nil {
		t.Fatalf("apply after the drill: %v\n%s", err, out)
	}
	// Outside a lab it is refused.
	cc2 := centerConfig(t)
	runCenter(t, &cc2)
	waitUp(t, "second center", func() bool { _, err := schedctl(t, cc2.GRPC.Listen, "status"); return err == nil })
	if _, err := schedctl(t, cc2.GRPC.Listen, "drill", "etcd-loss", "--duration", "2s"); err == nil || !strings.Contains(err.Error(), "only in a lab") {
		t.Errorf("etcd-loss drill outside a lab: %v", err)
	}
}
