package allocator

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
)

// FuzzAllocate drives the hot path with arbitrary clients, paths, hosts and
// tokens against a solved plan on a real etcd: it must never panic, refuse
// only with ErrForbidden, and a success must name a server of the snapshot
// at a bitrate of the service's ladder.
func FuzzAllocate(f *testing.F) {
	e := etcdtest.Start(f)
	eng := engine(f)
	r := newRig(f, e, eng, "fuzz", Config{})
	good := signed(f, "viewer", 2500)
	for i := range 5 { // some sessions, so the plan has places to hand out
		req := steer.Request{Client: netip.AddrFrom4([4]byte{100, 64, 1, byte(i)}), Host: "live.iptv.example", Path: "/ch1/index.m3u8"}
		d := eng.Decide(req)
		_ = r.a.Allocate(eng, &d, req, good)
	}
	r.a.Solve(context.Background())
	f.Add([]byte{100, 64, 1, 7}, "live.iptv.example", "/ch1/index.m3u8", good)
	f.Add([]byte{100, 64, 2, 9}, "live.iptv.example", "/", "")
	f.Add([]byte{10, 0, 0, 1}, "vod.iptv.example", "/movie.mp4", "x.y.z")
	f.Add([]byte{100, 64, 1, 1}, "LIVE.iptv.example.", "/ch2/a/b?c", good[:len(good)-4])
	snap := eng.Snapshot()
	f.Fuzz(func(t *testing.T, ip []byte, host, path, tok string) {
		addr, ok := netip.AddrFromSlice(ip)
		if !ok {
			addr = netip.AddrFrom4([4]byte{100, 64, 1, 1})
		}
		req := steer.Request{Client: addr, Host: host, Path: path}
		d := eng.Decide(req)
		err := r.a.Allocate(eng, &d, req, tok)
		if err != nil {
			if !errors.Is(err, ErrForbidden) {
				t.Fatalf("refusal without ErrForbidden: %v", err)
			}
			return
		}
		switch d.Result {
		case steer.ResultCZ, steer.ResultDefault, steer.ResultFallback:
			if d.Server < 0 || int(d.Server) >= len(snap.Servers) {
				t.Fatalf("success without a server: %+v", d)
			}
			if !slices.Contains(snap.Services[d.Service].BitratesKbps, d.BitrateKbps) {
				t.Fatalf("bitrate %d is not on the ladder %v", d.BitrateKbps, snap.Services[d.Service].BitratesKbps)
			}
		}
	})
}
