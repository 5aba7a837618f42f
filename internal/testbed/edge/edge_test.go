package edge

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/health"
)

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestEdgeServesHLSAndStats(t *testing.T) {
	s := &Server{}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	for _, tc := range []struct {
		path, want string // want: in the playlist
	}{
		{"/live/ch1/6000/", "#EXT-X-MEDIA-SEQUENCE:0"},
		{"/vod/title7/2000/", "#EXT-X-ENDLIST"},
	} {
		resp, body := get(t, ts.URL+tc.path+"index.m3u8")
		if resp.StatusCode != 200 || !strings.HasPrefix(body, "#EXTM3U") || strings.Count(body, ".ts") != 3 || !strings.Contains(body, tc.want) {
			t.Fatalf("playlist %s: %d %q", tc.path, resp.StatusCode, body)
		}
		resp, body = get(t, ts.URL+tc.path+"seg1.ts")
		if resp.StatusCode != 200 || len(body) != SegmentBytes {
			t.Fatalf("segment %s: %d, %d bytes", tc.path, resp.StatusCode, len(body))
		}
		if resp, _ = get(t, ts.URL+tc.path+"segX.ts"); resp.StatusCode != 404 {
			t.Fatalf("bad segment %s: %d", tc.path, resp.StatusCode)
		}
	}
	resp, body := get(t, ts.URL+"/stats")
	var stats map[string]any
	if err := json.Unmarshal([]byte(body), &stats); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stats %q: %v", body, err)
	}
	// The health checkers understand the stats body.
	if _, ok := health.ParseBody(resp.Header.Get("Content-Type"), []byte(body)); !ok {
		t.Fatalf("health.ParseBody does not read %q", body)
	}
}

// TestFailFile: while the fail file exists the media path fails and the
// probes still succeed; without it the edge serves again.
func TestFailFile(t *testing.T) {
	fail := filepath.Join(t.TempDir(), "fail")
	s := &Server{FailFile: fail}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	status := func(p string) int {
		resp, _ := get(t, ts.URL+p)
		return resp.StatusCode
	}
	paths := []struct {
		path  string
		media bool
	}{
		{"/live/ch1/730/index.m3u8", true}, {"/live/ch1/730/seg0.ts", true}, {"/vod/t1/730/index.m3u8", true},
		{"/health", false}, {"/stats", false},
	}
	for _, step := range []struct {
		name   string
		exists bool
	}{{"before", false}, {"failing", true}, {"healed", false}} {
		if step.exists {
			if err := os.WriteFile(fail, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		} else {
			_ = os.Remove(fail)
		}
		for _, p := range paths {
			want := 200
			if step.exists && p.media {
				want = 500
			}
			if got := status(p.path); got != want {
				t.Errorf("%s: %s answered %d, want %d", step.name, p.path, got, want)
			}
		}
	}
}
