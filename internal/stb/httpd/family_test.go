package httpd_test

import (
	"strings"
	"testing"

	healthavail "github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/balance"
	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/pathway"
	"github.com/anysched/anysched/internal/stb/steer"
)

// dualTopology is testTopology gone dual-stack in hefei: hefei-1-a has an
// IPv6 address, luan and wuhu stay IPv4-only; ::1 is in hefei's zone, so
// an STB there is "inside a zone" over IPv6 loopback. skip.iptv.example
// is the same service with family_fallback skip.
var dualTopology = strings.NewReplacer(
	"center_prefix: 198.18.0.0/26}", `center_prefix: 198.18.0.0/26, service_ip6: "2001:db8:ff::1", center_prefix6: "2001:db8:ff::/48"}`,
	`address: "10.1.1.10:8080"}`, `address: "10.1.1.10:8080", address6: "[2001:db8:1::10]:8080"}`,
	"127.0.0.2/32]", `127.0.0.2/32, "::1/128", "2001:db8:100::/48"]`,
).Replace(testTopology) + `  - name: live6
    hostnames: [skip.iptv.example]
    url_template: "http://{host}:{port}/live/{channel}/{bitrate}/index.m3u8"
    bitrates_kbps: [730, 3000]
    family_fallback: skip
    answers: 2
`

const (
	locHefei6 = "http://[2001:db8:1::10]:8080/live/cctv1/3000/index.m3u8"
	skipHost  = "skip.iptv.example"
)

// dualEngine is dualTopology's engine; v6Down: hefei-1-a's IPv6 address
// failed its checks while its IPv4 one works.
func dualEngine(t testing.TB, v6Down bool) httpd.EngineFunc {
	t.Helper()
	snap := compile(t, []byte(dualTopology))
	n := len(snap.Servers)
	av := &healthavail.Availability{Available: make([]bool, n), Why: make([]string, n), Figures: make([]healthavail.Figures, n), FamilyDown: &[2][]bool{make([]bool, n), make([]bool, n)}}
	for i := range av.Available {
		av.Available[i] = true
	}
	av.FamilyDown[1][0] = v6Down // hefei-1-a
	e, err := steer.Build(snap, steer.Inputs{DefaultRegion: "wuhu", Avail: av, Balance: balance.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	return func() *steer.Engine { return e }
}

// TestDualStackRedirects: over real HTTP, on both serving paths, an STB
// connected over IPv6 gets the chosen server's IPv6 address (bracketed),
// one over IPv4 (also 4-in-6 on a dual-stack socket) its IPv4 address;
// family_fallback other gives an IPv6 STB an IPv4-only server's IPv4
// address, skip sends it to the nearest region with IPv6; the JSON answer
// and the access log say the family asked and given.
func TestDualStackRedirects(t *testing.T) {
	for _, mode := range []string{httpd.ServerFast, httpd.ServerNetHTTP} {
		t.Run(mode, func(t *testing.T) {
			rec, logs, _, stop := recording(t)
			cfg := httpd.Config{InstanceID: instance, Server: mode, TrustedProxies: mustPrefixes(t, "::1/128")}
			eng := dualEngine(t, false)
			v6 := serveOn(t, httpd.New(cfg, eng, rec, nil), "[::1]:0")
			v4 := serve(t, httpd.New(cfg, eng, rec, nil))
			dual := serveOn(t, httpd.New(cfg, eng, rec, nil), "[::]:0")
			dualAs4 := "http://127.0.0.1:" + dual[strings.LastIndexByte(dual, ':')+1:]
			xff := func(a string) map[string]string { return map[string]string{"X-Forwarded-For": a} }
			for _, tc := range []struct {
				name, base string
				r          req
				want       string
			}{
				{"IPv6 STB in hefei", v6, req{from: "::1"}, locHefei6},
				{"IPv4 STB in hefei", v4, req{from: "127.0.0.2"}, locHefei},
				{"IPv4 STB on a dual-stack socket", dualAs4, req{from: "127.0.0.2"}, locHefei},
				{"IPv6 STB on a dual-stack socket", dual, req{from: "::1"}, locHefei6},
				{"IPv6 STB in wuhu, other: IPv4", v6, req{from: "::1", header: xff("2001:db8:99::1")}, locWuhu},
				{"IPv6 STB in wuhu, skip: hefei by IPv6", v6, req{from: "::1", host: skipHost, header: xff("2001:db8:99::1")}, locHefei6},
				{"IPv4 STB behind an IPv6 proxy", v6, req{from: "::1", header: xff("100.64.1.9")}, locHefei},
			} {
				resp, body := do(t, tc.base, tc.r)
				if resp.StatusCode != 302 || resp.Header.Get("Location") != tc.want {
					t.Errorf("%s: %d %q (%s), want 302 to %q", tc.name, resp.StatusCode, resp.Header.Get("Location"), body, tc.want)
				}
			}
			// JSON: the family asked, the address given and its family;
			// the alternate of a skip service has the family too.
			_, body := do(t, v6, req{from: "::1", path: "/cctv1/index.m3u8?format=json", header: xff("2001:db8:99::1")})
			an := decodeAnswer(t, body)
			if an.Family != "ipv6" || an.AddressFamily != "ipv4" || an.Address != "10.2.1.10:8080" || an.Server != "wuhu-1-a" {
				t.Errorf("JSON other: %+v", an)
			}
			_, body = do(t, v6, req{from: "::1", host: skipHost, path: "/cctv1/index.m3u8?format=json"})
			an = decodeAnswer(t, body)
			if an.Family != "ipv6" || an.AddressFamily != "ipv6" || an.Address != "[2001:db8:1::10]:8080" || len(an.Alternates) != 0 {
				t.Errorf("JSON skip: %+v (hefei-1-a is the only IPv6 server: no alternate)", an)
			}
			stop()
			for _, want := range []string{
				`"client":"::1","host":"live.iptv.example","path":"/cctv1/index.m3u8","result":"CZ","zone":"hefei-north","client_region":"hefei","region":"hefei","server":"hefei-1-a","target":"[2001:db8:1::10]:8080","status":302`,
				`"client":"127.0.0.2","host":"live.iptv.example","path":"/cctv1/index.m3u8","result":"CZ","zone":"hefei-north","client_region":"hefei","region":"hefei","server":"hefei-1-a","target":"10.1.1.10:8080","status":302`,
				`"client":"2001:db8:99::1","host":"live.iptv.example","path":"/cctv1/index.m3u8","result":"DEFAULT","zone":"","client_region":"wuhu","region":"wuhu","server":"wuhu-1-a","target":"10.2.1.10:8080","status":302`,
				`"client":"2001:db8:99::1","host":"skip.iptv.example","path":"/cctv1/index.m3u8","result":"FALLBACK"`,
			} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("access log has no %s\n%s", want, logs.String())
				}
			}
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				ok := strings.HasSuffix(line, `"family":"ipv6","target_family":"ipv6"}`) && strings.Contains(line, `"target":"[`) ||
					strings.HasSuffix(line, `"family":"ipv4","target_family":"ipv4"}`) && strings.Contains(line, `"target":"10.`) ||
					strings.HasSuffix(line, `"family":"ipv6","target_family":"ipv4"}`) && strings.Contains(line, `"target":"10.2.1.10:8080"`)
				if !ok {
					t.Errorf("line's families disagree with its target: %s", line)
				}
			}
		})
	}
}

// TestDualStackFamilyDown: hefei-1-a's IPv6 address down, its IPv4 up: an
// IPv6 STB of an other service is given its IPv4 address, of a skip
// service, nothing with IPv6 being left, a 503.
func TestDualStackFamilyDown(t *testing.T) {
	base := serveOn(t, httpd.New(httpd.Config{InstanceID: instance}, dualEngine(t, true), nil, nil), "[::1]:0")
	if resp, _ := do(t, base, req{from: "::1"}); resp.StatusCode != 302 || resp.Header.Get("Location") != locHefei {
		t.Errorf("other: %d %q, want 302 to %q", resp.StatusCode, resp.Header.Get("Location"), locHefei)
	}
	if resp, body := do(t, base, req{from: "::1", host: skipHost}); resp.StatusCode != 503 {
		t.Errorf("skip: %d %q %s, want 503", resp.StatusCode, resp.Header.Get("Location"), body)
	}
}

// TestDualStackSteering: a steering manifest decides for the player's
// family as its redirect did: an IPv6 player on a skip service is kept on
// the server with IPv6 and the pathway's address is its IPv6 one, on both
// serving paths.
func TestDualStackSteering(t *testing.T) {
	for _, mode := range []string{httpd.ServerFast, httpd.ServerNetHTTP} {
		t.Run(mode, func(t *testing.T) {
			rec, logs, _, stop := recording(t)
			eng := dualEngine(t, false)
			snap := eng().Snapshot()
			for i := range snap.Services {
				snap.Services[i].Steering = &topology.SteeringView{TTL: 10, Retry: 2, MovesPerSecond: 10, MoveBurst: 10, Pathways: 3}
			}
			cfg := httpd.Config{InstanceID: instance, Server: mode, TrustedProxies: mustPrefixes(t, "::1/128"), Steering: pathway.New(nil)}
			v6 := serveOn(t, httpd.New(cfg, eng, rec, nil), "[::1]:0")
			resp, body := do(t, v6, req{from: "::1", host: skipHost, path: pathway.Prefix + "/cctv1/index.m3u8?_HLS_pathway=.",
				header: map[string]string{"X-Forwarded-For": "2001:db8:99::1"}})
			if resp.StatusCode != 200 || !strings.Contains(body, `"RELOAD-URI":"`+pathway.Prefix+`/cctv1/index.m3u8?_anysched_base=hefei-1-a"`) {
				t.Fatalf("IPv6 player in wuhu on the skip service: %d %s, want pinned to hefei-1-a (the only server with IPv6)", resp.StatusCode, body)
			}
			stop()
			if out := logs.String(); !strings.Contains(out, `"server":"hefei-1-a","target":"[2001:db8:1::10]:8080"`) || !strings.Contains(out, `"family":"ipv6","target_family":"ipv6"`) {
				t.Errorf("access log of the manifest:\n%s", out)
			}
		})
	}
}
