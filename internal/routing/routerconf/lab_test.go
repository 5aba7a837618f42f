package routerconf

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/netconfig"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// lab is a handful of network namespaces joined by veth pairs, each with
// its own BIRD, built and torn down by one privileged test. The test
// goroutine stays locked to its OS thread, which it moves between the
// namespaces (enter); children started there (bird, ip) inherit the
// namespace. Nothing touches the host namespace's interfaces.
type lab struct {
	t     *testing.T
	dir   string // world-readable: FRR's daemons run as user frr
	orig  netns.NsHandle
	ns    map[string]netns.NsHandle
	birds map[string]*exec.Cmd // every daemon started, by name
	logs  map[string]string
}

func newLab(t *testing.T) *lab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	for _, cmd := range []string{"ip", "bird", "birdc"} {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Skipf("needs %s (Debian packages iproute2, bird2)", cmd)
		}
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "anysched-lab-")
	if err == nil {
		err = os.Chmod(dir, 0o777)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l := &lab{t: t, dir: dir, orig: orig, ns: map[string]netns.NsHandle{},
		birds: map[string]*exec.Cmd{}, logs: map[string]string{}}
	t.Cleanup(l.close)
	return l
}

func (l *lab) close() {
	for name, cmd := range l.birds {
		l.stop(name, cmd)
	}
	if l.t.Failed() {
		for name, log := range l.logs {
			b, _ := os.ReadFile(log)
			l.t.Logf("%s log:\n%s", name, b)
		}
	}
	err := netns.Set(l.orig)
	for _, h := range l.ns {
		h.Close()
	}
	l.orig.Close()
	if err != nil {
		l.t.Errorf("restore netns: %v (thread left locked and discarded)", err)
		return
	}
	runtime.UnlockOSThread()
}

func (l *lab) stop(name string, cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		cmd.Process.Kill()
		<-done
	}
	delete(l.birds, name)
}

// enter moves the test's thread into namespace name ("" = the original).
func (l *lab) enter(name string) {
	l.t.Helper()
	h := l.orig
	if name != "" {
		var ok bool
		if h, ok = l.ns[name]; !ok {
			l.t.Fatalf("no namespace %q", name)
		}
	}
	if err := netns.Set(h); err != nil {
		l.t.Fatalf("enter netns %s: %v", name, err)
	}
}

func (l *lab) addNS(names ...string) {
	l.t.Helper()
	for _, name := range names {
		h, err := netns.New() // switches the thread into it
		if err != nil {
			l.t.Fatal(err)
		}
		l.ns[name] = h
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			l.t.Fatalf("%s: lo up: %v", name, err)
		}
	}
	l.enter("")
}

// wire joins namespaces a and b with a veth pair, addresses given as
// prefixes (10.1.0.1/30).
func (l *lab) wire(a, aIf, aAddr, b, bIf, bAddr string) {
	l.t.Helper()
	l.enter(a)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aIf}, PeerName: bIf, PeerNamespace: netlink.NsFd(int(l.ns[b]))}
	if err := netlink.LinkAdd(veth); err != nil {
		l.t.Fatalf("veth %s/%s - %s/%s: %v", a, aIf, b, bIf, err)
	}
	l.addrUp(aIf, aAddr)
	l.enter(b)
	l.addrUp(bIf, bAddr)
	l.enter("")
}

func (l *lab) addrUp(ifName, addr string) {
	l.t.Helper()
	link, err := netlink.LinkByName(ifName)
	if err != nil {
		l.t.Fatal(err)
	}
	a, err := netlink.ParseAddr(addr)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := netlink.AddrAdd(link, a); err != nil {
		l.t.Fatalf("%s %s: %v", ifName, addr, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		l.t.Fatal(err)
	}
}

func (l *lab) sock(name string) string { return filepath.Join(l.dir, name+".ctl") }

// bird writes conf and starts `bird -f -c CONF -s SOCK -P PIDFILE` in
// namespace ns, then waits for its control socket.
func (l *lab) bird(ns string, conf []byte) {
	l.t.Helper()
	file := filepath.Join(l.dir, ns+".conf")
	if err := os.WriteFile(file, conf, 0o644); err != nil {
		l.t.Fatal(err)
	}
	l.spawn(ns, ns, "bird", "-f", "-c", file, "-s", l.sock(ns), "-P", filepath.Join(l.dir, ns+".pid"))
	l.waitFor(wait.DefaultTimeout, "bird "+ns+" control socket", func() bool {
		return exec.Command("birdc", "-s", l.sock(ns), "show", "status").Run() == nil
	})
}

// spawn starts a foreground daemon in namespace ns, logging to DIR/name.log;
// close stops it.
func (l *lab) spawn(ns, name string, argv ...string) {
	l.t.Helper()
	log := filepath.Join(l.dir, name+".log")
	out, err := os.Create(log)
	if err != nil {
		l.t.Fatal(err)
	}
	defer out.Close()
	l.enter(ns)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Start()
	l.enter("")
	if err != nil {
		l.t.Fatalf("start %s in %s: %v", argv[0], ns, err)
	}
	l.birds[name], l.logs[name] = cmd, log
}

func (l *lab) birdc(ns string, args ...string) string {
	out, _ := exec.Command("birdc", append([]string{"-s", l.sock(ns)}, args...)...).CombinedOutput()
	return string(out)
}

// ip runs iproute2 in namespace ns.
func (l *lab) ip(ns string, args ...string) string {
	l.t.Helper()
	l.enter(ns)
	defer l.enter("")
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return "ERROR " + err.Error() + ": " + string(out)
	}
	return string(out)
}

// via returns the next hop the kernel of ns uses for dst ("" if none).
func (l *lab) via(ns, dst string) string {
	out := l.ip(ns, "-4", "route", "get", dst)
	f := strings.Fields(out)
	for i := range f {
		if f[i] == "via" && i+1 < len(f) {
			return f[i+1]
		}
	}
	return ""
}

// kernelHas reports whether ns's main table has a route for exactly p.
func (l *lab) kernelHas(ns, p string) bool {
	return strings.TrimSpace(l.ip(ns, "-4", "route", "list", "exact", p)) != ""
}

// waitFor is wait.For that shows the routers' state when it fails.
func (l *lab) waitFor(timeout time.Duration, what string, cond func() bool) time.Duration {
	l.t.Helper()
	start := time.Now()
	if !wait.UntilEvery(timeout, 50*time.Millisecond, cond) { // cond runs ip or birdc
		l.dump()
		l.t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
	return time.Since(start)
}

func (l *lab) dump() {
	for ns := range l.birds {
		if _, err := os.Stat(l.sock(ns)); err != nil {
			continue // not a BIRD
		}
		l.t.Logf("== %s: birdc show protocols\n%s\n== %s: birdc show route all\n%s\n== %s: ip route\n%s",
			ns, l.birdc(ns, "show", "protocols"), ns, l.birdc(ns, "show", "route", "all"), ns, l.ip(ns, "-4", "route"))
	}
}

func render(t *testing.T, p Params) []byte {
	t.Helper()
	b, err := RenderBytes(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// vip runs a netconfig VIP operation inside namespace ns.
func (l *lab) vip(ns string, v *netconfig.VIP, up bool) {
	l.t.Helper()
	l.enter(ns)
	defer l.enter("")
	op := v.Down
	if up {
		op = v.Up
	}
	if err := op(context.Background()); err != nil {
		l.t.Fatalf("%s: %v", ns, err)
	}
}

var (
	labService = netip.MustParseAddr("198.18.0.1")
	labCenter  = netip.MustParsePrefix("198.18.0.0/26")
	ad         = netip.MustParseAddr
)

// TestPrivilegedOSPFLab runs the rendered OSPF-mode configurations for
// real: a regional scheduler host and the central host (BIRD, OSPF, anycast0
// managed with netconfig), a city router (OSPF to its scheduler host, BGP to
// the core) and the core (BGP to the city, OSPF to the center). The city
// reaches the service IP at its own scheduler while the /32 is on anycast0,
// and at the center once the scheduler removes it; the core never sees the
// /32.
//
//	sched (up0 10.1.0.2/30) -- (eth1 10.1.0.1/30) city (eth0 10.100.1.2/30) -- (eth1 10.100.1.1/30) core (eth0 10.0.0.1/30) -- (up0 10.0.0.2/30) center
func TestPrivilegedOSPFLab(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	l.addNS("sched", "city", "core", "center")
	l.wire("sched", "up0", "10.1.0.2/30", "city", "eth1", "10.1.0.1/30")
	l.wire("city", "eth0", "10.100.1.2/30", "core", "eth1", "10.100.1.1/30")
	l.wire("core", "eth0", "10.0.0.1/30", "center", "up0", "10.0.0.2/30")

	regionalVIP, err := netconfig.NewVIP("", netconfig.HostPrefix(labService))
	if err != nil {
		t.Fatal(err)
	}
	agg, err := netconfig.AggregateAddress(labService, labCenter)
	if err != nil {
		t.Fatal(err)
	}
	centerVIP, err := netconfig.NewVIP("", agg)
	if err != nil {
		t.Fatal(err)
	}
	l.vip("sched", regionalVIP, true)
	l.vip("center", centerVIP, true)

	uplink := OSPF{Interfaces: []OSPFInterface{{Name: "up0", Type: PointToPoint}}}
	l.bird("sched", render(t, Params{Daemon: BIRD, Role: RoleRegional, Log: "stderr",
		RouterID: ad("10.1.0.2"), ServiceIP: labService, CenterPrefix: labCenter, OSPF: uplink}))
	l.bird("center", render(t, Params{Daemon: BIRD, Role: RoleCentral, Log: "stderr",
		RouterID: ad("10.0.0.2"), ServiceIP: labService, CenterPrefix: labCenter, OSPF: uplink}))
	l.bird("city", render(t, Params{Daemon: BIRD, Role: RoleCityRouter, Log: "stderr",
		RouterID: ad("10.100.1.2"), ServiceIP: labService, CenterPrefix: labCenter,
		OSPF: OSPF{Interfaces: []OSPFInterface{{Name: "eth1", Type: PointToPoint}}},
		BGP:  BGP{ASN: 65101, Routers: []Peer{{Name: "core", Address: ad("10.100.1.1"), ASN: 65000}}}}))
	l.bird("core", render(t, Params{Daemon: BIRD, Role: RoleCoreRouter, Log: "stderr",
		RouterID: ad("10.100.1.1"), ServiceIP: labService, CenterPrefix: labCenter,
		OSPF: OSPF{Interfaces: []OSPFInterface{{Name: "eth0", Type: PointToPoint}}},
		BGP:  BGP{ASN: 65000, Routers: []Peer{{Name: "hefei", Address: ad("10.100.1.2"), ASN: 65101}}}}))

	d := l.waitFor(15*time.Second, "the city router to reach the service IP at its scheduler and to learn the /26 from the core", func() bool {
		return l.via("city", "198.18.0.1") == "10.1.0.2" && l.kernelHas("city", "198.18.0.0/26")
	})
	t.Logf("converged %v after the routers started", d.Round(time.Millisecond))
	if got := l.via("core", "198.18.0.1"); got != "10.0.0.2" {
		t.Errorf("core: service IP via %q, want the center 10.0.0.2", got)
	}
	if out := l.birdc("core", "show", "route", "for", "198.18.0.1/32", "table", "master4", "all"); strings.Contains(out, "198.18.0.1/32") {
		t.Errorf("the city's /32 reached the core:\n%s", out)
	}
	if !l.kernelHas("core", "10.1.0.0/30") {
		t.Errorf("core cannot reach the scheduler host's network (city exports its connected networks):\n%s", l.ip("core", "-4", "route"))
	}
	if !l.kernelHas("city", "10.0.0.0/30") { // the core's link to the center, by BGP
		t.Errorf("city cannot reach the center's network:\n%s", l.ip("city", "-4", "route"))
	}

	// The regional scheduler withdraws: the city falls back to the center.
	l.vip("sched", regionalVIP, false)
	d = l.waitFor(10*time.Second, "the city router to reach the service IP through the core after the /32 was removed", func() bool {
		return l.via("city", "198.18.0.1") == "10.100.1.1"
	})
	t.Logf("withdrawal seen by the city router after %v (BIRD originates a router LSA at most every 5 s)", d.Round(time.Millisecond))
	if l.kernelHas("city", "198.18.0.1/32") {
		t.Error("city still has the /32")
	}
}

// fakeScheduler is a BIRD standing in for a scheduler's embedded GoBGP: it
// announces the service /32 (or the center prefix) and some routes the
// routers must refuse.
func fakeScheduler(routerID, peer string, asn, peerASN uint32, med int, routes ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "log stderr all;\nrouter id %s;\nprotocol device {}\nprotocol static {\n\tipv4;\n", routerID)
	for _, r := range routes {
		fmt.Fprintf(&b, "\troute %s blackhole;\n", r)
	}
	fmt.Fprintf(&b, "}\nprotocol bgp up {\n\tlocal as %d;\n\tneighbor %s as %d;\n", asn, peer, peerASN)
	b.WriteString("\thold time 3;\n\tkeepalive time 1;\n\tconnect delay time 1;\n\tconnect retry time 1;\n\terror wait time 1, 5;\n")
	fmt.Fprintf(&b, "\tipv4 {\n\t\timport none;\n\t\texport filter {\n\t\t\tbgp_med = %d;\n", med)
	b.WriteString("\t\t\taccept;\n\t\t};\n\t};\n}\n")
	return b.Bytes()
}

// TestPrivilegedBGPLab runs the rendered lab router configurations with two
// schedulers of one city (primary MED 10, standby MED 100) and the center,
// each played by a BIRD announcing like GoBGP would, plus junk the filters
// must refuse; then graceful shutdown and kill -9 of the schedulers.
//
//	s1 (10.1.0.2/30) -- city eth1 (10.1.0.1/30); s2 (10.1.1.2/30) -- city eth2 (10.1.1.1/30)
//	city eth0 (10.100.1.2/30) -- core eth1 (10.100.1.1/30); core eth0 (10.0.0.1/30) -- center (10.0.0.2/30)
func TestPrivilegedBGPLab(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	l.addNS("s1", "s2", "city", "core", "center")
	l.wire("s1", "up0", "10.1.0.2/30", "city", "eth1", "10.1.0.1/30")
	l.wire("s2", "up0", "10.1.1.2/30", "city", "eth2", "10.1.1.1/30")
	l.wire("city", "eth0", "10.100.1.2/30", "core", "eth1", "10.100.1.1/30")
	l.wire("core", "eth0", "10.0.0.1/30", "center", "up0", "10.0.0.2/30")

	l.bird("city", render(t, Params{Daemon: BIRD, Role: RoleCityRouter, Log: "stderr",
		RouterID: ad("10.100.1.2"), ServiceIP: labService, CenterPrefix: labCenter,
		BGP: BGP{ASN: 65101,
			Schedulers: []Peer{
				{Name: "primary", Address: ad("10.1.0.2"), ASN: 65201, Passive: true, Password: "lab-md5"},
				{Name: "standby", Address: ad("10.1.1.2"), ASN: 65202, Passive: true},
			},
			Routers: []Peer{{Name: "core", Address: ad("10.100.1.1"), ASN: 65000}}}}))
	l.bird("core", render(t, Params{Daemon: BIRD, Role: RoleCoreRouter, Log: "stderr",
		RouterID: ad("10.100.1.1"), ServiceIP: labService, CenterPrefix: labCenter,
		BGP: BGP{ASN: 65000,
			Schedulers: []Peer{{Name: "center", Address: ad("10.0.0.2"), ASN: 65300, Passive: true}},
			Routers:    []Peer{{Name: "hefei", Address: ad("10.100.1.2"), ASN: 65101}}}}))
	s1 := fakeScheduler("10.1.0.2", "10.1.0.1", 65201, 65101, 10, "198.18.0.1/32", "198.18.0.2/32", "10.99.0.0/24")
	s1 = bytes.Replace(s1, []byte("\tneighbor"), []byte("\tpassword \"lab-md5\";\n\tneighbor"), 1)
	l.bird("s1", s1)
	l.bird("s2", fakeScheduler("10.1.1.2", "10.1.1.1", 65202, 65101, 100, "198.18.0.1/32"))
	l.bird("center", fakeScheduler("10.0.0.2", "10.0.0.1", 65300, 65000, 0, "198.18.0.0/26", "198.18.0.0/27", "198.18.0.1/32", "10.98.0.0/24"))

	d := l.waitFor(10*time.Second, "the city to prefer the primary (lower MED) and to learn the /26 from the core", func() bool {
		return l.via("city", "198.18.0.1") == "10.1.0.2" && l.via("city", "198.18.0.2") == "10.100.1.1"
	})
	t.Logf("converged %v after the last BIRD started", d.Round(time.Millisecond))
	for ns, refused := range map[string][]string{
		"city": {"198.18.0.2/32", "10.99.0.0/24", "198.18.0.0/27", "10.98.0.0/24"},
		"core": {"198.18.0.1/32", "198.18.0.2/32", "198.18.0.0/27", "10.99.0.0/24", "10.98.0.0/24"},
	} {
		for _, p := range refused {
			if l.kernelHas(ns, p) {
				t.Errorf("%s accepted %s:\n%s", ns, p, l.ip(ns, "-4", "route"))
			}
		}
	}
	if got := l.via("core", "198.18.0.1"); got != "10.0.0.2" {
		t.Errorf("core: service IP via %q, want the center", got)
	}
	if !l.kernelHas("core", "10.1.0.0/30") || !l.kernelHas("city", "10.0.0.0/30") {
		t.Errorf("the routers did not exchange their connected networks:\ncore:\n%s\ncity:\n%s", l.ip("core", "-4", "route"), l.ip("city", "-4", "route"))
	}

	// Graceful shutdown of the primary: it re-announces with 65535:0 and
	// the city moves to the standby before anything is withdrawn.
	conf := filepath.Join(l.dir, "s1.conf")
	gs := bytes.Replace(s1, []byte("\t\t\taccept;"), []byte("\t\t\tbgp_community.add((65535, 0));\n\t\t\taccept;"), 1)
	if err := os.WriteFile(conf, gs, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := l.birdc("s1", "configure"); !strings.Contains(out, "Reconfigured") {
		t.Fatalf("birdc configure: %s", out)
	}
	d = l.waitFor(5*time.Second, "the city to leave the primary announcing GRACEFUL_SHUTDOWN", func() bool {
		return l.via("city", "198.18.0.1") == "10.1.1.2"
	})
	t.Logf("graceful shutdown: city on the standby after %v", d.Round(time.Millisecond))

	// kill -9 of the standby: back to the primary (its only path left,
	// graceful-shutdown or not), at once: the TCP session closes.
	kill := func(ns string) {
		l.birds[ns].Process.Kill()
		l.birds[ns].Wait()
		delete(l.birds, ns)
	}
	kill("s2")
	d = l.waitFor(5*time.Second, "the city to return to the primary after the standby died", func() bool {
		return l.via("city", "198.18.0.1") == "10.1.0.2"
	})
	t.Logf("kill -9 of the standby: city on the primary after %v", d.Round(time.Millisecond))
	kill("s1")
	d = l.waitFor(5*time.Second, "the city to fall back to the center after both schedulers died", func() bool {
		return l.via("city", "198.18.0.1") == "10.100.1.1"
	})
	t.Logf("kill -9 of the last scheduler: city on the center's /26 after %v", d.Round(time.Millisecond))
}

// TestPrivilegedFRRHostLab runs the rendered FRR configuration of a regional
// scheduler host (zebra + ospfd in a namespace, as user frr) against the
// rendered BIRD city router: FRR advertises the /32 while netconfig keeps it
// on anycast0, and withdraws it when the address goes.
//
//	host (up0 10.1.0.2/30, FRR) -- (eth1 10.1.0.1/30, BIRD) city
func TestPrivilegedFRRHostLab(t *testing.T) {
	t.Parallel()
	for _, d := range []string{"/usr/lib/frr/zebra", "/usr/lib/frr/ospfd"} {
		if _, err := os.Stat(d); err != nil {
			t.Skipf("needs %s (Debian package frr)", d)
		}
	}
	l := newLab(t)
	l.addNS("host", "city")
	l.wire("host", "up0", "10.1.0.2/30", "city", "eth1", "10.1.0.1/30")
	vip, err := netconfig.NewVIP("", netconfig.HostPrefix(labService))
	if err != nil {
		t.Fatal(err)
	}
	l.vip("host", vip, true)

	conf := filepath.Join(l.dir, "frr.conf")
	if err := os.WriteFile(conf, render(t, Params{Daemon: FRR, Role: RoleRegional,
		RouterID: ad("10.1.0.2"), ServiceIP: labService, CenterPrefix: labCenter,
		OSPF: OSPF{Interfaces: []OSPFInterface{{Name: "up0", Type: PointToPoint}}}}), 0o644); err != nil {
		t.Fatal(err)
	}
	// What watchfrr does with -f per daemon (the integrated frr.conf: each
	// daemon skips the other daemons' lines with a warning).
	common := []string{"-f", conf, "-z", filepath.Join(l.dir, "zserv.api"), "--vty_socket", l.dir, "-P", "0", "--log", "stdout"}
	l.spawn("host", "zebra", append([]string{"/usr/lib/frr/zebra", "-i", filepath.Join(l.dir, "zebra.pid")}, common...)...)
	l.waitFor(wait.DefaultTimeout, "zebra's API socket", func() bool {
		_, err := os.Stat(filepath.Join(l.dir, "zserv.api"))
		return err == nil
	})
	l.spawn("host", "ospfd", append([]string{"/usr/lib/frr/ospfd", "-i", filepath.Join(l.dir, "ospfd.pid")}, common...)...)
	l.bird("city", render(t, Params{Daemon: BIRD, Role: RoleCityRouter, Log: "stderr",
		RouterID: ad("10.1.0.1"), ServiceIP: labService, CenterPrefix: labCenter,
		OSPF: OSPF{Interfaces: []OSPFInterface{{Name: "eth1", Type: PointToPoint}}},
		BGP:  BGP{ASN: 65101, Routers: []Peer{{Name: "core", Address: ad("10.100.1.1"), ASN: 65000}}}}))

	d := l.waitFor(15*time.Second, "the city router to learn the /32 from the FRR host", func() bool {
		return l.via("city", "198.18.0.1") == "10.1.0.2"
	})
	t.Logf("FRR host's /32 at the city router %v after the daemons started", d.Round(time.Millisecond))
	// Part of what is tested, not a wait for something: OSPF ignores a new
	// instance of an LSA that arrives within MinLSArrival (1 s) of the
	// previous one, and nothing observable says when the last one arrived.
	time.Sleep(1 * time.Second)
	l.vip("host", vip, false)
	d = l.waitFor(10*time.Second, "the city router to lose the /32", func() bool {
		return !l.kernelHas("city", "198.18.0.1/32")
	})
	t.Logf("withdrawn at the city router %v after the address was removed", d.Round(time.Millisecond))
}
