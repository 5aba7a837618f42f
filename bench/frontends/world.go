package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/prometheus/client_golang/prometheus"
)

// world is what the anysched front ends share, as in a scheduler: one
// engine over the province-scale snapshot and one access-log recorder
// (whose Run goroutine writes its lines to a file, or drains them into
// io.Discard). It lives in the anysched child process.
type world struct {
	snap      *topology.Snapshot
	engine    *steer.Engine
	reg       *prometheus.Registry
	rec       *accesslog.Recorder
	clients   []netip.Addr // STB addresses inside coverage zones
	zonesUsed int
	buildTime time.Duration

	cancel context.CancelFunc
	done   chan struct{}
}

// provinceTopology is the province-scale topology anysched serves; made
// dual-stack for an IPv6 run (fixture.DualStack: an address6 beside every
// server's address, an IPv6 /48 beside each zone's networks, a service
// address per family), as it is for IPv4 the province as generated.
func provinceTopology(f family) *topology.Topology {
	tp := topogen.ProvinceScale(nil)
	if f.v6 {
		fixture.DualStack(tp)
	}
	return tp
}

// serverAddrs are the edge addresses of the family's servers in the
// province anysched serves (address or address6): every answer of
// anysched's must be one of them.
func serverAddrs(f family) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	tp := provinceTopology(f)
	for _, n := range tp.Nodes {
		for _, sv := range n.Servers {
			s := sv.Address
			if f.v6 {
				s = sv.Address6
			}
			if ap, err := netip.ParseAddrPort(s); err == nil {
				out[ap.Addr()] = true
			} else if a, err := netip.ParseAddr(s); err == nil {
				out[a] = true
			}
		}
	}
	return out
}

func buildWorld(f family, sampleEvery uint64, accessLog io.Writer, zones, clients int) (*world, error) {
	start := time.Now()
	snap, err := topology.Compile(provinceTopology(f), 1)
	if err != nil {
		return nil, fmt.Errorf("compile province-scale topology: %w", err)
	}
	w := &world{snap: snap, engine: steer.New(snap, steer.Options{}), reg: prometheus.NewRegistry(), done: make(chan struct{})}
	w.rec = accesslog.New(w.reg, accessLog, accesslog.Options{SampleEvery: sampleEvery})
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() {
		defer close(w.done)
		_ = w.rec.Run(ctx)
	}()
	w.clients, w.zonesUsed, err = pickClients(snap, f, zones, clients)
	if err != nil {
		w.stop()
		return nil, err
	}
	w.buildTime = time.Since(start)
	return w, nil
}

// stop ends the recorder's Run goroutine (it flushes its queue first).
func (w *world) stop() {
	if w.cancel != nil {
		w.cancel()
		<-w.done
		w.cancel = nil
	}
}

func (w *world) engineFunc() *steer.Engine { return w.engine }

func (w *world) describe() string {
	c := w.snap.Counts()
	return fmt.Sprintf("province-scale topology (%d regions, %d nodes, %d servers, %d zones, %d zone networks)",
		c.Regions, c.Nodes, c.Servers, c.Zones, c.Networks)
}

// dropped is the access-log lines dropped so far because the queue was full.
func (w *world) dropped() float64 {
	mfs, err := w.reg.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == "anysched_accesslog_dropped_total" && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// pickClients returns n STB addresses of family f spread over `zones`
// coverage zones chosen evenly across the snapshot (so over every region),
// each address a random host of a different network of its zone (of the
// family). It is deterministic.
func pickClients(snap *topology.Snapshot, f family, zones, n int) ([]netip.Addr, int, error) {
	var located []int
	nets := map[int][]netip.Prefix{}
	for i, z := range snap.Zones {
		if z.Region < 0 {
			continue
		}
		for _, p := range z.Networks {
			if f.of(p.Addr()) {
				nets[i] = append(nets[i], p)
			}
		}
		if len(nets[i]) > 0 {
			located = append(located, i)
		}
	}
	if len(located) == 0 {
		return nil, 0, fmt.Errorf("the topology has no %s coverage zone", f.label())
	}
	zones = min(zones, len(located), n)
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]netip.Addr, 0, n)
	for i := range n {
		zi := located[(i%zones)*len(located)/zones]
		zn := nets[zi]
		p := zn[(i/zones*7919+rng.IntN(len(zn)))%len(zn)]
		a := randomHost(p, rng)
		if zj, ok := snap.ZoneOf(a); !ok || snap.Zones[zj].Region < 0 {
			return nil, 0, fmt.Errorf("internal error: %s (from %s of zone %s) is in no coverage zone", a, p, snap.Zones[zi].Name)
		}
		out = append(out, a)
	}
	return out, zones, nil
}

// randomHost is a random address of p: for IPv4 neither its network nor
// its broadcast address, for IPv6 not its subnet-router anycast address
// (host part zero).
func randomHost(p netip.Prefix, rng *rand.Rand) netip.Addr {
	b := p.Masked().Addr().As16()
	hostBits := p.Addr().BitLen() - p.Bits()
	if p.Addr().Is4() {
		host := uint32(1)
		if size := uint32(1) << hostBits; hostBits < 32 && size > 2 {
			host = 1 + rng.Uint32N(size-2)
		}
		v := binary.BigEndian.Uint32(b[12:]) + host
		binary.BigEndian.PutUint32(b[12:], v)
		return netip.AddrFrom16(b).Unmap()
	}
	// IPv6: random bits below the prefix, the last one set (never zero).
	var r [16]byte
	binary.BigEndian.PutUint64(r[:8], rng.Uint64())
	binary.BigEndian.PutUint64(r[8:], rng.Uint64()|1)
	for i := range 16 {
		keep := max(0, min(8, p.Bits()-8*i)) // prefix bits in byte i
		mask := byte(0xff >> keep)
		if keep == 8 {
			mask = 0
		}
		b[i] = b[i]&^mask | r[i]&mask
	}
	return netip.AddrFrom16(b)
}

// luaScript is the wrk script: the service Host header, and an
// X-Forwarded-For cycling through the STB addresses (each thread starting
// at a different place).
func luaScript(host string, clients []netip.Addr) string {
	var b strings.Builder
	b.WriteString("-- generated by bench/frontends\nlocal addrs = {\n")
	for _, a := range clients {
		fmt.Fprintf(&b, "  %q,\n", a.String())
	}
	fmt.Fprintf(&b, `}
local n = #addrs
local threads = 0
function setup(thread)
  thread:set("offset", threads * 97)
  threads = threads + 1
end
local i = 0
function init(args)
  i = (offset or 0) %% n
end
wrk.headers["Host"] = %q
function request()
  i = i + 1
  if i > n then i = 1 end
  wrk.headers["X-Forwarded-For"] = addrs[i]
  return wrk.format()
end
`, host)
	return b.String()
}
