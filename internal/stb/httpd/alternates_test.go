package httpd_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/steer"
)

// TestAlternates: with answers: 3 the JSON answer lists the further
// locations in order, and with alternates_header the 302 carries them, on
// both serving paths; without, neither does.
func TestAlternates(t *testing.T) {
	svc := "    bitrates_kbps: [730, 3000]\n"
	for _, server := range []string{httpd.ServerFast, httpd.ServerNetHTTP} {
		for _, tc := range []struct {
			name, extra string
			header      string // X-Anysched-Alternates of the 302
			json        []string
		}{
			{"one answer", "", "", nil},
			{"three answers", "    answers: 3\n", "", []string{locLuan, locWuhu}},
			{"three with header", "    answers: 3\n    alternates_header: true\n", locLuan + ", " + locWuhu, []string{locLuan, locWuhu}},
		} {
			t.Run(server+"/"+tc.name, func(t *testing.T) {
				snap := compile(t, []byte(strings.Replace(testTopology, svc, svc+tc.extra, 1)))
				e := steer.New(snap, steer.Options{DefaultRegion: "wuhu"})
				base := serve(t, httpd.New(httpd.Config{InstanceID: instance, Server: server}, func() *steer.Engine { return e }, nil, nil))
				resp, _ := do(t, base, req{from: "127.0.0.2"}) // hefei-north
				if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != locHefei {
					t.Fatalf("302: %d %q", resp.StatusCode, resp.Header.Get("Location"))
				}
				if got := resp.Header.Get(httpd.AlternatesHeader); got != tc.header {
					t.Errorf("%s: %q, want %q", httpd.AlternatesHeader, got, tc.header)
				}
				_, body := do(t, base, req{from: "127.0.0.2", path: "/cctv1/index.m3u8?format=json"})
				var an httpd.Answer
				if err := json.Unmarshal([]byte(body), &an); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, a := range an.Alternates {
					got = append(got, a.Location)
				}
				if strings.Join(got, " ") != strings.Join(tc.json, " ") || an.Location != locHefei {
					t.Errorf("JSON alternates %v (location %q), want %v", got, an.Location, tc.json)
				}
			})
		}
	}
}
