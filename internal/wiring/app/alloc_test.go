package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/allocation/allocator"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/wiring/config"
)

const qoeProvince = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: hefei, location: {lat: 31.82, lon: 117.23}, fallback: [wuhu]}
  - {name: wuhu, location: {lat: 31.33, lon: 118.38}}
nodes:
  - name: hefei-1
    region: hefei
    location: {lat: 31.86, lon: 117.28}
    servers:
      - {name: hefei-1-a, address: 10.1.1.1:8080, coverage_radius_m: 500, capacity: {bandwidth_mbps: 20, transcode_units: 40}}
      - {name: hefei-1-b, address: 10.1.1.2:8080, coverage_radius_m: 500, capacity: {bandwidth_mbps: 20, transcode_units: 40}}
  - name: wuhu-1
    region: wuhu
    location: {lat: 31.33, lon: 118.38}
    servers:
      - {name: wuhu-1-a, address: 10.2.1.1:8080}
zones:
  - {name: hefei-centre, region: hefei, networks: [100.64.0.0/16], location: {lat: 31.8602, lon: 117.2801}}
  - {name: wuhu, region: wuhu, networks: [100.68.0.0/16]}
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/{bitrate}/index.m3u8"
    bitrates_kbps: [1200, 2500, 5000]
    selection: qoe
`

// TestLiveAllocation runs two regional schedulers of one city against a real
// etcd with selection: qoe and auth: required: STBs without a token are
// refused, returning STBs get their planned bitrate in the redirect, and the
// two instances' claims never add up to more than a server's capacity.
func TestLiveAllocation(t *testing.T) {
	e := etcdtest.Start(t)
	ctx := context.Background()
	top, err := topology.Parse([]byte(qoeProvince))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store().Apply(ctx, top, store.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "k1.key")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfgs []config.Regional
	for i := range 2 {
		rc := regionalConfig(t, centerConfig(t), "hefei")
		rc.InstanceID = fmt.Sprintf("hefei-%d", i+1)
		rc.Etcd.Endpoints = []string{e.Endpoint()}
		rc.HTTP.Listen = anyPort
		rc.HTTP.TrustedProxies = []config.Network{config.MustParseNetwork("127.0.0.1")}
		rc.Alloc.Period = time.Second
		rc.Alloc.Auth = "required"
		rc.Alloc.Keys = []token.KeyFile{{ID: "k1", SecretFile: secret}}
		if err := rc.Validate(); err != nil {
			t.Fatal(err)
		}
		runRegional(t, &rc) // sets the bound addresses
		cfgs = append(cfgs, rc)
	}
	key := token.Key{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}
	get := func(listen, client, tok string) (int, string) {
		pq := "/cctv1/index.m3u8"
		if tok != "" {
			pq += "?token=" + tok
		}
		code, loc, _ := stbGet(listen, "live.iptv.example", pq, client)
		return code, loc
	}
	tok := func(sub string) string {
		s, err := token.Sign(key, token.Claims{Subject: sub, Expires: time.Now().Add(time.Hour), DesiredKbps: 5000, DanmakuPerHour: 1, Gift: math.NaN()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	waitUp(t, "regional answers", func() bool {
		code, _ := get(cfgs[0].HTTP.Listen, "100.64.0.1", tok("probe"))
		return code == http.StatusFound
	})
	waitUp(t, "second regional answers", func() bool {
		code, _ := get(cfgs[1].HTTP.Listen, "100.64.0.1", tok("probe"))
		return code == http.StatusFound
	})
	if code, body := get(cfgs[0].HTTP.Listen, "100.64.0.1", ""); code != http.StatusForbidden {
		t.Fatalf("no token under auth required: %d %s", code, body)
	}
	// A token made with schedctl is accepted; one with another key id is not.
	for kid, want := range map[string]int{"k1": http.StatusFound, "k0": http.StatusForbidden} {
		out, err := schedctl(t, "", "token", "--key-id", kid, "--secret-file", secret, "--sub", "ops", "--desired-kbps", "1200")
		if err != nil {
			t.Fatalf("schedctl token: %v %s", err, out)
		}
		if code, loc := get(cfgs[0].HTTP.Listen, "100.64.0.1", strings.TrimSpace(out)); code != want {
			t.Fatalf("schedctl token with kid %s: %d %s, want %d", kid, code, loc, want)
		}
	}

	// 16 viewers per instance want 5 Mbps each: 160 Mbps for 40.
	send := func() map[string]string {
		locs := map[string]string{}
		for i := range 16 {
			for j, rc := range cfgs {
				sub := fmt.Sprintf("v%d-%d", j, i)
				code, loc := get(rc.HTTP.Listen, fmt.Sprintf("100.64.%d.%d", j, i+10), tok(sub))
				if code != http.StatusFound {
					t.Fatalf("%s: %d %s", sub, code, loc)
				}
				locs[sub] = loc
			}
		}
		return locs
	}
	status := func(admin string) allocator.Status {
		var st allocator.Status
		resp, err := http.Get("http://" + admin + "/debug/alloc")
		if err != nil {
			return st
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&st)
		return st
	}
	send()
	waitUp(t, "both instances plan every session", func() bool {
		send()
		return status(cfgs[0].Admin.Listen).PlannedN >= 16 && status(cfgs[1].Admin.Listen).PlannedN >= 16
	})
	// A planned STB's redirect carries its planned bitrate; over the whole
	// region, no server is given more than its 20 Mbps.
	locs := send()
	perServer := map[string]int{}
	rungs := map[string]int{}
	for _, loc := range locs {
		parts := strings.Split(strings.TrimPrefix(loc, "http://"), "/")
		if len(parts) != 5 {
			t.Fatalf("Location %q", loc)
		}
		var kbps int
		fmt.Sscanf(parts[3], "%d", &kbps)
		rungs[parts[3]]++
		if !strings.HasPrefix(parts[0], "10.2.") {
			perServer[parts[0]] += kbps
		}
	}
	for srv, kbps := range perServer {
		if kbps > 20000 {
			t.Fatalf("STBs were sent %d kbps on %s (capacity 20000): %v", kbps, srv, locs)
		}
	}
	if rungs["1200"]+rungs["2500"] == 0 {
		t.Fatalf("every STB got 5000 kbps although capacity is a quarter of demand: %v", rungs)
	}
	records, sum, err := (&store.ClaimBoard{Store: e.Store(), Region: "hefei"}).Totals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if records != 2 {
		t.Fatalf("%d claim records, want one per instance", records)
	}
	for name, c := range sum {
		if c.BandwidthKbps > 20000*(1+1e-9) {
			t.Fatalf("claims on %s add up to %v kbps", name, c.BandwidthKbps)
		}
	}
	t.Logf("rungs %v, per server %v kbps, claims %v", rungs, perServer, sum)

	// schedctl status shows both plans (through the center's admin API).
	// The center, configured with the same key, is the safety net for the
	// city: it checks tokens by the same rules and gives the viewer's rung.
	cc := centerConfig(t)
	cc.Etcd.Endpoints = []string{e.Endpoint()}
	cc.HTTP.Listen = anyPort
	cc.HTTP.TrustedProxies = []config.Network{config.MustParseNetwork("127.0.0.1")}
	cc.Alloc.Auth = "required"
	cc.Alloc.Keys = []token.KeyFile{{ID: "k1", SecretFile: secret}}
	if err := cc.Validate(); err != nil {
		t.Fatal(err)
	}
	runCenter(t, &cc)
	waitUp(t, "center answers", func() bool {
		code, _ := get(cc.HTTP.Listen, "100.64.0.1", tok("probe"))
		return code == http.StatusFound
	})
	if code, loc := get(cc.HTTP.Listen, "100.64.0.1", ""); code != http.StatusForbidden {
		t.Fatalf("center, no token under auth required: %d %s", code, loc)
	}
	low, err := token.Sign(key, token.Claims{Subject: "low", Expires: time.Now().Add(time.Hour), DesiredKbps: 2000, DanmakuPerHour: 1, Gift: math.NaN()})
	if err != nil {
		t.Fatal(err)
	}
	if code, loc := get(cc.HTTP.Listen, "100.64.0.1", low); code != http.StatusFound || !strings.Contains(loc, "/live/cctv1/2500/") {
		t.Fatalf("center, viewer wanting 2000 kbps: %d %s, want the 2500 rung", code, loc)
	}
	// schedctl status also lists what the center answered, by the STBs'
	// region: the three requests above (two redirects, one refused).
	waitUp(t, "schedctl status shows both QoE plans and the center's answers", func() bool {
		out, err := schedctl(t, cc.GRPC.Listen, "status")
		return err == nil && strings.Contains(out, "QOE PLAN") &&
			regexp.MustCompile(`(?m)^hefei-1\s+hefei\s+\d+\s+\d+`).MatchString(out) &&
			regexp.MustCompile(`(?m)^hefei-2\s+hefei\s+\d+\s+\d+`).MatchString(out) &&
			regexp.MustCompile(`(?m)^CENTER\s+STB_REGION\s+ANSWERED\s+FAILED\s+LAST_ANSWER$`).MatchString(out) &&
			regexp.MustCompile(`(?m)^`+cc.InstanceID+`\s+hefei\s+[1-9]\d*\s+0\s+\S+ ago$`).MatchString(out)
	})
}
