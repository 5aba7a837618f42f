package steer_test

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// queryDoc has a service whose template copies the path and the query.
const queryDoc = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: west, location: {lat: 31.0, lon: 116.0}}
nodes:
  - name: west-1
    region: west
    location: {lat: 31.0, lon: 116.0}
    servers:
      - {name: west-1-a, address: "10.0.1.1:8080"}
zones:
  - {name: west-z, region: west, networks: [100.64.1.0/24]}
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/{path}?{query}&ch={channel}"
    bitrates_kbps: [2000]
`

// BenchmarkAppendLocation: rendering a redirect that copies path and query
// (the query carries the viewer token, which is dropped).
func BenchmarkAppendLocation(b *testing.B) {
	s := fixture.CompileYAML(b, queryDoc, 1)
	e := steer.New(s, steer.Options{})
	d := e.Decide(steer.Request{Client: netip.MustParseAddr("100.64.1.7"), Host: "live.iptv.example"})
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = e.AppendLocation(buf[:0], &d, "/cctv1/index.m3u8", "a=1&token=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln&b=x%20y")
	}
}

func TestAppendLocationEscapesAndStrips(t *testing.T) {
	s := fixture.CompileYAML(t, queryDoc, 1)
	e := steer.New(s, steer.Options{StripQuery: []string{"sig"}})
	d := e.Decide(steer.Request{Client: netip.MustParseAddr("100.64.1.7"), Host: "live.iptv.example"})
	for _, tt := range []struct{ name, path, query, want string }{
		{"plain", "/cctv1/index.m3u8", "a=1&b=2", "http://10.0.1.1:8080/cctv1/index.m3u8?a=1&b=2&ch=cctv1"},
		{"token dropped", "/cctv1/i.m3u8", "a=1&token=abc.def.ghi&b=2", "http://10.0.1.1:8080/cctv1/i.m3u8?a=1&b=2&ch=cctv1"},
		{"token first and last", "/c/i", "token=x&a=1&token=y", "http://10.0.1.1:8080/c/i?a=1&ch=c"},
		{"token spelled otherwise", "/c/i", "TOKEN=x&tok%65n=y&Token&a=1", "http://10.0.1.1:8080/c/i?a=1&ch=c"},
		{"token-like names kept", "/c/i", "tokens=1&xtoken=2&token_id=3", "http://10.0.1.1:8080/c/i?tokens=1&xtoken=2&token_id=3&ch=c"},
		{"configured name dropped", "/c/i", "sig=s&a=1&SIG=t", "http://10.0.1.1:8080/c/i?a=1&ch=c"},
		{"empty pairs dropped", "/c/i", "&&a=1&&", "http://10.0.1.1:8080/c/i?a=1&ch=c"},
		{"raw bytes escaped", "/c/i", "q=\"<script>\"&r=a b\x01\xff", "http://10.0.1.1:8080/c/i?q=%22%3Cscript%3E%22&r=a%20b%01%FF&ch=c"},
		{"valid escapes kept, stray % escaped", "/c/i", "a=x%20y&b=100%&c=%zz", "http://10.0.1.1:8080/c/i?a=x%20y&b=100%25&c=%25zz&ch=c"},
		{"path bytes escaped", "/c\"h/a b<>\xe4\xb8\xad.ts", "", "http://10.0.1.1:8080/c%22h/a%20b%3C%3E%E4%B8%AD.ts?&ch=c%22h"},
		{"path in the query cannot add parameters", "/a&token=x+y?z/i", "", "http://10.0.1.1:8080/a&token=x+y%3Fz/i?&ch=a%26token%3Dx%2By%3Fz"},
		{"fragment and reserved bytes in query", "/c/i", "a=#{}|\\^`", "http://10.0.1.1:8080/c/i?a=%23%7B%7D%7C%5C%5E%60&ch=c"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(e.AppendLocation(nil, &d, tt.path, tt.query)); got != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestPathReason(t *testing.T) {
	for path, want := range map[string]string{
		"/":                      "",
		"/cctv1/index.m3u8":      "",
		"/cctv1/...":             "",
		"/.hidden/a":             "",
		"/a..b/c":                "",
		"/%E4%B8%AD/i.m3u8":      "",
		"/..":                    steer.ReasonDotSegment,
		"/../etc/passwd":         steer.ReasonDotSegment,
		"/cctv1/../cctv2/i.m3u8": steer.ReasonDotSegment,
		"/./cctv1":               steer.ReasonDotSegment,
		"/cctv1/.":               steer.ReasonDotSegment,
		"/%2e%2e/x":              steer.ReasonDotSegment,
		"/.%2E/x":                steer.ReasonDotSegment,
		"/%2e/x":                 steer.ReasonDotSegment,
		"/a\\b":                  steer.ReasonPathEscape,
		"/a%5cb":                 steer.ReasonPathEscape,
		"/..%2fetc":              steer.ReasonPathEscape,
		"/a%2Fb":                 steer.ReasonPathEscape,
		"/a%00b":                 steer.ReasonPathControl,
		"/a\x7fb":                steer.ReasonPathControl,
		"/a%":                    steer.ReasonPathEncoding,
		"/a%2":                   steer.ReasonPathEncoding,
		"/a%zz":                  steer.ReasonPathEncoding,
	} {
		if got := steer.PathReason(path); got != want {
			t.Errorf("PathReason(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestChannelNeverDots(t *testing.T) {
	for path, want := range map[string]string{
		"/cctv1/index.m3u8": "cctv1", "/": "", "/../x": "", "/./x": "", "/%2e%2e/x": "", "/.../x": "...",
	} {
		if got := steer.Channel(path); got != want {
			t.Errorf("Channel(%q) = %q, want %q", path, got, want)
		}
	}
}

// FuzzAppendQuery: whatever the STB sends, the copied query and path hold
// only URI bytes (valid percent-escapes included), the token never
// survives, and copying is idempotent (what is already clean stays as is).
func FuzzAppendQuery(f *testing.F) {
	for _, s := range []string{
		"a=1&token=abc", "TOKEN=x&tok%65n=y", "q=\"<>\"&r=\xff\x00", "a=%zz%2&b=%41", "&&=&token", "a=b=c&token=1=2",
	} {
		f.Add(s, "/cctv1/"+s)
	}
	strip := []string{steer.TokenParam, "sig"}
	e := steer.New(fixture.CompileYAML(f, queryDoc, 1), steer.Options{StripQuery: []string{"sig"}})
	d := e.Decide(steer.Request{Client: netip.MustParseAddr("100.64.1.7"), Host: "live.iptv.example"})
	f.Fuzz(func(t *testing.T, query, path string) {
		loc := e.AppendLocation(nil, &d, path, query)
		checkURIBytes(t, loc, '&')
		if u, err := url.Parse(string(loc)); err != nil {
			t.Fatalf("Location %q does not parse: %v", loc, err)
		} else if u.Query().Has("token") {
			t.Fatalf("token survived in %q", loc)
		}
		q := steer.AppendQuery(nil, query, strip)
		checkURIBytes(t, q, '&')
		for _, kv := range strings.Split(string(q), "&") {
			key, _, _ := strings.Cut(kv, "=")
			if dk, err := url.QueryUnescape(strings.ReplaceAll(key, "+", "%2B")); err == nil && (strings.EqualFold(dk, "token") || strings.EqualFold(dk, "sig")) {
				t.Fatalf("%q survived in %q", key, q)
			}
			if kv == "" && len(q) > 0 {
				t.Fatalf("empty pair in %q", q)
			}
		}
		if again := steer.AppendQuery(nil, string(q), strip); string(again) != string(q) {
			t.Fatalf("not idempotent: %q -> %q", q, again)
		}
		if steer.PathReason(path) == "" {
			if ch := steer.Channel(path); ch == "." || ch == ".." {
				t.Fatalf("channel %q from accepted path %q", ch, path)
			}
		}
	})
}

// checkURIBytes fails on any byte a Location may not carry raw.
func checkURIBytes(t *testing.T, b []byte, sep byte) {
	t.Helper()
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '%':
			if i+2 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) {
				t.Fatalf("stray %% at %d in %q", i, b)
			}
		case c == sep:
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("-._~!$'()*+,;=:@/?", c) >= 0:
		default:
			t.Fatalf("raw byte %#x at %d in %q", c, i, b)
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
