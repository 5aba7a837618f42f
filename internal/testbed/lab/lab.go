// Package lab builds the anycast province network in network namespaces on one
// machine: per city a BIRD router, one or two regional schedulers (primary
// and standby) and a client namespace of STBs; a core BIRD router joining
// the cities and the center; the center with the central scheduler and its
// embedded etcd. City routers keep their city's /32 inside the city and
// learn the center's /26 from the core, so the routers' longest-prefix match
// decides which scheduler an STB reaches. Everything it creates is named with
// one prefix and removed by Down, also after a crash (Cleanup).
package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anysched/anysched/internal/routerconf"
	"github.com/anysched/anysched/internal/testbed/tunlink"
	"github.com/anysched/anysched/internal/token"
	"github.com/anysched/anysched/internal/topology"
	"github.com/anysched/anysched/internal/topology/topogen"
)

// Options describe a lab province.
type Options struct {
	Prefix  string       // namespace name prefix, e.g. "as1"; keep it short (interface names)
	Cities  []string     // city names (regions); at most 16
	Standby map[int]bool // cities (by index) that also run a standby scheduler
	// Delay is a fixed round-trip netem delay on every city-core link (half
	// of it leaves each end); DistanceDelays instead gives each city's link
	// the one-way delay of its distance to the capital (LinkDelay).
	Delay          time.Duration
	DistanceDelays bool
	Bin            string // directory with central-scheduler and regional-scheduler
	// Edges: per city a namespace with two media edges (bin/lab edge) the
	// topology points at, probed by a checker embedded in each regional
	// scheduler. Without them the servers exist only in the topology.
	Edges bool
	// EdgeServer is what runs each edge: EdgeLab (default) or EdgeNginx.
	EdgeServer string
	// OSPF: the regional schedulers announce by putting the /32 on anycast0,
	// a BIRD on each scheduler host advertises it to the city router over
	// OSPF (announce.mode ospf). Default: BGP from the scheduler's GoBGP.
	OSPF bool
	// EtcdMembers: 0 or 1, the center's embedded etcd; 3 (or 5), an etcd
	// cluster of that many members, each a bin/lab etcd-member process in a
	// namespace of its own on the core (etcd1...), listed in every
	// scheduler's configuration.
	EtcdMembers int
	// QoE: the service selects by QoE allocation (internal/qoe): the servers get
	// capacities, the regional schedulers require viewer tokens signed with
	// the lab's key (TokenKey) and re-solve their city every 2 s.
	QoE    bool
	Dir    string // work directory (configs, logs)
	Logger *slog.Logger
}

// Lab is a running province.
type Lab struct {
	o     Options
	veths int
	// NoNetem is set when the kernel has no netem qdisc: delayed links are
	// then TUN links delayed by this process (internal/tunlink).
	NoNetem bool
	tuns    []*tunlink.Link
	delays  []CityDelay
	ns      []string
	procs   map[string]*Proc
	mu      sync.Mutex
	Topo    *topology.Topology
}

// Proc is one daemon inside a namespace.
type Proc struct {
	Name string
	NS   string
	args []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// ServiceIP is the Anycast address of every lab.
var ServiceIP = netip.MustParseAddr("198.18.0.1")

// CenterPrefix is the center's aggregate.
var CenterPrefix = netip.MustParsePrefix("198.18.0.0/26")

// Instance IDs the schedulers register under.
func PrimaryID(city string) string { return city + "-1" }

// StandbyID is the standby scheduler's instance id.
func StandbyID(city string) string { return city + "-2" }

// CenterID is the central scheduler's instance id.
const CenterID = "center"

func (l *Lab) nsName(s string) string { return l.o.Prefix + "-" + s }

func (l *Lab) ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (l *Lab) in(ns string, args ...string) error {
	return l.ip(append([]string{"-n", l.nsName(ns)}, args...)...)
}

// Up builds the province and starts every daemon. On error it tears down
// what it built.
func Up(ctx context.Context, o Options) (l *Lab, err error) {
	if len(o.Cities) == 0 || len(o.Cities) > 16 {
		return nil, errors.New("lab: 1 to 16 cities")
	}
	if o.EtcdMembers < 0 || o.EtcdMembers > 5 || (o.EtcdMembers > 1 && o.EtcdMembers%2 == 0) {
		return nil, fmt.Errorf("lab: %d etcd members; want 1 (the center's embedded etcd), 3 or 5", o.EtcdMembers)
	}
	switch o.EdgeServer {
	case "", EdgeLab, EdgeNginx:
	default:
		return nil, fmt.Errorf("lab: edge server %q is not one of %s, %s", o.EdgeServer, EdgeLab, EdgeNginx)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	l = &Lab{o: o, procs: map[string]*Proc{}, delays: LinkDelays(o)}
	defer func() {
		if err != nil {
			l.Down()
		}
	}()
	Cleanup(o.Prefix) // what a crashed run left
	if err := l.network(); err != nil {
		return l, err
	}
	if err := l.writeTopology(); err != nil {
		return l, err
	}
	if err := l.routers(); err != nil {
		return l, err
	}
	if o.Edges {
		for i := range o.Cities {
			for _, host := range []int{10, 11} {
				addr := fmt.Sprintf("10.%d.4.%d:8080", i+1, host)
				name := fmt.Sprintf("edge-%d-%d", i+1, host)
				cmd := []string{filepath.Join(o.Bin, "lab"), "edge", "--listen", addr}
				if o.EdgeServer == EdgeNginx {
					var err error
					if cmd, err = nginxEdge(filepath.Join(o.Dir, name), addr); err != nil {
						return l, err
					}
				}
				if err := l.start(name, fmt.Sprintf("e%d", i+1), cmd...); err != nil {
					return l, err
				}
			}
		}
	}
	for k := 1; k <= l.clusterSize(); k++ {
		if err := l.startEtcdMember(k); err != nil {
			return l, err
		}
	}
	if err := l.StartCenter(); err != nil {
		return l, err
	}
	for i := range o.Cities {
		if err := l.StartScheduler(i, false); err != nil {
			return l, err
		}
		if o.Standby[i] {
			if err := l.StartScheduler(i, true); err != nil {
				return l, err
			}
		}
	}
	return l, nil
}

// network creates namespaces, links, addresses and static defaults.
//
//	client  10.i.1.2/24 -- 10.i.1.1 router_i
//	sched   10.i.2.2/24 -- 10.i.2.1 router_i      standby 10.i.3.2/24 -- 10.i.3.1
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
			if err := l.in(e, "addr", "add", fmt.Sprintf("10.%d.4.11/24", n), "dev", "up0"); err != nil {
				return err
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

// writeTopology: the sample province's shape for the lab's cities, with a
// coverage zone per city for its client network.
func (l *Lab) writeTopology() error {
	t := topogen.Province(cityCoords(l.o.Cities), topogen.Options{NodesPerRegion: 1, ServersPerNode: 2, ZonesPerRegion: 1, NetworksPerZone: 1, FallbackPerRegion: 1})
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
	if err := topology.Validate(t); err != nil {
		return fmt.Errorf("lab topology: %w", err)
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
			p.OSPF = routerconf.OSPF{Interfaces: []routerconf.OSPFInterface{{Name: "sched", Type: routerconf.PointToPoint}}}
			if l.o.Standby[i] {
				p.OSPF.Interfaces = append(p.OSPF.Interfaces, routerconf.OSPFInterface{Name: "standby", Type: routerconf.PointToPoint})
			}
			// Each scheduler host runs a BIRD advertising anycast0 as an OSPF stub.
			hosts := []struct{ ns, id string }{{fmt.Sprintf("s%d", n), fmt.Sprintf("10.%d.2.2", n)}}
			if l.o.Standby[i] {
				hosts = append(hosts, struct{ ns, id string }{fmt.Sprintf("t%d", n), fmt.Sprintf("10.%d.3.2", n)})
			}
			for _, h := range hosts {
				if err := l.bird(h.ns, routerconf.Params{Daemon: routerconf.BIRD, Role: routerconf.RoleRegional, Log: "stderr",
					RouterID: netip.MustParseAddr(h.id), ServiceIP: ServiceIP, CenterPrefix: CenterPrefix,
					OSPF: routerconf.OSPF{Interfaces: []routerconf.OSPFInterface{{Name: "up0", Type: routerconf.PointToPoint}}}}); err != nil {
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

// schedulerConfig writes a scheduler's configuration.
func (l *Lab) schedulerConfig(name, body string) (string, error) {
	path := filepath.Join(l.o.Dir, name+".yaml")
	return path, os.WriteFile(path, []byte(body), 0o644)
}

// StartCenter starts the central scheduler (embedded etcd on 10.0.0.2, or
// a client of the lab's etcd cluster).
func (l *Lab) StartCenter() error {
	etcdYAML := fmt.Sprintf(`etcd:
  embedded:
    dir: %s
    client_listen: 10.0.0.2:2379
    peer_listen: 127.0.0.1:2380
`, filepath.Join(l.o.Dir, "etcd"))
	if l.clusterSize() > 0 {
		etcdYAML = fmt.Sprintf("etcd:\n  endpoints: [%s]\nlab_etcd_members: [%s]\n", strings.Join(l.EtcdEndpoints(), ", "), strings.Join(l.etcdControls(), ", "))
	}
	body := fmt.Sprintf(`instance_id: %s
%sgrpc:
  listen: 10.0.0.2:9090
admin:
  listen: 127.0.0.1:9100
snapshot:
  cache_file: %s
  confirm_interval: 500ms
announce:
  mode: bgp
  check_interval: 100ms
  rise: 2
  fall: 2
  hold_down: 0s
  drain: {pre_withdraw: 1s, linger: 2s}
  bgp:
    asn: 65300
    router_id: 10.0.0.2
    peers: [{address: 10.0.0.1, asn: 65000, hold_time: 3s, keepalive: 1s}]
http:
  listen: 0.0.0.0:80
dns:
  listen: 0.0.0.0:53
default_region: %s
lab: true
access_log:
  enabled: false
`, CenterID, etcdYAML, filepath.Join(l.o.Dir, "center.cache"), l.o.Cities[0])
	if l.o.QoE { // the center checks the viewers' tokens as the cities do
		keyFile, err := l.TokenKey()
		if err != nil {
			return err
		}
		body += fmt.Sprintf("alloc:\n  auth: required\n  keys: [{id: %s, secret_file: %s}]\n", TokenKeyID, keyFile)
	}
	path, err := l.schedulerConfig("center", body)
	if err != nil {
		return err
	}
	return l.start("center", "ctr", filepath.Join(l.o.Bin, "central-scheduler"), "--config", path)
}

// StartScheduler starts city i's primary (or standby) regional scheduler.
func (l *Lab) StartScheduler(i int, standby bool) error {
	n := i + 1
	id, ns, net, med, prepend := PrimaryID(l.o.Cities[i]), fmt.Sprintf("s%d", n), 2, 10, 0
	if standby {
		id, ns, net, med, prepend = StandbyID(l.o.Cities[i]), fmt.Sprintf("t%d", n), 3, 200, 2
	}
	healthYAML := ""
	if l.o.Edges {
		healthYAML = "health:\n  embedded: true\n  check: {interval: 1s, timeout: 250ms, rise: 2, fall: 2, bandwidth_threshold: 0.9}\n"
	}
	if l.o.QoE {
		keyFile, err := l.TokenKey()
		if err != nil {
			return err
		}
		healthYAML += fmt.Sprintf("alloc:\n  period: 2s\n  session_ttl: 4s\n  auth: required\n  keys: [{id: %s, secret_file: %s}]\n", TokenKeyID, keyFile)
	}
	mode, drain := "bgp", "2s"
	if l.o.OSPF {
		mode, drain = "ospf", "7s" // BIRD spreads router-LSA changes up to 5 s apart
	}
	body := fmt.Sprintf(`instance_id: %s
region: %s
etcd:
  endpoints: [%s]
admin:
  listen: 127.0.0.1:9101
snapshot:
  cache_file: %s
  confirm_interval: 500ms
announce:
  mode: %s
  check_interval: 100ms
  rise: 2
  fall: 2
  hold_down: 0s
  drain: {pre_withdraw: 1s, linger: %s}
  bgp:
    asn: %d
    router_id: 10.%d.%d.2
    med: %d
    as_path_prepend: %d
    peers: [{address: 10.%d.%d.1, asn: %d, hold_time: 3s, keepalive: 1s}]
http:
  listen: 0.0.0.0:80
dns:
  listen: 0.0.0.0:53
access_log:
  enabled: false
%s`, id, l.o.Cities[i], strings.Join(l.EtcdEndpoints(), ", "), filepath.Join(l.o.Dir, id+".cache"), mode, drain, 65200+n, n, net, med, prepend, n, net, 65100+n, healthYAML)
	path, err := l.schedulerConfig(id, body)
	if err != nil {
		return err
	}
	return l.start(id, ns, filepath.Join(l.o.Bin, "regional-scheduler"), "--config", path)
}

// The QoE lab's server capacities: two servers per city carry 180 Mbps,
// about what the demo's 30 viewers per city want at the top rung, so the
// allocation has to choose (lower rungs for some, transcoded).
const (
	QoEServerMbps  = 90
	QoEServerUnits = 60
)

// QoEViewers is how many fixed STBs (viewers) per city the QoE lab's load
// runs.
const QoEViewers = 30

// TokenKeyID names the lab's viewer-token key.
const TokenKeyID = "lab"

// TokenKey returns the file holding the lab's viewer-token secret, creating
// it (random, 32 bytes hex) on first use.
func (l *Lab) TokenKey() (string, error) {
	p := filepath.Join(l.o.Dir, "token.key")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return p, os.WriteFile(p, []byte(hex.EncodeToString(b)+"\n"), 0o600)
}

// probeToken is a viewer token for the lab's own probes.
func (l *Lab) probeToken() (string, error) {
	path, err := l.TokenKey()
	if err != nil {
		return "", err
	}
	secret, err := token.ReadSecret(path)
	if err != nil {
		return "", err
	}
	nan := math.NaN()
	return token.Sign(token.Key{ID: TokenKeyID, Secret: secret}, token.Claims{Subject: "lab-probe", Expires: time.Now().Add(time.Hour), DesiredKbps: nan, DanmakuPerHour: nan, Gift: nan})
}

// start runs a daemon in a namespace, logging to a file.
func (l *Lab) start(name, ns string, args ...string) error {
	p := &Proc{Name: name, NS: ns, args: args, log: filepath.Join(l.o.Dir, name+".log")}
	l.mu.Lock()
	l.procs[name] = p
	l.mu.Unlock()
	return p.start(l)
}

func (p *Proc) start(l *Lab) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.nsName(p.NS)}, p.args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the lab's driver
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	return nil
}

// Proc returns a daemon by name (center, bird-r1, <city>-1, <city>-2).
func (l *Lab) Proc(name string) *Proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.procs[name]
}

// Signal sends sig to the daemon.
func (p *Proc) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits for the daemon to exit, at most d.
func (p *Proc) Wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// Restart starts an exited daemon again with the same arguments.
func (l *Lab) Restart(name string) error {
	p := l.Proc(name)
	if p == nil {
		return fmt.Errorf("no daemon %q", name)
	}
	if !p.Wait(0) {
		return fmt.Errorf("%s is still running", name)
	}
	return p.start(l)
}

// Log returns a daemon's log.
func (l *Lab) Log(name string) string {
	p := l.Proc(name)
	if p == nil {
		return ""
	}
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// Request sends one STB request from city i's client namespace to the
// Anycast address and returns which scheduler answered (X-Anysched-Instance)
// and the HTTP status. The STB gives up after 2 s.
func (l *Lab) Request(ctx context.Context, i int) (instance string, status int, err error) {
	return l.request(ctx, i, "2")
}

// Probe is Request with a 0.5 s limit, for measuring convergence: a request
// caught by a frozen scheduler must not hide the moment the routers moved.
func (l *Lab) Probe(ctx context.Context, i int) (instance string, status int, err error) {
	return l.request(ctx, i, "0.5")
}

func (l *Lab) request(ctx context.Context, i int, maxTime string) (instance string, status int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	target := "http://" + ServiceIP.String() + "/ch1/index.m3u8"
	if l.o.QoE { // the regional schedulers require a viewer token
		tok, err := l.probeToken()
		if err != nil {
			return "", 0, err
		}
		target += "?token=" + tok
	}
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", l.nsName(fmt.Sprintf("c%d", i+1)),
		"curl", "-s", "-o", "/dev/null", "--max-time", maxTime, "-H", "Host: live.iptv.example",
		"-w", "%{http_code} %header{x-anysched-instance}", target).Output()
	if err != nil {
		return "", 0, fmt.Errorf("curl: %w", err)
	}
	var code int
	var inst string
	fmt.Sscanf(string(out), "%d %s", &code, &inst)
	return inst, code, nil
}

// Cleanup runs city i's `regional-scheduler --cleanup` in its namespace, as
// a systemd unit's ExecStopPost would after a crash.
func (l *Lab) Cleanup(i int) (string, error) {
	out, err := exec.Command("ip", "netns", "exec", l.nsName(fmt.Sprintf("s%d", i+1)), filepath.Join(l.o.Bin, "regional-scheduler"),
		"--config", filepath.Join(l.o.Dir, PrimaryID(l.o.Cities[i])+".yaml"), "--cleanup").CombinedOutput()
	return string(out), err
}

// Attach returns a handle on a lab another process brought up with the same
// options (for lab load and lab status): namespaces and files, no daemons.
func Attach(o Options) *Lab { return &Lab{o: o, procs: map[string]*Proc{}, delays: LinkDelays(o)} }

// NS returns the full name of a lab namespace ("ctr", "c1", "r1", ...).
func (l *Lab) NS(short string) string { return l.nsName(short) }

// Dir is the lab's work directory.
func (l *Lab) Dir() string { return l.o.Dir }

// Redirect sends one STB request from city i and returns the redirect target.
func (l *Lab) Redirect(ctx context.Context, i int) (location string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", l.nsName(fmt.Sprintf("c%d", i+1)),
		"curl", "-s", "-o", "/dev/null", "--max-time", "2", "-H", "Host: live.iptv.example",
		"-w", "%{redirect_url}", "http://"+ServiceIP.String()+"/ch1/index.m3u8").Output()
	return strings.TrimSpace(string(out)), err
}

// Down stops every daemon and removes every namespace.
func (l *Lab) Down() {
	l.mu.Lock()
	procs, tuns := l.procs, l.tuns
	l.tuns = nil
	l.mu.Unlock()
	for _, t := range tuns {
		_ = t.Close()
	}
	for _, p := range procs {
		if p.cmd != nil && !p.Wait(0) {
			_ = p.Signal(syscall.SIGKILL)
			p.Wait(5 * time.Second)
		}
	}
	Cleanup(l.o.Prefix)
}

// Cleanup removes every namespace named with prefix (and so every interface
// in them), and kills processes left inside them.
func Cleanup(prefix string) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !strings.HasPrefix(name, prefix+"-") {
			continue
		}
		if pids, err := exec.Command("ip", "netns", "pids", name).Output(); err == nil {
			for _, pid := range strings.Fields(string(pids)) {
				_ = exec.Command("kill", "-9", pid).Run()
			}
		}
		_ = exec.Command("ip", "netns", "del", name).Run()
	}
}
