package topology

import (
	"regexp"
	"regexp/syntax"
	"testing"
)

// segPatterns are channel expressions of the forms operators write, the
// fuzz seeds, and whether each compiles to a segment matcher.
var segPatterns = []struct {
	expr     string
	segments bool
}{
	{`^/PLTV/[^/]+/[^/]+/(?P<channel>[^/]+)/`, true},
	{`^/live/(?P<channel>[^/]+)/`, true},
	{`^/live/(?P<channel>[^/]+)`, true},
	{`/live/(?P<channel>[^/]+)/`, true},
	{`^/hls/(?P<channel>[A-Za-z0-9_-]+)\.m3u8$`, true},
	{`^/c/(?P<channel>\d{4})`, true},
	{`^/(?P<channel>[^/]+)/.*`, true},
	{`^/(?P<channel>CCTV[0-9]+)/`, true},
	{`^/tv/(?P<channel>[a-z]+)[0-9]*\.ts$`, true},
	{`^/a/(?P<channel>.+)$`, true},
	{`^(?P<channel>)`, true},
	{`^/(?P<channel>[^/]+)/(?:[^/]+/)?index`, false},        // optional group
	{`^/(live|tv)/(?P<channel>[^/]+)/`, false},              // alternation
	{`(?i)^/live/(?P<channel>[^/]+)/`, false},               // case folding
	{`^/live/(?P<channel>[^/]+?)/`, false},                  // non-greedy
	{`^/[a-z]+(?P<channel>[a-z0-9]+)/`, false},              // runs that overlap
	{`^/(?P<channel>[^/]+)[^/]*x`, false},                   // a run then a nullable run then a byte of the first
	{`^/(?P<channel>[^/]{2,8})/`, false},                    // counted non-ASCII
	{`^/(?P<channel>[a-zé]+)/`, false},                      // some non-ASCII
	{`(?P<channel>[^/]+)\.m3u8$`, false},                    // unanchored, no literal to look for
	{`^/.*/(?P<channel>[^/]+)\.m3u8`, false},                // .* before a literal it covers
	{`(?m)^/live/(?P<channel>[^/]+)`, false},                // line anchors
	{`^/live/(?P<channel>[^/]+)\b`, false},                  // word boundary
	{`^/live/(?P<channel>[^/]+)/(?P<channel>[^/]+)`, false}, // two channel groups
}

func TestSegmentForms(t *testing.T) {
	for _, c := range segPatterns {
		tree, err := syntax.Parse(c.expr, syntax.Perl)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got := segmentsOf(tree, ChannelGroup) != nil; got != c.segments {
			t.Errorf("%s: segment matcher %v, want %v", c.expr, got, c.segments)
		}
	}
}

// TestSegmentMatcherDoesNotAllocate: the common forms find the channel
// without allocating; regexp allocates (what MatcherRegexp documents).
func TestSegmentMatcherDoesNotAllocate(t *testing.T) {
	for _, c := range []struct{ expr, path string }{
		{`^/PLTV/[^/]+/[^/]+/(?P<channel>[^/]+)/`, "/PLTV/88888888/224/3221225618/index.m3u8"},
		{`/live/(?P<channel>[^/]+)/`, "/x/live/CCTV1/1.m3u8"},
	} {
		p, err := CompileChannel(ChannelSpec{Path: c.expr})
		if err != nil || p.Matcher() != MatcherSegments {
			t.Fatalf("%s: %v, %v", c.expr, err, p)
		}
		if n := testing.AllocsPerRun(100, func() { p.Channel(c.path, "") }); n != 0 {
			t.Errorf("%s: %v allocations", c.expr, n)
		}
	}
	p, _ := CompileChannel(ChannelSpec{Path: `^/(live|tv)/(?P<channel>[^/]+)/`})
	if n := testing.AllocsPerRun(100, func() { p.Channel("/tv/CCTV5/1.m3u8", "") }); n == 0 {
		t.Error("regexp fallback measured no allocation: update MatcherRegexp's documentation")
	}
}

// FuzzSegmentMatcher is differential: on every expression the segment
// matcher takes, it agrees with Go's regexp on whether a path matches and
// on the channel group's span.
//
//	go test ./internal/province/topology -run '^$' -fuzz FuzzSegmentMatcher -fuzztime 60s
func FuzzSegmentMatcher(f *testing.F) {
	paths := []string{
		"/PLTV/88888888/224/3221225618/index.m3u8", "/live/CCTV1/1.m3u8", "/live/live/x/", "/hls/CCTV-1.m3u8",
		"/c/12345/x", "/tv/abc123.ts", "/a/\xe4\xb8\xad/\xff\xfe", "/live/\xe4\xb8/", "/", "", "/live//", "/CCTV1/\n/",
	}
	for i, c := range segPatterns {
		f.Add(c.expr, paths[i%len(paths)])
		f.Add(c.expr, paths[(i+5)%len(paths)])
	}
	f.Fuzz(func(t *testing.T, expr, path string) {
		if len(expr) > MaxChannelPathLen {
			return
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return
		}
		tree, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			t.Fatalf("regexp compiles %q, syntax.Parse does not: %v", expr, err)
		}
		m := segmentsOf(tree, ChannelGroup)
		if m == nil {
			return
		}
		g := re.SubexpIndex(ChannelGroup)
		want := re.FindStringSubmatchIndex(path)
		s, e, ok := m.find(path)
		switch {
		case want == nil && ok:
			t.Fatalf("%q on %q: segments match [%d:%d], regexp does not", expr, path, s, e)
		case want != nil && !ok:
			t.Fatalf("%q on %q: regexp matches %v, segments do not", expr, path, want)
		case ok && (want[2*g] != s || want[2*g+1] != e):
			t.Fatalf("%q on %q: segments capture [%d:%d] %q, regexp [%d:%d] %q", expr, path, s, e, path[s:e], want[2*g], want[2*g+1], path[want[2*g]:want[2*g+1]])
		}
	})
}

// BenchmarkChannel: finding the channel of one request path, by the
// segment matcher and by regexp for the same expression.
func BenchmarkChannel(b *testing.B) {
	const expr, path = `^/PLTV/[^/]+/[^/]+/(?P<channel>[^/]+)/`, "/PLTV/88888888/224/3221225618/index.m3u8"
	p, err := CompileChannel(ChannelSpec{Path: expr})
	if err != nil || p.Matcher() != MatcherSegments {
		b.Fatal(err)
	}
	re := &ChannelPattern{Path: expr, re: regexp.MustCompile(expr), group: 1}
	for _, c := range []struct {
		name string
		p    *ChannelPattern
	}{{"segments", p}, {"regexp", re}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ch, ok := c.p.Channel(path, ""); !ok || ch != "3221225618" {
					b.Fatal(ch)
				}
			}
		})
	}
}
