// Package routerconf renders the routing-daemon configurations of the
// Anycast design (docs/design.md, after the operator's deployment report) from one Params value:
//
//   - the scheduler hosts in OSPF mode (announce.mode: ospf), for BIRD 2 and
//     FRR: OSPFv2 on the uplink(s) toward the city's (or province's) router,
//     the dummy interface anycast0 as a stub. The scheduler only adds or
//     removes the address on anycast0; the routing daemon advertises
//     whatever anycast0 carries, so "address present" = "announced".
//     A regional host carries the service IP as a /32 (198.18.0.1/32); the
//     central host carries the service IP with the center prefix's length
//     (198.18.0.1/26), which makes the kernel's connected route and the OSPF
//     stub exactly the center prefix (198.18.0.0/26), readiness-gated by the
//     same add/remove as a city's /32 (netconfig.AggregateAddress).
//   - the lab's routers, BIRD 2 only: a city router that learns the service
//     /32 from its city's scheduler(s) (BGP to their embedded GoBGP, and/or
//     OSPF) and keeps it inside the city, and a core router that learns the
//     center prefix from the center and hands it to every city router,
//     exactly as the deployment report publishes them.
//
// A dual-stack province gives the IPv6 pair too (ServiceIP6,
// CenterPrefix6): hosts then run OSPFv3 beside OSPFv2 on the same
// interfaces, and routers carry IPv6 unicast over the IPv6 BGP sessions
// (a peer's family is its address's) and OSPFv3, with the same rules per
// family. A host or router of an IPv6-only city gives only the IPv6 pair.
//
// Render validates the parameters (errors name the field) and writes the
// configuration. Examples returns the parameters of the committed examples in
// deploy/bird and deploy/frr.
package routerconf

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/anysched/anysched/internal/province/instance"
)

// Role is what the configured host is in the design.
type Role string

// Roles.
const (
	// RoleRegional is a regional scheduler host in OSPF mode: it advertises
	// the service /32 from anycast0 to its city's router.
	RoleRegional = Role(instance.Regional)
	// RoleCentral is the central scheduler host in OSPF mode: it advertises
	// the center prefix (the service IP with the prefix's length on
	// anycast0) to the province's core.
	RoleCentral = Role(instance.Central)
	// RoleCityRouter is a city's router (lab): it imports only the service
	// /32 from its schedulers, keeps it inside the city, and learns the
	// center prefix from the core.
	RoleCityRouter Role = "city-router"
	// RoleCoreRouter is the province's core router (lab): it imports only the
	// center prefix from the center and sends it to the city routers, and
	// never accepts or passes on anything more specific inside it.
	RoleCoreRouter Role = "core-router"
)

// IsHost reports whether the role is a scheduler host (OSPF mode).
func (r Role) IsHost() bool { return r == RoleRegional || r == RoleCentral }

// Daemon is the routing daemon the configuration is for.
type Daemon string

// Daemons.
const (
	BIRD Daemon = "bird" // BIRD 2 (bird.conf)
	FRR  Daemon = "frr"  // FRR 8+ integrated configuration (frr.conf); host roles only
)

// Network types of an OSPF interface.
const (
	Broadcast    = "broadcast" // the default: a LAN toward a switch, DR election
	PointToPoint = "ptp"       // a point-to-point link: no election, adjacency at once
)

const (
	defaultHello  = 1
	defaultDead   = 3
	defaultCost   = 10
	defaultHold   = 3
	defaultKeep   = 1
	defaultRetry  = 1
	defaultErrMin = 1
	defaultErrMax = 5
	defaultBFDInt = 100
	defaultBFDMul = 3
	defaultIface  = "anycast0"
)

// Params are everything a configuration depends on.
type Params struct {
	Daemon Daemon
	Role   Role
	// Hostname names the host in the header comment and (FRR) the hostname
	// line; optional.
	Hostname string
	// RouterID is the OSPF/BGP router id: an IPv4 address of this host,
	// unique in the routing domain. Required.
	RouterID netip.Addr
	// ServiceIP and CenterPrefix are the topology's IPv4 anycast.service_ip
	// and anycast.center_prefix: with them the templates speak OSPFv2 and
	// carry IPv4 unicast over the IPv4 BGP sessions. CenterPrefix must
	// contain ServiceIP and be shorter than /32.
	ServiceIP    netip.Addr
	CenterPrefix netip.Prefix
	// ServiceIP6 and CenterPrefix6 are the IPv6 pair (anycast.service_ip6
	// and center_prefix6 of a dual-stack province): with them the templates
	// speak OSPFv3 too and carry IPv6 unicast over the IPv6 BGP sessions
	// (each family over sessions of its own). A host or router of an
	// IPv6-only city gives only this pair.
	ServiceIP6    netip.Addr
	CenterPrefix6 netip.Prefix
	// Log is where the daemon logs: "" or "syslog" (default), "stderr"
	// (BIRD only, for a foreground lab daemon), or an absolute file path.
	Log string
	// OSPF is required for the host roles; for the routers it is optional
	// and, when it has interfaces, runs OSPF toward the scheduler hosts on
	// them (the lab's OSPF mode).
	OSPF OSPF
	// BGP is for the router roles only.
	BGP BGP
	// BFD timers, used where a peer or an OSPF interface enables BFD.
	BFD BFD
}

// OSPF configures OSPFv2 (one area).
type OSPF struct {
	// Area is the OSPF area id (0 = backbone, the default).
	Area uint32
	// Interfaces run OSPF: a host's uplinks toward its router(s); a router's
	// interfaces toward the scheduler hosts.
	Interfaces []OSPFInterface
	// Hello and Dead are the default timers in seconds for every interface
	// (defaults 1 and 3: fast failure detection; both ends must agree).
	Hello, Dead int
	// Anycast is a host's dummy interface (default anycast0), advertised as
	// a stub: its addresses are announced while present.
	Anycast string
	// StubCost is the OSPF cost of the anycast stub (default 10). A standby
	// scheduler host of a city uses a higher cost than the primary.
	StubCost int
	// InstallRoutes makes a host install OSPF-learned routes into its kernel
	// (default off: a scheduler host reaches the world by its default route
	// and only announces).
	InstallRoutes bool
}

// OSPFInterface is one interface running OSPF.
type OSPFInterface struct {
	Name string // interface name (BIRD also takes shell patterns such as "eth*")
	// Type is Broadcast (default) or PointToPoint; both ends must agree.
	Type string
	// Cost is the interface's OSPF cost (default 10).
	Cost int
	// Hello and Dead override OSPF.Hello and OSPF.Dead for this interface.
	Hello, Dead int
	// Password enables keyed-MD5 authentication (key id 1), at most 16
	// characters; both ends must use the same.
	Password string
	// BFD makes OSPF track its neighbors on this interface with BFD.
	BFD bool
}

// BGP configures a lab router's BGP sessions (eBGP only).
type BGP struct {
	// ASN is this router's AS number.
	ASN uint32
	// HoldTime and Keepalive in seconds (defaults 3 and 1, for fast failover
	// in the lab); a peer may override them.
	HoldTime, Keepalive int
	// ConnectRetry is the delay in seconds between connection attempts
	// (default 1; BIRD's own default is 120). ErrorWaitMin/Max bound the
	// delay before a session that failed is tried again (defaults 1 and 5;
	// BIRD's are 60 and 300). Both matter for how fast a restarted scheduler
	// is heard again.
	ConnectRetry               int
	ErrorWaitMin, ErrorWaitMax int
	// Schedulers are the announcing schedulers' embedded GoBGP speakers: a
	// city router's regional schedulers (only the service /32 is accepted),
	// the core router's central scheduler(s) (only the center prefix is
	// accepted). Nothing is sent to them.
	Schedulers []Peer
	// Routers are the other routers: a city router's core router(s), the
	// core router's city routers.
	Routers []Peer
}

// Peer is one BGP neighbor.
type Peer struct {
	// Name names the session: the BIRD protocol is sched_NAME for a
	// scheduler, router_NAME for a router (the prefix keeps clear of BIRD's
	// keywords such as "primary"). Letters, digits and '_'; unique.
	Name    string
	Address netip.Addr
	ASN     uint32
	// Password is the TCP-MD5 (RFC 2385) key, at most 80 characters;
	// empty: none.
	Password string
	// Passive: wait for the peer to connect (the scheduler's GoBGP is
	// active by default, so a router can be passive toward it).
	Passive bool
	// Multihop is the TTL for a peer that is not directly connected
	// (0: directly connected, the default).
	Multihop int
	// HoldTime and Keepalive override BGP.HoldTime and BGP.Keepalive.
	HoldTime, Keepalive int
	// BFD makes the session follow a BFD session to the peer (off by
	// default; GoBGP does not speak BFD).
	BFD bool
}

// BFD timers.
type BFD struct {
	// IntervalMS is the minimal transmit and receive interval in
	// milliseconds (default 100); Multiplier the detection multiplier
	// (default 3).
	IntervalMS int
	Multiplier int
}

//go:embed templates/*.tmpl
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"q": quote,
}).ParseFS(templateFS, "templates/*.tmpl"))

// quote renders a string for a BIRD or FRR config; validation has already
// refused quotes, backslashes and control characters.
func quote(s string) string { return `"` + s + `"` }

// Render validates p and writes its configuration to w. Nothing is written
// when p is invalid.
func Render(w io.Writer, p Params) error {
	d, err := prepare(p)
	if err != nil {
		return err
	}
	var name string
	switch {
	case p.Daemon == BIRD && p.Role.IsHost():
		name = "bird-host.tmpl"
	case p.Daemon == BIRD:
		name = "bird-router.tmpl"
	default:
		name = "frr-host.tmpl"
	}
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, name, d); err != nil {
		return fmt.Errorf("routerconf: render %s: %w", name, err)
	}
	out := append(bytes.TrimRight(buf.Bytes(), " \t\n"), '\n')
	_, err = w.Write(out)
	return err
}

// RenderBytes is Render into a byte slice.
func RenderBytes(p Params) ([]byte, error) {
	var buf bytes.Buffer
	if err := Render(&buf, p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Validate reports every problem of p, each naming its field.
func (p Params) Validate() error {
	_, err := prepare(p)
	return err
}

// view is what the templates see: p with defaults applied and the derived
// strings computed.
type view struct {
	Params
	Title        string
	Fams         []famView // IPv4 then IPv6, those the parameters give
	Dual         bool      // both families
	HasV4, HasV6 bool
	LogBIRD      string // the BIRD log target: syslog, stderr or "path"
	LogFRR       string // the FRR log line
	AreaBIRD     string
	AreaFRR      string
	HostAddress  netip.Prefix // what the scheduler puts on anycast0
	Accept       netip.Prefix // the one prefix accepted from the schedulers
	Block        string       // CenterPrefix{bits,32}: the anycast block
	BlockMore    string       // CenterPrefix{bits+1,32}: more specifics inside it
	Ifaces       []ifaceView
	Schedulers   []peerView
	Routers      []peerView
	NeedBFD      bool
	OSPFOnRouter bool
}

// famView is one address family's part of a configuration.
type famView struct {
	V6           bool
	Suffix       string // of the family's filters and protocols: "" for IPv4, "6"
	Channel      string // the BIRD channel: ipv4, ipv6
	First        bool   // the first family rendered (comments are written once)
	ServiceIP    netip.Addr
	CenterPrefix netip.Prefix
	HostAddress  netip.Prefix
	Accept       netip.Prefix
	Block        string
	BlockMore    string
	Ifaces       []ifaceView
	Schedulers   []peerView // the family's peers
	Routers      []peerView
}

type ifaceView struct {
	OSPFInterface
	PTP bool
	V6  bool // OSPFv3 (its authentication is HMAC-SHA, RFC 7166)
}

type peerView struct {
	Peer
	Hold, Keep int
	Suffix     string // the peer's family, as famView.Suffix
}

var (
	protoName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	hostName  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)
	ifName    = regexp.MustCompile(`^[A-Za-z0-9._@-]+$`)
	ifPattern = regexp.MustCompile(`^[A-Za-z0-9._@*?-]+$`)
)

// secretOK accepts printable ASCII without quotes, backslashes or blanks
// (so that neither BIRD's strings nor FRR's tokens need escaping).
func secretOK(s string) bool {
	for _, r := range s {
		if r <= ' ' || r > '~' || r == '"' || r == '\\' || r == '\'' || r == '#' || r == '!' {
			return false
		}
	}
	return true
}

type errs []error

func (e *errs) add(field, format string, args ...any) {
	*e = append(*e, fmt.Errorf("routerconf: %s: %s", field, fmt.Sprintf(format, args...)))
}

func prepare(p Params) (*view, error) {
	var e errs
	d := &view{Params: p}

	switch p.Role {
	case RoleRegional, RoleCentral, RoleCityRouter, RoleCoreRouter:
	case "":
		e.add("role", "missing (one of regional, central, city-router, core-router)")
	default:
		e.add("role", "unknown role %q (one of regional, central, city-router, core-router)", p.Role)
	}
	switch p.Daemon {
	case BIRD:
	case FRR:
		if p.Role != "" && !p.Role.IsHost() {
			e.add("daemon", "the FRR templates are for the scheduler hosts (regional, central); the %s is BIRD only", p.Role)
		}
	case "":
		e.add("daemon", "missing (bird or frr)")
	default:
		e.add("daemon", "unknown daemon %q (bird or frr)", p.Daemon)
	}
	if p.Hostname != "" && !hostName.MatchString(p.Hostname) {
		e.add("hostname", "%q is not a host name (letters, digits, '.', '-')", p.Hostname)
	}
	if !p.RouterID.IsValid() {
		e.add("router_id", "missing")
	} else if !p.RouterID.Is4() || p.RouterID.IsUnspecified() {
		e.add("router_id", "%s is not a usable IPv4 address", p.RouterID)
	}

	// The anycast addresses, one pair per family.
	give4 := p.ServiceIP.IsValid() || p.CenterPrefix.IsValid()
	give6 := p.ServiceIP6.IsValid() || p.CenterPrefix6.IsValid()
	if give4 || !give6 {
		if f, ok := anycastPair(&e, p.Role, false, p.ServiceIP, p.CenterPrefix); ok {
			d.Fams = append(d.Fams, f)
		}
	}
	if give6 {
		if f, ok := anycastPair(&e, p.Role, true, p.ServiceIP6, p.CenterPrefix6); ok {
			d.Fams = append(d.Fams, f)
		}
	}
	if len(d.Fams) > 0 {
		d.Fams[0].First = true
		f := d.Fams[0]
		d.Block, d.BlockMore, d.HostAddress, d.Accept = f.Block, f.BlockMore, f.HostAddress, f.Accept
		d.CenterPrefix, d.ServiceIP = f.CenterPrefix, f.ServiceIP
	}
	d.Dual = len(d.Fams) == 2
	for _, f := range d.Fams {
		d.HasV4, d.HasV6 = d.HasV4 || !f.V6, d.HasV6 || f.V6
	}

	// Logging.
	switch {
	case p.Log == "" || p.Log == "syslog":
		d.LogBIRD, d.LogFRR = "syslog", "log syslog informational"
	case p.Log == "stderr":
		if p.Daemon == FRR {
			e.add("log", `"stderr" is for a foreground BIRD; FRR logs to syslog or a file`)
		}
		d.LogBIRD, d.LogFRR = "stderr", "log stdout informational"
	case strings.HasPrefix(p.Log, "/") && secretOK(p.Log):
		d.LogBIRD, d.LogFRR = quote(p.Log), "log file "+p.Log+" informational"
	default:
		e.add("log", `%q: want "syslog", "stderr" or an absolute path without blanks or quotes`, p.Log)
	}

	// OSPF.
	o := &d.OSPF
	o.Interfaces = nil // rebuilt into d.Ifaces
	if o.Hello == 0 {
		o.Hello = defaultHello
	}
	if o.Dead == 0 {
		o.Dead = defaultDead
	}
	checkTimers(&e, "ospf", o.Hello, o.Dead)
	d.AreaBIRD = fmt.Sprint(p.OSPF.Area)
	d.AreaFRR = netip.AddrFrom4([4]byte{byte(p.OSPF.Area >> 24), byte(p.OSPF.Area >> 16), byte(p.OSPF.Area >> 8), byte(p.OSPF.Area)}).String()
	if p.Role.IsHost() {
		if o.Anycast == "" {
			o.Anycast = defaultIface
		}
		if !ifName.MatchString(o.Anycast) || len(o.Anycast) > 15 {
			e.add("ospf.anycast", "%q is not an interface name", o.Anycast)
		}
		if o.StubCost == 0 {
			o.StubCost = defaultCost
		}
		if o.StubCost < 1 || o.StubCost > 65535 {
			e.add("ospf.stub_cost", "%d not in 1..65535", o.StubCost)
		}
		if len(p.OSPF.Interfaces) == 0 {
			e.add("ospf.interfaces", "a %s host needs at least one uplink interface", p.Role)
		}
	} else {
		if o.Anycast != "" || o.StubCost != 0 || o.InstallRoutes {
			e.add("ospf", "anycast, stub_cost and install_routes are for the scheduler hosts, not a %s", p.Role)
		}
		d.OSPFOnRouter = len(p.OSPF.Interfaces) > 0
	}
	seen := map[string]bool{}
	for i, in := range p.OSPF.Interfaces {
		f := fmt.Sprintf("ospf.interfaces[%d]", i)
		re := ifName
		if p.Daemon == BIRD {
			re = ifPattern
		}
		switch {
		case in.Name == "":
			e.add(f+".name", "missing")
		case !re.MatchString(in.Name) || len(in.Name) > 15:
			e.add(f+".name", "%q is not an interface name", in.Name)
		case seen[in.Name]:
			e.add(f+".name", "%q listed twice", in.Name)
		case p.Role.IsHost() && in.Name == o.Anycast:
			e.add(f+".name", "%q is the anycast stub interface, not an uplink", in.Name)
		}
		seen[in.Name] = true
		switch in.Type {
		case "":
			in.Type = Broadcast
		case Broadcast, PointToPoint:
		default:
			e.add(f+".type", "%q: want %q or %q", in.Type, Broadcast, PointToPoint)
		}
		if in.Cost == 0 {
			in.Cost = defaultCost
		}
		if in.Cost < 1 || in.Cost > 65535 {
			e.add(f+".cost", "%d not in 1..65535", in.Cost)
		}
		if in.Hello == 0 {
			in.Hello = o.Hello
		}
		if in.Dead == 0 {
			in.Dead = o.Dead
		}
		checkTimers(&e, f, in.Hello, in.Dead)
		if in.Password != "" && (len(in.Password) > 16 || !secretOK(in.Password)) {
			e.add(f+".password", "want at most 16 printable characters without blanks, quotes, backslashes, '#' or '!'")
		}
		d.NeedBFD = d.NeedBFD || in.BFD
		d.Ifaces = append(d.Ifaces, ifaceView{OSPFInterface: in, PTP: in.Type == PointToPoint})
		for i := range d.Fams {
			d.Fams[i].Ifaces = append(d.Fams[i].Ifaces, ifaceView{OSPFInterface: in, PTP: in.Type == PointToPoint, V6: d.Fams[i].V6})
		}
	}

	// BGP.
	b := &d.BGP
	if p.Role.IsHost() {
		if p.BGP.ASN != 0 || len(p.BGP.Schedulers) > 0 || len(p.BGP.Routers) > 0 {
			e.add("bgp", "a %s host in OSPF mode has no BGP here (in BGP mode the scheduler speaks BGP itself)", p.Role)
		}
	} else {
		if p.BGP.ASN == 0 {
			e.add("bgp.asn", "missing")
		}
		setDefault(&b.HoldTime, defaultHold)
		setDefault(&b.Keepalive, defaultKeep)
		setDefault(&b.ConnectRetry, defaultRetry)
		setDefault(&b.ErrorWaitMin, defaultErrMin)
		setDefault(&b.ErrorWaitMax, defaultErrMax)
		checkBGPTimers(&e, "bgp", b.HoldTime, b.Keepalive)
		if b.ConnectRetry < 1 || b.ConnectRetry > 65535 {
			e.add("bgp.connect_retry", "%d not in 1..65535", b.ConnectRetry)
		}
		if b.ErrorWaitMin < 1 || b.ErrorWaitMax < b.ErrorWaitMin {
			e.add("bgp.error_wait", "want 1 <= min (%d) <= max (%d)", b.ErrorWaitMin, b.ErrorWaitMax)
		}
		other := "city routers"
		if p.Role == RoleCityRouter {
			other = "core router(s)"
		}
		if len(p.BGP.Routers) == 0 {
			e.add("bgp.routers", "a %s needs its %s", p.Role, other)
		}
		if len(p.BGP.Schedulers) == 0 && len(p.OSPF.Interfaces) == 0 {
			e.add("bgp.schedulers", "a %s needs scheduler peers or OSPF interfaces toward the scheduler hosts", p.Role)
		}
		names := map[string]bool{}
		addrs := map[netip.Addr]bool{}
		peers := func(field string, list []Peer) []peerView {
			var out []peerView
			for i, pr := range list {
				f := fmt.Sprintf("%s[%d]", field, i)
				switch {
				case pr.Name == "":
					e.add(f+".name", "missing")
				case !protoName.MatchString(pr.Name) || len(pr.Name) > 60:
					e.add(f+".name", "%q: want letters, digits or '_'", pr.Name)
				case names[pr.Name]:
					e.add(f+".name", "%q used twice", pr.Name)
				}
				names[pr.Name] = true
				fam := -1
				switch {
				case !pr.Address.IsValid():
					e.add(f+".address", "missing")
				case pr.Address.Is4In6() || pr.Address.IsUnspecified() || pr.Address.IsMulticast() || pr.Address.IsLinkLocalUnicast():
					e.add(f+".address", "%s is not a usable IPv4 or IPv6 address", pr.Address)
				case addrs[pr.Address]:
					e.add(f+".address", "%s used by two peers", pr.Address)
				default:
					fam = slices.IndexFunc(d.Fams, func(fv famView) bool { return fv.V6 == pr.Address.Is6() })
					if fam < 0 && len(d.Fams) > 0 {
						e.add(f+".address", "%s: no anycast pair of its family is given (service_ip%s, center_prefix%s): each family's routes travel over sessions of that family", pr.Address, map[bool]string{true: "6"}[pr.Address.Is6()], map[bool]string{true: "6"}[pr.Address.Is6()])
					}
				}
				addrs[pr.Address] = true
				switch {
				case pr.ASN == 0:
					e.add(f+".asn", "missing")
				case pr.ASN == p.BGP.ASN:
					e.add(f+".asn", "%d is our own AS: only eBGP sessions are supported", pr.ASN)
				}
				if pr.Password != "" && (len(pr.Password) > 80 || !secretOK(pr.Password)) {
					e.add(f+".password", "want at most 80 printable characters without blanks, quotes, backslashes, '#' or '!'")
				}
				if pr.Multihop < 0 || pr.Multihop > 255 {
					e.add(f+".multihop", "%d not in 0..255", pr.Multihop)
				}
				v := peerView{Peer: pr, Hold: pr.HoldTime, Keep: pr.Keepalive}
				setDefault(&v.Hold, b.HoldTime)
				setDefault(&v.Keep, b.Keepalive)
				if pr.HoldTime != 0 || pr.Keepalive != 0 {
					checkBGPTimers(&e, f, v.Hold, v.Keep)
				}
				d.NeedBFD = d.NeedBFD || pr.BFD
				if fam >= 0 {
					v.Suffix = d.Fams[fam].Suffix
				}
				out = append(out, v)
			}
			return out
		}
		d.Schedulers = peers("bgp.schedulers", p.BGP.Schedulers)
		d.Routers = peers("bgp.routers", p.BGP.Routers)
		for i := range d.Fams {
			for _, pv := range d.Schedulers {
				if pv.Suffix == d.Fams[i].Suffix && pv.Address.Is6() == d.Fams[i].V6 {
					d.Fams[i].Schedulers = append(d.Fams[i].Schedulers, pv)
				}
			}
			for _, pv := range d.Routers {
				if pv.Suffix == d.Fams[i].Suffix && pv.Address.Is6() == d.Fams[i].V6 {
					d.Fams[i].Routers = append(d.Fams[i].Routers, pv)
				}
			}
		}
	}

	// BFD.
	setDefault(&d.BFD.IntervalMS, defaultBFDInt)
	setDefault(&d.BFD.Multiplier, defaultBFDMul)
	if d.BFD.IntervalMS < 10 || d.BFD.IntervalMS > 60000 {
		e.add("bfd.interval_ms", "%d not in 10..60000", d.BFD.IntervalMS)
	}
	if d.BFD.Multiplier < 1 || d.BFD.Multiplier > 255 {
		e.add("bfd.multiplier", "%d not in 1..255", d.BFD.Multiplier)
	}

	if len(e) > 0 {
		return nil, errors.Join(e...)
	}
	d.Title = titles[p.Role]
	return d, nil
}

var titles = map[Role]string{
	RoleRegional:   "regional scheduler host, OSPF mode",
	RoleCentral:    "central scheduler host, OSPF mode",
	RoleCityRouter: "lab city router",
	RoleCoreRouter: "lab province core router",
}

// anycastPair checks one family's service address and aggregate (fields
// service_ip and center_prefix, with a 6 for IPv6) and derives what the
// templates need of them.
func anycastPair(e *errs, role Role, v6 bool, ip netip.Addr, prefix netip.Prefix) (famView, bool) {
	fam, sfx, bitLen, minBits := "IPv4", "", 32, 8
	if v6 {
		fam, sfx, bitLen, minBits = "IPv6", "6", 128, 16
	}
	n := len(*e)
	switch {
	case !ip.IsValid():
		e.add("service_ip"+sfx, "missing")
	case ip.Is6() != v6 || ip.Is4In6():
		e.add("service_ip"+sfx, "%s is not an %s address (IPv4 goes in service_ip, IPv6 in service_ip6)", ip, fam)
	}
	switch {
	case !prefix.IsValid():
		e.add("center_prefix"+sfx, "missing")
	case prefix.Addr().Is6() != v6:
		e.add("center_prefix"+sfx, "%s is not an %s prefix", prefix, fam)
	case prefix.Masked() != prefix:
		e.add("center_prefix"+sfx, "%s has host bits set (did you mean %s?)", prefix, prefix.Masked())
	case prefix.Bits() < minBits || prefix.Bits() >= bitLen:
		e.add("center_prefix"+sfx, "%s: the aggregate must be between /%d and /%d", prefix, minBits, bitLen-1)
	case ip.IsValid() && ip.Is6() == v6 && !prefix.Contains(ip):
		e.add("center_prefix"+sfx, "%s does not contain service_ip%s %s", prefix, sfx, ip)
	}
	if len(*e) > n {
		return famView{}, false
	}
	f := famView{V6: v6, Suffix: sfx, Channel: "ipv4", ServiceIP: ip, CenterPrefix: prefix}
	if v6 {
		f.Channel = "ipv6"
	}
	bits := prefix.Bits()
	f.Block = fmt.Sprintf("%s{%d,%d}", prefix, bits, bitLen)
	f.BlockMore = fmt.Sprintf("%s{%d,%d}", prefix, bits+1, bitLen)
	switch role {
	case RoleCentral, RoleCoreRouter:
		f.HostAddress = netip.PrefixFrom(ip, bits)
		f.Accept = prefix
	default:
		f.HostAddress = netip.PrefixFrom(ip, bitLen)
		f.Accept = f.HostAddress
	}
	return f, true
}

func setDefault(v *int, def int) {
	if *v == 0 {
		*v = def
	}
}

func checkTimers(e *errs, f string, hello, dead int) {
	if hello < 1 || hello > 65535 {
		e.add(f+".hello", "%d not in 1..65535 seconds", hello)
	}
	if dead <= hello || dead > 65535 {
		e.add(f+".dead", "%d: want more than hello (%d) and at most 65535 seconds", dead, hello)
	}
}

func checkBGPTimers(e *errs, f string, hold, keep int) {
	if hold < 3 || hold > 65535 {
		e.add(f+".hold_time", "%d not in 3..65535 seconds", hold)
	}
	if keep < 1 || keep >= hold {
		e.add(f+".keepalive", "%d: want at least 1 and less than the hold time (%d)", keep, hold)
	}
}
