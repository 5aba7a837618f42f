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
			if err := l.in(e.ns, "addr", "add", e.addr, "dev", e.ifn); err != nil {
				return err
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
	if err := add("core", "ctr"); err != nil {
		return err
	}
	if err := wire("core", "ctr", "10.0.0.1/30", "ctr", "up0", "10.0.0.2/30", 0); err != nil {
		return err
	}
	if err := l.in("ctr", "route", "add", "default", "via", "10.0.0.1"); err != nil {
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
		if err := wire(r, "core", fmt.Sprintf("10.100.%d.2/30", n), "core", fmt.Sprintf("city%d", n), fmt.Sprintf("10.100.%d.1/30", n), l.delays[i].Delay); err != nil {
			return err
		}
		if err := wire(r, "sched", fmt.Sprintf("10.%d.2.1/24", n), s, "up0", fmt.Sprintf("10.%d.2.2/24", n), 0); err != nil {
			return err
		}
		if err := wire(r, "stb", fmt.Sprintf("10.%d.1.1/24", n), c, "up0", fmt.Sprintf("10.%d.1.2/24", n), 0); err != nil {
			return err
		}
		for _, ns := range []string{s, c} {
			if err := l.in(ns, "route", "add", "default", "via", fmt.Sprintf("10.%d.%d.1", n, map[string]int{s: 2, c: 1}[ns])); err != nil {
				return err
			}
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
		}
		if l.o.Standby[i] {
			t := fmt.Sprintf("t%d", n)
			if err := add(t); err != nil {
				return err
			}
			if err := wire(r, "standby", fmt.Sprintf("10.%d.3.1/24", n), t, "up0", fmt.Sprintf("10.%d.3.2/24", n), 0); err != nil {
				return err
			}
			if err := l.in(t, "route", "add", "default", "via", fmt.Sprintf("10.%d.3.1", n)); err != nil {
				return err
			}
		}
		for _, ns := range []string{r} {
			if out, err := exec.Command("ip", "netns", "exec", l.nsName(ns), "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
				return fmt.Errorf("sysctl: %v: %s", err, out)
			}
		}
	}
	if out, err := exec.Command("ip", "netns", "exec", l.nsName("core"), "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		return fmt.Errorf("sysctl: %v: %s", err, out)
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
		t.Zones = append(t.Zones, topology.Zone{Name: c + "-stb", Region: c, Networks: []string{fmt.Sprintf("10.%d.1.0/24", i+1)}})
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

// routers renders and starts the BIRD routers.
func (l *Lab) routers() error {
	coreBGP := routerconf.BGP{ASN: 65000, Schedulers: []routerconf.Peer{{Name: "center", Address: netip.MustParseAddr("10.0.0.2"), ASN: 65300, Passive: true}}}
	for i := range l.o.Cities {
		n := i + 1
		coreBGP.Routers = append(coreBGP.Routers, routerconf.Peer{Name: fmt.Sprintf("city%d", n), Address: netip.MustParseAddr(fmt.Sprintf("10.100.%d.2", n)), ASN: uint32(65100 + n)})
		city := routerconf.BGP{ASN: uint32(65100 + n),
			Schedulers: []routerconf.Peer{{Name: "primary", Address: netip.MustParseAddr(fmt.Sprintf("10.%d.2.2", n)), ASN: uint32(65200 + n), Passive: true}},
			Routers:    []routerconf.Peer{{Name: "core", Address: netip.MustParseAddr(fmt.Sprintf("10.100.%d.1", n)), ASN: 65000}}}
		if l.o.Standby[i] {
			city.Schedulers = append(city.Schedulers, routerconf.Peer{Name: "standby", Address: netip.MustParseAddr(fmt.Sprintf("10.%d.3.2", n)), ASN: uint32(65200 + n), Passive: true})
		}
		p := routerconf.Params{Daemon: routerconf.BIRD, Role: routerconf.RoleCityRouter, Hostname: "router-" + l.o.Cities[i], Log: "stderr",
			RouterID: netip.MustParseAddr(fmt.Sprintf("10.100.%d.2", n)), ServiceIP: ServiceIP, CenterPrefix: CenterPrefix, BGP: city}
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
				if err := l.bird(h.ns, routerconf.Params{Daemon: routerconf.BIRD, Role: routerconf.RoleRegional, Log: "stderr",
					RouterID: netip.MustParseAddr(h.id), ServiceIP: ServiceIP, CenterPrefix: CenterPrefix,
					OSPF: routerconf.OSPF{Interfaces: []routerconf.OSPFInterface{{Name: "up0", Type: routerconf.PointToPoint, BFD: true}}}}); err != nil {
					return err
				}
			}
		}
		if err := l.bird(fmt.Sprintf("r%d", n), p); err != nil {
			return err
		}
	}
	return l.bird("core", routerconf.Params{Daemon: routerconf.BIRD, Role: routerconf.RoleCoreRouter, Hostname: "core", Log: "stderr",
		RouterID: netip.MustParseAddr("10.0.0.1"), ServiceIP: ServiceIP, CenterPrefix: CenterPrefix, BGP: coreBGP})
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
