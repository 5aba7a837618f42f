package routerconf

import "net/netip"

// Example is one committed example configuration: Path (relative to the
// repository root) holds exactly what Render writes for Params.
type Example struct {
	Path   string
	Params Params
}

// The example province (deploy/examples/topology.yaml): service IP
// 198.18.0.1, center prefix 198.18.0.0/26; the lab's addressing plan:
//
//	city N's router <-> its scheduler hosts:  10.N.0.0/24 (router .1, primary .2, standby .3), interface eth0 on the hosts
//	city N's router <-> the core:             10.100.N.0/30 (core .1, city .2)
//	core <-> the central scheduler host:      10.0.0.0/30 (core .1, center .2)
//
// AS numbers: core 65000, city routers 6510N, regional schedulers 6520N,
// center 65300.
//
// A dual-stack province (the lab's, Options.DualStack) adds service_ip6
// 2001:db8:a::1 in center_prefix6 2001:db8:a::/48; each link then also
// carries an IPv6 /64: fd00:N:2::/64 (city N's router ::1 <-> its primary
// ::2), fd00:N:3::/64 (<-> its standby), fd00:100:N::/64 (the core ::1 <->
// city N's router ::2), fd00:0:1::/64 (the core ::1 <-> the center ::2).
var (
	exService  = netip.MustParseAddr("198.18.0.1")
	exCenter   = netip.MustParsePrefix("198.18.0.0/26")
	exService6 = netip.MustParseAddr("2001:db8:a::1")
	exCenter6  = netip.MustParsePrefix("2001:db8:a::/48")
	a          = netip.MustParseAddr
)

// Examples returns the parameters of the committed example configurations
// in deploy/bird and deploy/frr.
func Examples() []Example {
	// BFD on the OSPF uplinks: a host that hangs whole (its routing
	// daemon with it) is dropped after 300 ms instead of OSPF's dead
	// interval. A router without BFD leaves the session down, and OSPF
	// then works as without it.
	regional := Params{
		Role: RoleRegional, Hostname: "sched-hefei-1",
		RouterID: a("10.1.0.2"), ServiceIP: exService, CenterPrefix: exCenter,
		OSPF: OSPF{Interfaces: []OSPFInterface{{Name: "eth0", BFD: true}}},
	}
	central := Params{
		Role: RoleCentral, Hostname: "sched-center-1",
		RouterID: a("10.0.0.2"), ServiceIP: exService, CenterPrefix: exCenter,
		OSPF: OSPF{Interfaces: []OSPFInterface{{Name: "eth0", BFD: true}}},
	}
	city := Params{
		Daemon: BIRD, Role: RoleCityRouter, Hostname: "router-hefei",
		RouterID: a("10.1.0.1"), ServiceIP: exService, CenterPrefix: exCenter,
		BGP: BGP{
			ASN: 65101,
			Schedulers: []Peer{
				{Name: "hefei_1", Address: a("10.1.0.2"), ASN: 65201, Passive: true},
				{Name: "hefei_2", Address: a("10.1.0.3"), ASN: 65201, Passive: true},
			},
			Routers: []Peer{{Name: "core", Address: a("10.100.1.1"), ASN: 65000}},
		},
	}
	core := Params{
		Daemon: BIRD, Role: RoleCoreRouter, Hostname: "router-core",
		RouterID: a("10.100.0.1"), ServiceIP: exService, CenterPrefix: exCenter,
		BGP: BGP{
			ASN:        65000,
			Schedulers: []Peer{{Name: "center", Address: a("10.0.0.2"), ASN: 65300, Passive: true}},
			Routers: []Peer{
				{Name: "hefei", Address: a("10.100.1.2"), ASN: 65101},
				{Name: "wuhu", Address: a("10.100.2.2"), ASN: 65102},
				{Name: "bengbu", Address: a("10.100.3.2"), ASN: 65103},
			},
		},
	}
	// The lab routers in OSPF mode: OSPF toward the scheduler hosts instead
	// of BGP sessions with them.
	cityOSPF := city
	cityOSPF.BGP.Schedulers = nil
	cityOSPF.OSPF = OSPF{Interfaces: []OSPFInterface{{Name: "eth1", BFD: true}}}
	coreOSPF := core
	coreOSPF.BGP.Schedulers = nil
	coreOSPF.OSPF = OSPF{Interfaces: []OSPFInterface{{Name: "eth0", BFD: true}}}

	// A dual-stack regional host: OSPFv2 and OSPFv3 on the same uplink.
	regional6 := regional
	regional6.ServiceIP6, regional6.CenterPrefix6 = exService6, exCenter6

	with := func(p Params, d Daemon) Params { p.Daemon = d; return p }
	return []Example{
		{Path: "deploy/bird/regional-ospf.conf", Params: with(regional, BIRD)},
		{Path: "deploy/bird/central-ospf.conf", Params: with(central, BIRD)},
		{Path: "deploy/bird/lab-city-router.conf", Params: city},
		{Path: "deploy/bird/lab-core-router.conf", Params: core},
		{Path: "deploy/bird/lab-city-router-ospf.conf", Params: cityOSPF},
		{Path: "deploy/bird/lab-core-router-ospf.conf", Params: coreOSPF},
		{Path: "deploy/frr/regional-ospf.frr.conf", Params: with(regional, FRR)},
		{Path: "deploy/frr/central-ospf.frr.conf", Params: with(central, FRR)},
		{Path: "deploy/bird/regional-ospf-dualstack.conf", Params: with(regional6, BIRD)},
		{Path: "deploy/frr/regional-ospf-dualstack.frr.conf", Params: with(regional6, FRR)},
	}
}
