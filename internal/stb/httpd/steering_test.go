package httpd_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/pathway"
	"github.com/anysched/anysched/internal/stb/steer"
)

// TestSteeringManifest: the manifest path on a real listener of each
// server: a player in hefei's zone is pinned to hefei-1-a, moved to
// luan-1-a (hefei's fallback) once hefei has nothing, every answer
// logged with what it decided; bad input is a 400 and counted.
func TestSteeringManifest(t *testing.T) {
	for _, server := range []string{httpd.ServerFast, httpd.ServerNetHTTP} {
		t.Run(strings.ReplaceAll(server, "/", ""), func(t *testing.T) {
			rec, logs, _, stop := recording(t)
			st := pathway.New(nil)
			cfg := httpd.Config{InstanceID: instance, Server: server, Steering: st}
			all := serve(t, httpd.New(cfg, testEngine(t, availAll), rec, nil))
			noHefei := serve(t, httpd.New(cfg, testEngine(t, availNoHefei), rec, nil))
			get := func(base, query string) (int, map[string]any) {
				t.Helper()
				resp, body := do(t, base, req{from: "127.0.0.2", path: pathway.Prefix + "/cctv1/index.m3u8?" + query})
				var m map[string]any
				if resp.StatusCode == http.StatusOK {
					if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
						t.Fatalf("Content-Type %q", ct)
					}
					if o := resp.Header.Get("Access-Control-Allow-Origin"); o != "*" {
						t.Fatalf("Access-Control-Allow-Origin %q", o)
					}
					if err := json.Unmarshal([]byte(body), &m); err != nil {
						t.Fatalf("manifest %q: %v", body, err)
					}
				}
				return resp.StatusCode, m
			}
			code, m := get(all, "_HLS_pathway=.&_HLS_throughput=100000")
			if code != 200 || m["VERSION"] != 1.0 || m["RELOAD-URI"] != pathway.Prefix+"/cctv1/index.m3u8?_anysched_base=hefei-1-a" {
				t.Fatalf("first manifest %d %v", code, m)
			}
			code, m = get(noHefei, "_anysched_base=hefei-1-a&_HLS_pathway=.")
			prio, _ := m["PATHWAY-PRIORITY"].([]any)
			if code != 200 || len(prio) == 0 || prio[0] != "luan-1-a" {
				t.Fatalf("manifest after hefei went down %d %v", code, m)
			}
			for _, q := range []string{"_HLS_pathway=a%2Fb", "_HLS_throughput=x", "_anysched_base=."} {
				if code, _ := get(all, q); code != http.StatusBadRequest {
					t.Errorf("%s: %d, want 400", q, code)
				}
			}
			if resp, _ := do(t, all, req{path: pathway.Prefix + "/"}); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("no playback path: %d", resp.StatusCode)
			}
			stop()
			out := logs.String()
			for _, want := range []string{`"server":"hefei-1-a","target":"10.1.1.10:8080","status":200`, `"steering":"pinned","from":"hefei-1-a"`, `"server":"luan-1-a"`, `"steering":"forced","from":"hefei-1-a"`} {
				if !strings.Contains(out, want) {
					t.Errorf("access log lacks %s:\n%s", want, out)
				}
			}
		})
	}
}

// TestSteeringOff: without a Steerer, or for a service without a steering
// block, the path is a 404 that says so, not a redirect.
func TestSteeringOff(t *testing.T) {
	base := serve(t, httpd.New(httpd.Config{InstanceID: instance}, testEngine(t, availAll), nil, nil))
	resp, body := do(t, base, req{path: pathway.Prefix + "/cctv1/index.m3u8"})
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "content steering is not served here") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	eng := steer.New(compile(t, []byte(strings.Replace(testTopology, "    steering: {}\n", "", 1))), steer.Options{})
	base = serve(t, httpd.New(httpd.Config{InstanceID: instance, Steering: pathway.New(nil)}, func() *steer.Engine { return eng }, nil, nil))
	resp, body = do(t, base, req{path: pathway.Prefix + "/cctv1/index.m3u8"})
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "service has no content steering") {
		t.Fatalf("a service without steering: %d %q", resp.StatusCode, body)
	}
}

// TestSteeringAsksTheAllocator: a manifest request goes through the
// allocator as a redirect does, token and all; a refusal is a 403.
func TestSteeringAsksTheAllocator(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		h := &hook{refuse: refuse}
		s := httpd.New(httpd.Config{InstanceID: instance, Allocator: h, Steering: pathway.New(nil)}, testEngine(t, availAll), nil, nil)
		resp, body := do(t, serve(t, s), req{from: "127.0.0.2", path: pathway.Prefix + "/cctv1/index.m3u8?token=abc.def&_HLS_pathway=."})
		want := map[bool]int{false: http.StatusOK, true: http.StatusForbidden}[refuse]
		if resp.StatusCode != want || h.token() != "abc.def" {
			t.Fatalf("refuse %v: status %d, token %q (%s)", refuse, resp.StatusCode, h.token(), body)
		}
		// The token stays in RELOAD-URI: the player's next manifests carry it.
		if !refuse && !strings.Contains(body, `"RELOAD-URI":"`+pathway.Prefix+`/cctv1/index.m3u8?token=abc.def&_anysched_base=hefei-1-a"`) {
			t.Fatalf("manifest %s", body)
		}
	}
}
