package httpd_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/steer"
)

// rawGet sends a request line as written (no client-side path cleaning, as
// an STB or an attacker may send it) and returns status, Location and body.
func rawGet(t *testing.T, addr, target string) (int, string, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %q: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// Dot segments, backslashes and encoded slashes get a 400 with the reason;
// they never become a channel or part of an edge path.
func TestDotSegmentsRefused(t *testing.T) {
	addr := strings.TrimPrefix(serve(t, httpd.New(httpd.Config{InstanceID: instance}, testEngine(t, availAll), nil, nil)), "http://")
	for target, reason := range map[string]string{
		"/../etc/passwd":                steer.ReasonDotSegment,
		"/..":                           steer.ReasonDotSegment,
		"/cctv1/../../x":                steer.ReasonDotSegment,
		"/./cctv1/index.m3u8":           steer.ReasonDotSegment,
		"/%2e%2e/x":                     steer.ReasonDotSegment,
		"/%2E./x":                       steer.ReasonDotSegment,
		"/cctv1/%2e":                    steer.ReasonDotSegment,
		"/..%2fetc/passwd":              steer.ReasonPathEscape,
		"/a%5c..%5cb":                   steer.ReasonPathEscape,
		"/a%00/index.m3u8":              steer.ReasonPathControl,
		"/../x?token=a.b.c":             steer.ReasonDotSegment,
		"http://live.iptv.example/../x": steer.ReasonDotSegment,
	} {
		code, loc, body := rawGet(t, addr, target)
		if code != http.StatusBadRequest || !strings.Contains(body, reason) || loc != "" {
			t.Errorf("GET %s: %d %q Location %q; want 400 with %q", target, code, body, loc, reason)
		}
	}
	for _, target := range []string{"/cctv1/index.m3u8", "/.../x", "/a..b/index.m3u8", "/.hidden/x"} {
		if code, _, body := rawGet(t, addr, target); code != http.StatusFound {
			t.Errorf("GET %s: %d %q; want 302", target, code, body)
		}
	}
}
