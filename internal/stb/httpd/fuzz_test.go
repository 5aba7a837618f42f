package httpd_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/pathway"
	"github.com/anysched/anysched/internal/stb/steer"
)

// FuzzHandler feeds arbitrary request bytes through http.ReadRequest (so the
// handler sees what the wire can carry, malformed or not) into the handler.
// It must never panic, answer only the documented statuses, always name the
// instance, and every 302 must carry a Location that parses as an absolute
// URL; JSON answers must decode.
//
// Seeds: testdata/fuzz/FuzzHandler.
//
//	go test ./internal/stb/httpd -run '^$' -fuzz FuzzHandler -fuzztime 60s
func FuzzHandler(f *testing.F) {
	f.Add(uint8(0), "GET", "/cctv1/index.m3u8", "live.iptv.example", "Accept: */*", "100.64.1.7:4000")
	f.Add(uint8(0), "GET", "/cctv1/index.m3u8?format=json", "live.iptv.example:80", "X-Forwarded-For: 100.68.0.1", "10.0.0.1:4000")
	f.Add(uint8(1), "HEAD", "http://LIVE.iptv.example/a/b", "x", "Accept: application/json", "[::ffff:100.64.1.7]:1")
	f.Add(uint8(2), "POST", "*", "", "", "")
	f.Add(uint8(3), "GET", "/%zz/../x", "live.iptv.example.", "X-Forwarded-For: a, , 10.1.1.1:80, [2001:db8::1]", "10.9.9.9:1")
	// Content steering manifests (pathway.Prefix).
	f.Add(uint8(0), "GET", pathway.Prefix+"/cctv1/index.m3u8?_HLS_pathway=.&_HLS_throughput=1000", "live.iptv.example", "", "100.64.1.7:4000")
	f.Add(uint8(1), "GET", pathway.Prefix+"/cctv1/index.m3u8?_anysched_base=hefei-1-a&_HLS_pathway=.", "live.iptv.example", "", "100.64.1.7:4000")
	f.Add(uint8(1), "HEAD", pathway.Prefix+"/cctv1/index.m3u8?_DASH_pathway=luan-1-a&x=%22", "live.iptv.example", "", "100.68.0.1:1")
	f.Add(uint8(2), "GET", pathway.Prefix+"/a?_HLS_pathway=%00&_HLS_throughput=-", "live.iptv.example", "", "100.64.1.7:4000")
	f.Add(uint8(3), "GET", pathway.Prefix+"/?_anysched_base=", "vod.other.example", "", "")

	snap := compile(f, []byte(testTopology))
	hefei, _ := snap.Region("hefei")
	engines := []*steer.Engine{
		steer.New(snap, steer.Options{DefaultRegion: "wuhu"}),
		steer.New(snap, steer.Options{Available: func(s int32) bool { return snap.Servers[s].Region != hefei }}),
		steer.New(snap, steer.Options{Available: func(int32) bool { return false }}),
		nil, // no snapshot yet
	}
	servers := make([]*httpd.Server, len(engines))
	for i, e := range engines {
		servers[i] = httpd.New(httpd.Config{InstanceID: instance, TrustedProxies: mustPrefixes(f, "10.0.0.0/8", "::ffff:0:0/96"), Steering: pathway.New(nil)},
			func() *steer.Engine { return e }, nil, nil)
	}
	documented := map[int]bool{200: true, 302: true, 400: true, 404: true, 405: true, 413: true, 414: true, 503: true}

	f.Fuzz(func(t *testing.T, mode uint8, method, target, host, header, remote string) {
		raw := method + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\n" + header + "\r\n\r\n"
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // net/http's server would have answered 400 itself
		}
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		servers[int(mode)%len(servers)].ServeHTTP(w, r)

		if !documented[w.Code] {
			t.Fatalf("undocumented status %d for %q", w.Code, raw)
		}
		if got := w.Header().Get("X-Anysched-Instance"); got != instance {
			t.Fatalf("X-Anysched-Instance %q for %q", got, raw)
		}
		switch w.Code {
		case 302:
			loc := w.Header().Get("Location")
			u, err := url.Parse(loc)
			if err != nil || u.Scheme != "http" || u.Host == "" {
				t.Fatalf("302 Location %q (%v) for %q", loc, err, raw)
			}
		case 405:
			if w.Header().Get("Allow") != "GET, HEAD" {
				t.Fatalf("405 without Allow for %q", raw)
			}
		case 503:
			if w.Header().Get("Retry-After") == "" {
				t.Fatalf("503 without Retry-After for %q", raw)
			}
		}
		steering := strings.HasPrefix(r.URL.EscapedPath(), pathway.Prefix+"/")
		if steering && w.Code == 200 && r.Method != http.MethodHead {
			var m struct {
				VERSION  int
				TTL      int
				Priority []string `json:"PATHWAY-PRIORITY"`
				DASH     []string `json:"SERVICE-LOCATION-PRIORITY"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || m.VERSION != 1 || m.TTL < 1 || len(m.Priority)+len(m.DASH) == 0 {
				t.Fatalf("bad steering manifest %q (%v) for %q", w.Body.Bytes(), err, raw)
			}
		} else if w.Header().Get("Content-Type") == "application/json" && r.Method != http.MethodHead {
			var a httpd.Answer
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || a.Instance != instance {
				t.Fatalf("bad JSON answer %q (%v) for %q", w.Body.Bytes(), err, raw)
			}
			if w.Code == 200 && a.Location == "" {
				t.Fatalf("200 JSON without a location for %q", raw)
			}
		}
	})
}
