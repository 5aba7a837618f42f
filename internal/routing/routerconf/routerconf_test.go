package routerconf

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden and the examples in deploy/bird, deploy/frr")

// cases are the golden-file cases: the examples plus variants that switch
// on every optional part of the templates.
func cases() map[string]Params {
	m := map[string]Params{}
	for _, ex := range Examples() {
		m["example_"+strings.ReplaceAll(strings.TrimPrefix(ex.Path, "deploy/"), "/", "_")] = ex.Params
	}
	ex := map[string]Params{}
	for _, e := range Examples() {
		ex[filepath.Base(e.Path)] = e.Params
	}

	// A standby regional host on two point-to-point uplinks with MD5
	// authentication and BFD, installing the routes it learns, in area 1.
	standby := ex["regional-ospf.conf"]
	standby.Hostname = "sched-hefei-2"
	standby.RouterID = netip.MustParseAddr("10.1.0.3")
	standby.Log = "/var/log/anysched/routing.log"
	standby.OSPF = OSPF{
		Area: 1, Hello: 2, Dead: 8, StubCost: 100, InstallRoutes: true, Anycast: "vip0",
		Interfaces: []OSPFInterface{
			{Name: "ens3", Type: PointToPoint, Cost: 20, Password: "md5key", BFD: true},
			{Name: "ens4", Type: PointToPoint, Hello: 1, Dead: 4},
		},
	}
	standby.BFD = BFD{IntervalMS: 50, Multiplier: 5}
	m["regional-standby.bird"] = standby
	standbyFRR := standby
	standbyFRR.Daemon = FRR
	m["regional-standby.frr"] = standbyFRR

	// A lab city router with both BGP and OSPF toward its schedulers,
	// passwords, per-peer timers, multihop and BFD, logging to stderr.
	city := ex["lab-city-router.conf"]
	city.Log = "stderr"
	city.OSPF = OSPF{Interfaces: []OSPFInterface{{Name: "sched*", Type: PointToPoint, Password: "ospfkey"}}}
	city.BGP.HoldTime, city.BGP.Keepalive, city.BGP.ConnectRetry = 9, 3, 5
	city.BGP.ErrorWaitMin, city.BGP.ErrorWaitMax = 2, 20
	city.BGP.Schedulers = []Peer{
		{Name: "primary", Address: netip.MustParseAddr("10.1.0.2"), ASN: 65201, Password: "tcp-md5-secret", BFD: true},
		{Name: "standby", Address: netip.MustParseAddr("10.1.0.3"), ASN: 65202, Passive: true, HoldTime: 30, Keepalive: 10},
	}
	city.BGP.Routers = []Peer{{Name: "core", Address: netip.MustParseAddr("10.100.1.1"), ASN: 65000, Multihop: 2, Password: "core-secret"}}
	m["city-router-full.bird"] = city

	// Dual-stack: the standby host with both families (OSPFv3 with
	// HMAC-SHA authentication and BFD), and the lab's routers with an IPv6
	// session beside each IPv4 one and OSPFv3 beside OSPFv2.
	v6 := func(p Params) Params {
		p.ServiceIP6, p.CenterPrefix6 = exService6, exCenter6
		return p
	}
	m["regional-standby-dualstack.bird"] = v6(standby)
	m["regional-standby-dualstack.frr"] = v6(standbyFRR)
	cityDual := v6(city)
	cityDual.BGP.Schedulers = append(cityDual.BGP.Schedulers, Peer{Name: "primary_v6", Address: netip.MustParseAddr("fd00:1:2::2"), ASN: 65201, Passive: true})
	cityDual.BGP.Routers = append(cityDual.BGP.Routers, Peer{Name: "core_v6", Address: netip.MustParseAddr("fd00:100:1::1"), ASN: 65000})
	m["city-router-dualstack.bird"] = cityDual
	coreDual := v6(ex["lab-core-router-ospf.conf"])
	coreDual.BGP.Routers = append(coreDual.BGP.Routers, Peer{Name: "hefei_v6", Address: netip.MustParseAddr("fd00:100:1::2"), ASN: 65101})
	m["core-router-ospf-dualstack.bird"] = coreDual

	// An IPv6-only city: its host and router know only the IPv6 pair.
	only6 := func(p Params) Params {
		p = v6(p)
		p.ServiceIP, p.CenterPrefix = netip.Addr{}, netip.Prefix{}
		return p
	}
	m["regional-ipv6only.bird"] = only6(ex["regional-ospf.conf"])
	m["regional-ipv6only.frr"] = only6(ex["regional-ospf.frr.conf"])
	city6 := only6(ex["lab-city-router-ospf.conf"])
	city6.BGP.Routers = []Peer{{Name: "core", Address: netip.MustParseAddr("fd00:100:1::1"), ASN: 65000}}
	m["city-router-ipv6only.bird"] = city6
	return m
}

func TestGolden(t *testing.T) {
	for name, p := range cases() {
		t.Run(name, func(t *testing.T) {
			got, err := RenderBytes(p)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/routing/routerconf -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("render differs from %s (go test ./internal/routing/routerconf -update rewrites it):\n%s", golden, diff(string(want), string(got)))
			}
		})
	}
}

// TestDeployExamples checks that the committed examples in deploy/ are what
// Render makes of Examples().
func TestDeployExamples(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	for _, ex := range Examples() {
		got, err := RenderBytes(ex.Params)
		if err != nil {
			t.Fatalf("%s: %v", ex.Path, err)
		}
		path := filepath.Join(root, ex.Path)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/routing/routerconf -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not the rendered example (go test ./internal/routing/routerconf -update rewrites it):\n%s", ex.Path, diff(string(want), string(got)))
		}
	}
}

// diff shows the first differing lines.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl
		}
	}
	return "(no line differs)"
}

// TestBIRDParses runs BIRD's own parser (bird -p -c FILE) on every rendered
// BIRD configuration.
func TestBIRDParses(t *testing.T) {
	bird, err := exec.LookPath("bird")
	if err != nil {
		t.Skip("bird (Debian package bird2) not installed")
	}
	dir := t.TempDir()
	n := 0
	for name, p := range cases() {
		if p.Daemon != BIRD {
			continue
		}
		n++
		conf, err := RenderBytes(p)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(file, conf, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bird, "-p", "-c", file).CombinedOutput()
		if err != nil {
			t.Errorf("%s: bird -p -c: %v\n%s", name, err, out)
		} else if len(out) > 0 {
			t.Logf("%s: bird -p says: %s", name, out)
		}
	}
	if n == 0 {
		t.Fatal("no BIRD case")
	}
	// The parser does catch mistakes.
	bad := filepath.Join(dir, "bad.conf")
	os.WriteFile(bad, []byte("router id 10.0.0.1;\nprotocol bgp x { local as 1; neighbor 10.0.0.2 as 2; hold time 2; ipv4; }\n"), 0o644)
	if out, err := exec.Command(bird, "-p", "-c", bad).CombinedOutput(); err == nil {
		t.Errorf("bird -p accepted a hold time of 2:\n%s", out)
	}
}

// TestFRRParses runs FRR's dry run on every rendered FRR configuration:
// vtysh --config_dir DIR --dryrun --inputfile FILE (FRR 8.4 on Debian 12;
// exit status 0 and no output = valid). vtysh needs no running daemon for
// it; --config_dir with an empty vtysh.conf keeps it from reading
// /etc/frr/vtysh.conf, which only root and group frr may read.
func TestFRRParses(t *testing.T) {
	vtysh, err := exec.LookPath("vtysh")
	if err != nil {
		t.Skip("vtysh (Debian package frr) not installed")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "vtysh.conf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dryrun := func(file string) *exec.Cmd {
		return exec.Command(vtysh, "--config_dir", dir, "--dryrun", "--inputfile", file)
	}
	n := 0
	for name, p := range cases() {
		if p.Daemon != FRR {
			continue
		}
		n++
		conf, err := RenderBytes(p)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(file, conf, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := dryrun(file).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("%s: vtysh --dryrun: %v\n%s", name, err, out)
		}
	}
	if n == 0 {
		t.Fatal("no FRR case")
	}
	bad := filepath.Join(dir, "bad.conf")
	os.WriteFile(bad, []byte("interface eth0\n ip ospf aera 0\nexit\n"), 0o644)
	if out, err := dryrun(bad).CombinedOutput(); err == nil {
		t.Errorf("vtysh --dryrun accepted a misspelt command:\n%s", out)
	}
}

func TestValidate(t *testing.T) {
	ex := map[string]Params{}
	for _, e := range Examples() {
		ex[filepath.Base(e.Path)] = e.Params
	}
	regional, city, core := ex["regional-ospf.conf"], ex["lab-city-router.conf"], ex["lab-core-router.conf"]
	a := netip.MustParseAddr
	tests := []struct {
		name string
		base Params
		edit func(p *Params)
		want string
	}{
		{"no role", regional, func(p *Params) { p.Role = "" }, "role: missing"},
		{"bad role", regional, func(p *Params) { p.Role = "edge" }, `role: unknown role "edge"`},
		{"no daemon", regional, func(p *Params) { p.Daemon = "" }, "daemon: missing"},
		{"bad daemon", regional, func(p *Params) { p.Daemon = "quagga" }, `unknown daemon "quagga"`},
		{"frr router", city, func(p *Params) { p.Daemon = FRR }, "daemon: the FRR templates are for the scheduler hosts"},
		{"bad hostname", regional, func(p *Params) { p.Hostname = "a b" }, "hostname:"},
		{"no router id", regional, func(p *Params) { p.RouterID = netip.Addr{} }, "router_id: missing"},
		{"v6 router id", regional, func(p *Params) { p.RouterID = a("2001:db8::1") }, "router_id: 2001:db8::1 is not a usable IPv4 address"},
		{"no service ip", regional, func(p *Params) { p.ServiceIP = netip.Addr{} }, "service_ip: missing"},
		{"v6 service ip", regional, func(p *Params) { p.ServiceIP = a("2001:db8::1") }, "service_ip: 2001:db8::1 is not an IPv4 address"},
		{"no center", regional, func(p *Params) { p.CenterPrefix = netip.Prefix{} }, "center_prefix: missing"},
		{"center host bits", regional, func(p *Params) { p.CenterPrefix = netip.MustParsePrefix("198.18.0.1/26") }, "center_prefix: 198.18.0.1/26 has host bits set (did you mean 198.18.0.0/26?)"},
		{"center /32", regional, func(p *Params) { p.CenterPrefix = netip.MustParsePrefix("198.18.0.1/32") }, "between /8 and /31"},
		{"center without service", regional, func(p *Params) { p.CenterPrefix = netip.MustParsePrefix("198.18.1.0/26") }, "center_prefix: 198.18.1.0/26 does not contain service_ip 198.18.0.1"},
		{"bad log", regional, func(p *Params) { p.Log = "var/log/x" }, "log:"},
		{"frr stderr", regional, func(p *Params) { p.Daemon, p.Log = FRR, "stderr" }, `log: "stderr" is for a foreground BIRD`},
		{"host without uplink", regional, func(p *Params) { p.OSPF.Interfaces = nil }, "ospf.interfaces: a regional host needs at least one uplink interface"},
		{"uplink is anycast", regional, func(p *Params) { p.OSPF.Interfaces = []OSPFInterface{{Name: "anycast0"}} }, `ospf.interfaces[0].name: "anycast0" is the anycast stub interface`},
		{"uplink twice", regional, func(p *Params) { p.OSPF.Interfaces = []OSPFInterface{{Name: "eth0"}, {Name: "eth0"}} }, `ospf.interfaces[1].name: "eth0" listed twice`},
		{"uplink bad name", regional, func(p *Params) { p.OSPF.Interfaces = []OSPFInterface{{Name: `eth"0`}} }, `ospf.interfaces[0].name: "eth\"0" is not an interface name`},
		{"frr pattern", regional, func(p *Params) { p.Daemon = FRR; p.OSPF.Interfaces = []OSPFInterface{{Name: "eth*"}} }, `ospf.interfaces[0].name: "eth*" is not an interface name`},
		{"bad type", regional, func(p *Params) { p.OSPF.Interfaces[0].Type = "nbma" }, `ospf.interfaces[0].type: "nbma"`},
		{"bad cost", regional, func(p *Params) { p.OSPF.Interfaces[0].Cost = 70000 }, "ospf.interfaces[0].cost: 70000 not in 1..65535"},
		{"dead <= hello", regional, func(p *Params) { p.OSPF.Hello, p.OSPF.Dead = 3, 3 }, "ospf.dead: 3: want more than hello (3)"},
		{"iface dead <= hello", regional, func(p *Params) { p.OSPF.Interfaces[0].Hello = 5 }, "ospf.interfaces[0].dead: 3: want more than hello (5)"},
		{"long ospf password", regional, func(p *Params) { p.OSPF.Interfaces[0].Password = "0123456789abcdefg" }, "ospf.interfaces[0].password: want at most 16"},
		{"bad anycast", regional, func(p *Params) { p.OSPF.Anycast = "any cast" }, "ospf.anycast:"},
		{"bad stub cost", regional, func(p *Params) { p.OSPF.StubCost = -1 }, "ospf.stub_cost: -1"},
		{"host with bgp", regional, func(p *Params) { p.BGP.ASN = 65000 }, "bgp: a regional host in OSPF mode has no BGP"},
		{"router with host ospf", city, func(p *Params) { p.OSPF.InstallRoutes = true }, "ospf: anycast, stub_cost and install_routes are for the scheduler hosts"},
		{"no asn", city, func(p *Params) { p.BGP.ASN = 0 }, "bgp.asn: missing"},
		{"hold 2", city, func(p *Params) { p.BGP.HoldTime = 2 }, "bgp.hold_time: 2 not in 3..65535"},
		{"keepalive >= hold", city, func(p *Params) { p.BGP.Keepalive = 3 }, "bgp.keepalive: 3: want at least 1 and less than the hold time (3)"},
		{"error wait", city, func(p *Params) { p.BGP.ErrorWaitMin, p.BGP.ErrorWaitMax = 10, 5 }, "bgp.error_wait"},
		{"no routers", city, func(p *Params) { p.BGP.Routers = nil }, "bgp.routers: a city-router needs its core router(s)"},
		{"core no routers", core, func(p *Params) { p.BGP.Routers = nil }, "bgp.routers: a core-router needs its city routers"},
		{"nothing to learn", city, func(p *Params) { p.BGP.Schedulers = nil }, "bgp.schedulers: a city-router needs scheduler peers or OSPF interfaces"},
		{"peer no name", city, func(p *Params) { p.BGP.Schedulers[0].Name = "" }, "bgp.schedulers[0].name: missing"},
		{"peer bad name", city, func(p *Params) { p.BGP.Schedulers[0].Name = "a-b" }, `bgp.schedulers[0].name: "a-b"`},
		{"peer dup name", city, func(p *Params) { p.BGP.Schedulers[1].Name = p.BGP.Schedulers[0].Name }, `bgp.schedulers[1].name: "hefei_1" used twice`},
		{"peer no address", city, func(p *Params) { p.BGP.Routers[0].Address = netip.Addr{} }, "bgp.routers[0].address: missing"},
		{"peer v6", city, func(p *Params) { p.BGP.Routers[0].Address = a("2001:db8::2") }, "bgp.routers[0].address: 2001:db8::2: no anycast pair of its family is given (service_ip6, center_prefix6)"},
		{"peer dup address", city, func(p *Params) { p.BGP.Routers[0].Address = p.BGP.Schedulers[0].Address }, "bgp.routers[0].address: 10.1.0.2 used by two peers"},
		{"peer no asn", city, func(p *Params) { p.BGP.Schedulers[0].ASN = 0 }, "bgp.schedulers[0].asn: missing"},
		{"ibgp", city, func(p *Params) { p.BGP.Schedulers[0].ASN = 65101 }, "bgp.schedulers[0].asn: 65101 is our own AS: only eBGP"},
		{"bad password", city, func(p *Params) { p.BGP.Schedulers[0].Password = `se"cret` }, "bgp.schedulers[0].password:"},
		{"long password", city, func(p *Params) { p.BGP.Schedulers[0].Password = strings.Repeat("x", 81) }, "bgp.schedulers[0].password: want at most 80"},
		{"bad multihop", city, func(p *Params) { p.BGP.Routers[0].Multihop = 300 }, "bgp.routers[0].multihop: 300"},
		{"peer hold", city, func(p *Params) { p.BGP.Schedulers[0].HoldTime = 1 }, "bgp.schedulers[0].hold_time: 1"},
		{"bfd interval", city, func(p *Params) { p.BFD.IntervalMS = 1 }, "bfd.interval_ms: 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.base
			// Deep enough copies for the edits.
			p.OSPF.Interfaces = append([]OSPFInterface(nil), p.OSPF.Interfaces...)
			p.BGP.Schedulers = append([]Peer(nil), p.BGP.Schedulers...)
			p.BGP.Routers = append([]Peer(nil), p.BGP.Routers...)
			if p.Daemon == "" {
				p.Daemon = BIRD
			}
			tt.edit(&p)
			var buf bytes.Buffer
			err := Render(&buf, p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Render error = %v\nwant it to contain %q", err, tt.want)
			}
			if buf.Len() != 0 {
				t.Fatal("Render wrote output for invalid params")
			}
			if err := p.Validate(); err == nil {
				t.Fatal("Validate accepted what Render refused")
			}
		})
	}
	// All problems at once, each on its own line.
	err := Params{}.Validate()
	if err == nil || strings.Count(err.Error(), "\n") < 4 {
		t.Fatalf("empty params: want every problem reported, got %v", err)
	}
	for _, ex := range Examples() {
		if err := ex.Params.Validate(); err != nil {
			t.Errorf("%s: %v", ex.Path, err)
		}
	}
}
