package lab

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/routing/routerconf"
	"github.com/anysched/anysched/internal/testbed/tunlink"
)

// network creates namespaces, links, addresses and static defaults.
//
//	client  10.i.1.2/24 -- 10.i.1.1 router_i
//	sched   10.i.2.2/24 -- 10.i.2.1 router_i      standby 10.i.3.2/24 -- 10.i.3.1
//	edges   10.i.4.10-12/24 -- 10.i.4.1 router_i  (with Edges: live, live, VOD)
//	router_i 10.100.i.2/30 -- 10.100.i.1 core     (delayed both ways: netem, or a TUN link)
//	center  10.0.0.2/30 -- 10.0.0.1 core
//	etcdk   10.0.1.(4k-2)/30 -- 10.0.1.(4k-3) core  (a lab etcd cluster)
//
// A dual-stack lab (DualStack) gives each of those links an IPv6 network
// too, ULA space: fd00:i:1::/64 (client), fd00:i:2::/64 (sched),
// fd00:i:3::/64 (standby), fd00:i:4::/64 (edges), fd00:100:i::/64 (router_i
// -- core), fd00:0:1::/64 (center -- core); the router end is ::1, the
// other ::2 (i in hex, as IPv6 writes it). The etcd members stay IPv4.
func (l *Lab) network() error {
	add := func(names ...string) error {
		for _, n := range names {
			if err := l.ip("netns", "add", l.nsName(n)); err != nil {
				return err
			}
			l.ns = append(l.ns, n)
			if err := l.in(n, "link", "set", "lo", "up"); err != nil {
				return err
			}
		}
		return nil
	}
	l.NoNetem = !netemAvailable(l.o.Prefix)
	if l.NoNetem && l.o.Logger != nil && (l.o.Delay > 0 || l.o.DistanceDelays) {
		l.o.Logger.Info("this kernel has no netem qdisc: the delayed city-core links are TUN links delayed in this process", "delays", FormatDelays(l.delays))
	}
	wire := func(a, aIf, aAddr, b, bIf, bAddr string, delay time.Duration) error {
		if delay > 0 && l.NoNetem {
			t, err := tunlink.Up(tunlink.Config{
				A:     tunlink.End{Netns: l.nsName(a), Interface: aIf, Addr: netip.MustParsePrefix(aAddr)},
				B:     tunlink.End{Netns: l.nsName(b), Interface: bIf, Addr: netip.MustParsePrefix(bAddr)},
				Delay: delay,
			})
			if err != nil {
				return err
			}
			l.tuns = append(l.tuns, t)
			return nil
		}
		l.veths++
		tmp := fmt.Sprintf("%sv%d", l.o.Prefix, l.veths) // host-side temporary name, renamed inside the namespaces
		if err := l.ip("link", "add", tmp+"a", "type", "veth", "peer", "name", tmp+"b"); err != nil {
			return err
		}
		for _, e := range []struct{ tmp, ns, ifn, addr string }{{tmp + "a", a, aIf, aAddr}, {tmp + "b", b, bIf, bAddr}} {
			if err := l.ip("link", "set", e.tmp, "netns", l.nsName(e.ns)); err != nil {
				return err
			}
			if err := l.in(e.ns, "link", "set", e.tmp, "name", e.ifn); err != nil {
				return err
			}
			if e.addr != "" { // an IPv6-only city's link has no IPv4 address
				if err := l.in(e.ns, "addr", "add", e.addr, "dev", e.ifn); err != nil {
					return err
				}
			}
			if err := l.in(e.ns, "link", "set", e.ifn, "up"); err != nil {
				return err
			}
			if delay > 0 {
				cmd := netemCommand(l.nsName(e.ns), e.ifn, delay)
				if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
					return fmt.Errorf("tc netem: %v: %s", err, out)
				}
			}
		}
		return nil
	}
	// v6 gives both ends of a link their IPv6 addresses (net is the
	// link's /64 without the host part, "fd00:1:2"), and the non-router
	// end a default route through the router end, in a dual-stack lab.
	v6 := func(router, rIf, other, oIf, net string, route bool) error {
		if !l.o.DualStack {
			return nil
		}
		for _, e := range []struct{ ns, ifn, addr string }{{router, rIf, net + "::1/64"}, {other, oIf, net + "::2/64"}} {
			// nodad: usable at once, as the IPv4 addresses are.
			if err := l.in(e.ns, "-6", "addr", "add", e.addr, "dev", e.ifn, "nodad"); err != nil {
				return err
			}
		}
		if route {
			return l.in(other, "-6", "route", "add", "default", "via", net+"::1")
		}
		return nil
	}
	if err := add("core", "ctr"); err != nil {
		return err
	}
	if err := wire("core", "ctr", "10.0.0.1/30", "ctr", "up0", "10.0.0.2/30", 0); err != nil {
		return err
	}
	if err := l.in("ctr", "route", "add", "default", "via", "10.0.0.1"); err != nil {
		return err
	}
	if err := v6("core", "ctr", "ctr", "up0", "fd00:0:1", true); err != nil {
		return err
	}
	for k := 1; k <= l.clusterSize(); k++ {
		ns := fmt.Sprintf("etcd%d", k)
		if err := add(ns); err != nil {
			return err
		}
		if err := wire("core", ns, fmt.Sprintf("10.0.1.%d/30", 4*k-3), ns, "up0", etcdAddr(k)+"/30", 0); err != nil {
			return err
		}
		if err := l.in(ns, "route", "add", "default", "via", fmt.Sprintf("10.0.1.%d", 4*k-3)); err != nil {
			return err
		}
	}
	for i := range l.o.Cities {
		n := i + 1
		r, s, c := fmt.Sprintf("r%d", n), fmt.Sprintf("s%d", n), fmt.Sprintf("c%d", n)
		if err := add(r, s, c); err != nil {
			return err
		}
		// v4 is an address of the city's IPv4 plan, none in an IPv6-only city.
		only6 := l.o.IPv6Only[i]
		v4 := func(format string, args ...any) string {
			if only6 {
				return ""
			}
			return fmt.Sprintf(format, args...)
		}
		delay := l.delays[i].Delay
		if only6 && l.NoNetem {
			delay = 0 // the TUN links are IPv4
		}
		if err := wire(r, "core", v4("10.100.%d.2/30", n), "core", fmt.Sprintf("city%d", n), v4("10.100.%d.1/30", n), delay); err != nil {
			return err
		}
		// The core is the ::1 end of the city links (it is the router of the
		// lab's plan there); neither end needs a default route.
		if err := v6("core", fmt.Sprintf("city%d", n), r, "core", fmt.Sprintf("fd00:100:%x", n), false); err != nil {
			return err
		}
		if err := wire(r, "sched", v4("10.%d.2.1/24", n), s, "up0", v4("10.%d.2.2/24", n), 0); err != nil {
			return err
		}
		if err := wire(r, "stb", v4("10.%d.1.1/24", n), c, "up0", v4("10.%d.1.2/24", n), 0); err != nil {
			return err
		}
		for _, ns := range []string{s, c} {
			if only6 {
				break
			}
			if err := l.in(ns, "route", "add", "default", "via", fmt.Sprintf("10.%d.%d.1", n, map[string]int{s: 2, c: 1}[ns])); err != nil {
				return err
			}
		}
		if err := v6(r, "sched", s, "up0", fmt.Sprintf("fd00:%x:2", n), true); err != nil {
			return err
		}
		if err := v6(r, "stb", c, "up0", fmt.Sprintf("fd00:%x:1", n), true); err != nil {
			return err
		}
		if l.o.Edges {
			e := fmt.Sprintf("e%d", n)
			if err := add(e); err != nil {
				return err
			}
			if err := wire(r, "edge", fmt.Sprintf("10.%d.4.1/24", n), e, "up0", fmt.Sprintf("10.%d.4.10/24", n), 0); err != nil {
				return err
			}
			for _, host := range edgeHosts()[1:] {
				if err := l.in(e, "addr", "add", fmt.Sprintf("10.%d.4.%d/24", n, host), "dev", "up0"); err != nil {
					return err
				}
			}
			if err := l.in(e, "route", "add", "default", "via", fmt.Sprintf("10.%d.4.1", n)); err != nil {
				return err
			}
			if err := v6(r, "edge", e, "up0", fmt.Sprintf("fd00:%x:4", n), true); err != nil {
				return err
			}
		}
		if l.o.Standby[i] {
			t := fmt.Sprintf("t%d", n)
			if err := add(t); err != nil {
				return err
			}
			if err := wire(r, "standby", v4("10.%d.3.1/24", n), t, "up0", v4("10.%d.3.2/24", n), 0); err != nil {
				return err
			}
			if !only6 {
				if err := l.in(t, "route", "add", "default", "via", fmt.Sprintf("10.%d.3.1", n)); err != nil {
					return err
				}
			}
			if err := v6(r, "standby", t, "up0", fmt.Sprintf("fd00:%x:3", n), true); err != nil {
				return err
			}
		}
		if err := l.forwarding(r); err != nil {
			return err
		}
	}
	return l.forwarding("core")
}

// forwarding makes ns a router: IPv4 forwarding, and IPv6 forwarding in a
// dual-stack lab.
func (l *Lab) forwarding(ns string) error {
	keys := []string{"net.ipv4.ip_forward=1"}
	if l.o.DualStack {
		keys = append(keys, "net.ipv6.conf.all.forwarding=1")
	}
	for _, k := range keys {
		if out, err := exec.Command("ip", "netns", "exec", l.nsName(ns), "sysctl", "-qw", k).CombinedOutput(); err != nil {
			return fmt.Errorf("sysctl %s: %v: %s", k, err, out)
		}
	}
	return nil
}

// writeTopology: the sample province's shape for the lab's cities (the live
// and the VOD service, each on its own servers), with a coverage zone per
// city for its client network.
func (l *Lab) writeTopology() error {
	t := topogen.Province(cityCoords(l.o.Cities), topogen.Options{NodesPerRegion: 1, ServersPerNode: LiveServers, VODServersPerNode: VODServers,
		ZonesPerRegion: 1, NetworksPerZone: 1, FallbackPerRegion: 1})
	for i, c := range l.o.Cities {
		nets := []string{fmt.Sprintf("10.%d.1.0/24", i+1)}
		if l.o.IPv6Only[i] {
			nets = nil
		}
		if l.o.DualStack {
			nets = append(nets, fmt.Sprintf("fd00:%x:1::/64", i+1))
		}
		t.Zones = append(t.Zones, topology.Zone{Name: c + "-stb", Region: c, Networks: nets})
	}
	if l.o.DualStack {
		t.Anycast.ServiceIP6, t.Anycast.CenterPrefix6 = ServiceIP6.String(), CenterPrefix6.String()
		if !l.o.Edges { // (the edge namespaces have IPv4 alone)
			serverAddresses6(t, l.o.Cities, l.o.IPv6Only)
		}
	}
	if l.o.Edges { // the servers are the edge namespaces' addresses
		for ni := range t.Nodes {
			region := slices.Index(l.o.Cities, t.Nodes[ni].Region) + 1
			for si := range t.Nodes[ni].Servers {
				addr := fmt.Sprintf("10.%d.4.%d:8080", region, 10+si)
				t.Nodes[ni].Servers[si].Address = addr
				t.Nodes[ni].Servers[si].Health = &topology.HealthCheck{URL: "http://" + addr + edgeHealthPath(l.o.EdgeServer)}
			}
		}
	}
	if l.o.QoE {
		for i := range t.Services {
			t.Services[i].Selection = "qoe"
		}
		for ni := range t.Nodes {
			for si := range t.Nodes[ni].Servers {
				t.Nodes[ni].Servers[si].Capacity = topology.Capacity{BandwidthMbps: QoEServerMbps, TranscodeUnits: QoEServerUnits}
				// The lab's STBs sit at their city's centre, kilometres from
				// the node: every server covers the whole city.
				t.Nodes[ni].Servers[si].CoverageRadiusM = 0
			}
		}
	}
	if l.o.Topology != nil {
		l.o.Topology(t)
	}
	if err := topology.Validate(t); err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	l.Topo = t
	data, err := topogen.YAML(t)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(l.o.Dir, "topology.yaml"), data, 0o644)
}

// serverAddresses6 gives every server of a dual-stack lab an IPv6 address
// beside its IPv4 one (fd00:<city>:5::<n>), and an IPv6-only city's
// servers that address alone, so that each family's STBs are sent to an
// edge address of their own family.
func serverAddresses6(t *topology.Topology, cities []string, only6 map[int]bool) {
	n := map[int]int{}
	for ni := range t.Nodes {
		city := slices.Index(cities, t.Nodes[ni].Region)
		for si := range t.Nodes[ni].Servers {
			sv := &t.Nodes[ni].Servers[si]
			n[city]++
			a6 := fmt.Sprintf("[fd00:%x:5::%x]:8080", city+1, n[city])
			if only6[city] {
				sv.Address = a6
			} else {
				sv.Address6 = a6
			}
		}
	}
}

// routers renders and starts the BIRD routers. In a dual-stack lab every
// BGP session has an IPv6 twin (named with _v6) and OSPFv3 runs beside
// OSPFv2.
func (l *Lab) routers() error {
	addr := netip.MustParseAddr
	// peers is one peer, with its IPv6 twin in a dual-stack lab.
	peers := func(name, a4, a6 string, asn uint32, passive bool) []routerconf.Peer {
		if a4 == "" { // an IPv6-only city's
			return []routerconf.Peer{{Name: name + "_v6", Address: addr(a6), ASN: asn, Passive: passive}}
		}
		out := []routerconf.Peer{{Name: name, Address: addr(a4), ASN: asn, Passive: passive}}
		if l.o.DualStack {
			out = append(out, routerconf.Peer{Name: name + "_v6", Address: addr(a6), ASN: asn, Passive: passive})
		}
		return out
	}
	// anycast fills in the province's addresses, both families when dual-stack.
	anycast := func(p routerconf.Params) routerconf.Params {
		p.ServiceIP, p.CenterPrefix = ServiceIP, CenterPrefix
		if l.o.DualStack {
			p.ServiceIP6, p.CenterPrefix6 = ServiceIP6, CenterPrefix6
		}
		return p
	}
	coreBGP := routerconf.BGP{ASN: 65000, Schedulers: peers("center", "10.0.0.2", "fd00:0:1::2", 65300, true)}
	for i := range l.o.Cities {
		n := i + 1
		v4 := func(format string, args ...any) string {
			if l.o.IPv6Only[i] {
				return ""
			}
			return fmt.Sprintf(format, args...)
		}
		// anycast of an IPv6-only city's router and hosts: the IPv6 pair alone.
		anycast := func(p routerconf.Params) routerconf.Params {
			p = anycast(p)
			if l.o.IPv6Only[i] {
				p.ServiceIP, p.CenterPrefix = netip.Addr{}, netip.Prefix{}
			}
			return p
		}
		coreBGP.Routers = append(coreBGP.Routers, peers(fmt.Sprintf("city%d", n), v4("10.100.%d.2", n), fmt.Sprintf("fd00:100:%x::2", n), uint32(65100+n), false)...)
		city := routerconf.BGP{ASN: uint32(65100 + n),
			Schedulers: peers("primary", v4("10.%d.2.2", n), fmt.Sprintf("fd00:%x:2::2", n), uint32(65200+n), true),
			Routers:    peers("core", v4("10.100.%d.1", n), fmt.Sprintf("fd00:100:%x::1", n), 65000, false)}
		if l.o.Standby[i] {
			city.Schedulers = append(city.Schedulers, peers("standby", v4("10.%d.3.2", n), fmt.Sprintf("fd00:%x:3::2", n), uint32(65200+n), true)...)
		}
		p := anycast(routerconf.Params{Daemon: routerconf.BIRD, Role: routerconf.RoleCityRouter, Hostname: "router-" + l.o.Cities[i], Log: "stderr",
			RouterID: addr(fmt.Sprintf("10.100.%d.2", n)), BGP: city})
		if l.o.OSPF {
			p.BGP.Schedulers = nil
			// BFD on every OSPF link, as the deploy kit's examples: a host
			// hung whole is dropped after 300 ms, not OSPF's dead interval.
			p.OSPF = routerconf.OSPF{Interfaces: []routerconf.OSPFInterface{{Name: "sched", Type: routerconf.PointToPoint, BFD: true}}}
			if l.o.Standby[i] {
				p.OSPF.Interfaces = append(p.OSPF.Interfaces, routerconf.OSPFInterface{Name: "standby", Type: routerconf.PointToPoint, BFD: true})
			}
			// Each scheduler host runs a BIRD advertising anycast0 as an OSPF stub.
			hosts := []struct{ ns, id string }{{fmt.Sprintf("s%d", n), fmt.Sprintf("10.%d.2.2", n)}}
			if l.o.Standby[i] {
				hosts = append(hosts, struct{ ns, id string }{fmt.Sprintf("t%d", n), fmt.Sprintf("10.%d.3.2", n)})
			}
			for _, h := range hosts {
				if err := l.bird(h.ns, anycast(routerconf.Params{Daemon: routerconf.BIRD, Role: routerconf.RoleRegional, Log: "stderr",
					RouterID: addr(h.id),
					OSPF:     routerconf.OSPF{Interfaces: []routerconf.OSPFInterface{{Name: "up0", Type: routerconf.PointToPoint, BFD: true}}}})); err != nil {
					return err
				}
			}
		}
		if err := l.bird(fmt.Sprintf("r%d", n), p); err != nil {
			return err
		}
	}
	return l.bird("core", anycast(routerconf.Params{Daemon: routerconf.BIRD, Role: routerconf.RoleCoreRouter, Hostname: "core", Log: "stderr",
		RouterID: addr("10.0.0.1"), BGP: coreBGP}))
}

func (l *Lab) bird(ns string, p routerconf.Params) error {
	conf, err := routerconf.RenderBytes(p)
	if err != nil {
		return err
	}
	path := filepath.Join(l.o.Dir, "bird-"+ns+".conf")
	if err := os.WriteFile(path, conf, 0o644); err != nil {
		return err
	}
	return l.start("bird-"+ns, ns, "bird", "-f", "-c", path, "-s", l.birdSocket(ns), "-P", filepath.Join(l.o.Dir, "bird-"+ns+".pid"))
}

func (l *Lab) birdSocket(ns string) string { return filepath.Join(l.o.Dir, "bird-"+ns+".ctl") }

// Birdc runs a birdc command against a router ("core" or "r1"...).
func (l *Lab) Birdc(ns string, args ...string) string {
	out, _ := exec.Command("birdc", append([]string{"-s", l.birdSocket(ns)}, args...)...).CombinedOutput()
	return string(out)
}
