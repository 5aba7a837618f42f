package edge

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/health"
)

func TestEdgeServesHLSAndStats(t *testing.T) {
	s := &Server{}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	get := func(p string) (*http.Response, string) {
		resp, err := http.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, body := get("/live/ch1/6000/index.m3u8")
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "#EXTM3U") || strings.Count(body, ".ts") != 3 {
		t.Fatalf("playlist %d %q", resp.StatusCode, body)
	}
	resp, body = get("/live/ch1/6000/seg1.ts")
	if resp.StatusCode != 200 || len(body) != SegmentBytes {
		t.Fatalf("segment %d, %d bytes", resp.StatusCode, len(body))
	}
	if resp, _ = get("/live/ch1/6000/segX.ts"); resp.StatusCode != 404 {
		t.Fatalf("bad segment: %d", resp.StatusCode)
	}
	resp, body = get("/stats")
	var stats map[string]any
	if err := json.Unmarshal([]byte(body), &stats); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stats %q: %v", body, err)
	}
	// The health checkers understand the stats body.
	if _, ok := health.ParseBody(resp.Header.Get("Content-Type"), []byte(body)); !ok {
		t.Fatalf("health.ParseBody does not read %q", body)
	}
}
