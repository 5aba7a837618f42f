package topology_test

import (
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// withChannel is validDoc with the service's channel spec given as a YAML
// flow mapping.
func withChannel(t *testing.T, spec string) string {
	return apply(t, validDoc, edit{lastService, lastService + "    channel: " + spec + "\n"})
}

func TestChannelPatterns(t *testing.T) {
	for _, c := range []struct {
		name, spec, path, query string
		matcher                 string
		want                    string // "" with ok false: no channel
		ok                      bool
	}{
		{"PLTV", `{path: '^/PLTV/[^/]+/[^/]+/(?P<channel>[^/]+)/', query: [bitrate]}`, "/PLTV/88888888/224/3221225618/index.m3u8", "", topology.MatcherSegments, "3221225618", true},
		{"PLTV segment file", `{path: '^/PLTV/[^/]+/[^/]+/(?P<channel>[^/]+)/'}`, "/PLTV/88888888/224/3221225618/10.ts", "token=x", topology.MatcherSegments, "3221225618", true},
		{"PLTV too short", `{path: '^/PLTV/[^/]+/[^/]+/(?P<channel>[^/]+)/'}`, "/PLTV/88888888/224/index.m3u8", "", topology.MatcherSegments, "", false},
		{"live", `{path: '^/live/(?P<channel>[^/]+)/'}`, "/live/CCTV1/1.m3u8", "", topology.MatcherSegments, "CCTV1", true},
		{"live other prefix", `{path: '^/live/(?P<channel>[^/]+)/'}`, "/vod/CCTV1/1.m3u8", "", topology.MatcherSegments, "", false},
		{"live unanchored", `{path: '/live/(?P<channel>[^/]+)/'}`, "/a/live/live/CCTV1/1.m3u8", "", topology.MatcherSegments, "live", true},
		{"channel with suffix literal", `{path: '^/hls/(?P<channel>[A-Za-z0-9_-]+)\.m3u8$'}`, "/hls/CCTV-1.m3u8", "", topology.MatcherSegments, "CCTV-1", true},
		{"digits", `{path: '^/c/(?P<channel>\d{4})'}`, "/c/12345/x", "", topology.MatcherSegments, "1234", true},
		{"query only", `{query: [channel, bitrate]}`, "/play.m3u8", "token=t&bitrate=2000&channel=CCTV1", topology.MatcherQuery, "CCTV1", true},
		{"query only, absent", `{query: [channel]}`, "/play.m3u8", "chan=CCTV1", topology.MatcherQuery, "", false},
		{"alternation uses regexp", `{path: '^/(live|tv)/(?P<channel>[^/]+)/'}`, "/tv/CCTV5/1.m3u8", "", topology.MatcherRegexp, "CCTV5", true},
		{"optional group did not take part", `{path: '^/x(/(?P<channel>[a-z]+))?'}`, "/x", "", topology.MatcherRegexp, "", false},
		{"case-insensitive uses regexp", `{path: '(?i)^/LIVE/(?P<channel>[^/]+)/'}`, "/live/cctv2/i.m3u8", "", topology.MatcherRegexp, "cctv2", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := mustCompile(t, withChannel(t, c.spec))
			p := s.Services[0].Channel
			if p == nil {
				t.Fatal("no compiled channel pattern")
			}
			if p.Matcher() != c.matcher {
				t.Errorf("matcher %s, want %s", p.Matcher(), c.matcher)
			}
			got, ok := p.Channel(c.path, c.query)
			if got != c.want || ok != c.ok {
				t.Errorf("Channel(%q, %q) = %q, %v; want %q, %v", c.path, c.query, got, ok, c.want, c.ok)
			}
		})
	}
	if s := mustCompile(t, validDoc); s.Services[0].Channel != nil {
		t.Error("a service without channel got a pattern")
	}
}

func TestChannelValidation(t *testing.T) {
	const at = "services[0] (live).channel"
	for _, c := range []struct {
		name, spec string
		path, msg  string
	}{
		{"empty", `{}`, at, "path or query is required"},
		{"does not compile", `{path: '^/live/(?P<channel>[^/]+'}`, at + ".path", "not a regular expression: error parsing regexp: missing closing )"},
		{"no channel group", `{path: '^/live/([^/]+)/'}`, at + ".path", "no group named channel"},
		{"group of another name", `{path: '^/live/(?P<chan>[^/]+)/'}`, at + ".path", "no group named channel"},
		{"two channel groups", `{path: '^/(?P<channel>[^/]+)/(?P<channel>[^/]+)/'}`, at + ".path", "2 groups named channel"},
		{"too long", `{path: '^/(?P<channel>[^/]+)/` + strings.Repeat("a", topology.MaxChannelPathLen) + `'}`, at + ".path", "at most 512"},
		{"empty parameter", `{query: [channel, ""]}`, at + ".query[1]", "empty parameter name"},
		{"parameter with '='", `{query: ["a=b"]}`, at + ".query[0]", `"a=b" is not a parameter name`},
		{"duplicate parameter", `{query: [channel, bitrate, channel]}`, at + ".query[2]", `parameter "channel" is already query[0]`},
		{"too many parameters", `{query: [a, b, c, d, e, f, g, h, i]}`, at + ".query", "9 parameters; at most 8"},
		{"unknown key", `{regex: '^/(?P<channel>[^/]+)'}`, at + ".regex", "unknown field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := topology.Parse([]byte(withChannel(t, c.spec)))
			errs, ok := yamlstrict.AsErrors(err)
			if !ok {
				t.Fatalf("error %v carries no field errors", err)
			}
			for _, e := range errs {
				if e.Path == c.path && strings.Contains(e.Msg, c.msg) {
					return
				}
			}
			t.Errorf("no error at %q containing %q; got:\n%v", c.path, c.msg, err)
		})
	}
	// The same checks outside a document name the field below the spec.
	if _, err := topology.CompileChannel(topology.ChannelSpec{Path: "^/x/", Query: []string{"a&b"}}); err == nil ||
		!strings.Contains(err.Error(), "path: no group named channel") || !strings.Contains(err.Error(), `query[0]: "a&b" is not a parameter name`) {
		t.Errorf("CompileChannel: %v", err)
	}
}

// TestChannelRoundTripAndDiff: the spec survives the store's JSON and the
// YAML schedctl prints, and a change of it is a change of the service.
func TestChannelRoundTripAndDiff(t *testing.T) {
	doc := withChannel(t, `{path: '^/live/(?P<channel>[^/]+)/', query: [bitrate]}`)
	top := mustDecode(t, doc)
	js, err := top.EncodeJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := topology.DecodeJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Services[0].Channel; got == nil || got.Path != `^/live/(?P<channel>[^/]+)/` || len(got.Query) != 1 {
		t.Fatalf("JSON round trip: %+v", got)
	}
	y, err := top.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := topology.Parse(y); err != nil || again.Services[0].Channel.String() != top.Services[0].Channel.String() {
		t.Fatalf("YAML round trip (%v):\n%s", err, y)
	}
	c := topology.Diff(mustDecode(t, validDoc), top)
	sec := c.Section(topology.KindServices)
	want := `channel: (none) -> path "^/live/(?P<channel>[^/]+)/" query [bitrate]`
	if sec == nil || len(sec.Changed) != 1 || len(sec.Changed[0].Fields) != 1 || sec.Changed[0].Fields[0] != want {
		t.Fatalf("diff: %+v, want the one field %s", sec, want)
	}
}
