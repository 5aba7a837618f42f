package steer

import (
	"net/netip"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/balance"
)

// TestContentHashIsHashOfKey: the key Decide hashes is the one ContentKey
// and Explain show, pattern or not, matched or not.
func TestContentHashIsHashOfKey(t *testing.T) {
	doc := &topology.Topology{
		Anycast: topology.Anycast{ServiceIP: "198.18.0.1", CenterPrefix: "198.18.0.0/26"},
		Regions: []topology.Region{{Name: "west", Location: &topology.Location{Lat: 31, Lon: 116}}},
		Nodes: []topology.Node{{Name: "west-1", Region: "west", Location: &topology.Location{Lat: 31, Lon: 116},
			Servers: []topology.Server{{Name: "a", Address: "10.0.1.1:80"}}}},
	}
	specs := []*topology.ChannelSpec{
		nil,
		{Path: `^/live/(?P<channel>[^/]+)/`, Query: []string{"bitrate"}},
		{Query: []string{"channel", "bitrate"}},
		{Path: `^/(live|tv)/(?P<channel>[^/]+)/`},
	}
	for i, sp := range specs {
		doc.Services = append(doc.Services, topology.Service{Name: "s" + string(rune('a'+i)), Hostnames: []string{"s" + string(rune('a'+i)) + ".example"},
			URLTemplate: "http://{server}/{channel}", BitratesKbps: []int{1}, Selection: topology.SelectCHash, Channel: sp})
	}
	s, err := topology.Compile(doc, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := balance.DefaultConfig()
	cfg.Key.Query = []string{"rendition"}
	e, err := Build(s, Inputs{Balance: cfg})
	if err != nil {
		t.Fatal(err)
	}
	reqs := [][2]string{
		{"/live/CCTV1/1.m3u8", "bitrate=2000&rendition=hd"}, {"/tv/x/1.ts", "channel=c&bitrate=1"}, {"/other", ""},
		{"/", "channel=.."}, {"/live//x", "bitrate"},
	}
	for svc := range s.Services {
		for _, r := range reqs {
			key := e.ContentKey(int32(svc), r[0], r[1])
			if got, want := e.contentHash(int32(svc), r[0], r[1]), balance.HashKey(key); got != want {
				t.Errorf("service %d %v: hash %x, HashKey(%q) %x", svc, r, got, key, want)
			}
		}
	}
	if d := e.Decide(Request{Client: netip.MustParseAddr("1.2.3.4"), Host: "sa.example", Path: "/x"}); d.Server != 0 {
		t.Fatalf("decision %+v", d)
	}
}
