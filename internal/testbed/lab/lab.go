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
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/sdwatch"
	"github.com/anysched/anysched/internal/testbed/tunlink"
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
	// SchedulerBin, if set, is where central-scheduler and
	// regional-scheduler come from instead of Bin: another build's, such
	// as the previous release's for an upgrade (upgrade.go). The tools
	// (schedctl, lab) still come from Bin.
	SchedulerBin string
	// Edges: per city a namespace with three media edges (bin/lab edge),
	// the city's two live servers and its VOD server, which the topology
	// points at, probed by a checker embedded in each regional scheduler.
	// Without them the servers exist only in the topology.
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
	// QoE: the service selects by QoE allocation (internal/allocation/qoe): the servers get
	// capacities, the regional schedulers require viewer tokens signed with
	// the lab's key (TokenKey) and re-solve their city every 2 s.
	QoE bool
	// AllocPeriod and SessionTTL, with QoE: the planners' alloc.period and
	// alloc.session_ttl (the center's too); zero keeps the lab's short 2 s
	// and 4 s, which tests need and a province-scale benchmark cannot
	// afford (every session re-asking every few seconds).
	AllocPeriod, SessionTTL time.Duration
	// EtcdMaxHistory is the center's etcd.housekeeping.max_history, how
	// long etcd keeps its history; zero: an hour, which chaos runs need
	// (production keeps five minutes).
	EtcdMaxHistory time.Duration
	// Outlier turns on passive outlier ejection in every scheduler with
	// short lab timings (OutlierConfig): an STB that asks again for the same
	// channel soon after a redirect counts as a failure of that server.
	// Off by default: a test's request loop asking for one channel from one
	// address again and again would look like failures.
	Outlier bool
	// EtcdIdentities are more etcd users to provision (certificate CNs,
	// etcdauth identities) than the lab's daemons: a test's own, such as a
	// rogue checker's (EtcdClientAs connects as one).
	EtcdIdentities []string
	// Watchdog is the schedulers' watchdog interval under the lab's
	// supervisor (internal/testbed/sdwatch), as WatchdogSec in the deploy
	// kit's units: a scheduler silent that long is killed (SIGKILL) and
	// cleaned up (--cleanup, the units' ExecStopPost); restarting it is the
	// test's. Zero: the units' 800 ms; negative: no watchdog.
	Watchdog time.Duration
	// DualStack gives every link, router and scheduler IPv6 beside IPv4
	// (ULA addresses, see network): the province gets ServiceIP6 and
	// CenterPrefix6, each city's STBs an IPv6 address in its zone, the
	// routers an IPv6 BGP session (and OSPFv3) beside each IPv4 one, and
	// every scheduler announces both families.
	DualStack bool
	// IPv6Only are cities (by index) of a dual-stack lab with no IPv4 at
	// all: their links, STBs and scheduler have IPv6 alone, the scheduler
	// announces the /128 alone (announce.families [ipv6]) over an IPv6
	// session and reaches the center's etcd over IPv6 (a relay in the
	// center's namespace: the embedded etcd listens on IPv4). Needs
	// DualStack and the center's embedded etcd; not with Edges. Without
	// netem their city-core link is not delayed (the TUN links are IPv4).
	IPv6Only map[int]bool
	// Topology, if set, amends the generated topology (overflow
	// thresholds, labels, ...) before it is validated and written.
	Topology func(*topology.Topology)
	Dir      string // work directory (configs, logs)
	Logger   *slog.Logger
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
	creds   *creds // the lab's CA and certificates (pki.go)
	mu      sync.Mutex
	Topo    *topology.Topology
}

// Proc is one daemon inside a namespace.
type Proc struct {
	Name string
	NS   string
	args []string
	log  string
	// watched: a scheduler, under the lab's watchdog.
	watched bool
	runs    int // started so far: each run has its own notification socket

	mu   sync.Mutex // the current run's, replaced by a restart while chaos goroutines read them
	cmd  *exec.Cmd
	done chan struct{}
	// watch is the run's watchdog; watchEnd is closed once it has
	// returned, after killing and cleaning up if it fired.
	watch    *sdwatch.Watch
	watchEnd chan struct{}
}

// run is the current run's process, exit channel and watchdog.
func (p *Proc) run() (*exec.Cmd, chan struct{}, *sdwatch.Watch, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done, p.watch, p.watchEnd
}

// ServiceIP is the Anycast address of every lab.
var ServiceIP = netip.MustParseAddr("198.18.0.1")

// CenterPrefix is the center's aggregate.
var CenterPrefix = netip.MustParsePrefix("198.18.0.0/26")

// ServiceIP6 and CenterPrefix6 are a dual-stack lab's IPv6 service address
// and aggregate (documentation space, outside the links' fd00::/16).
var (
	ServiceIP6    = netip.MustParseAddr("2001:db8:a::1")
	CenterPrefix6 = netip.MustParsePrefix("2001:db8:a::/48")
)

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
	defer func() {
		if err != nil {
			err = fmt.Errorf("lab: %w", err)
		}
	}()
	if len(o.Cities) == 0 || len(o.Cities) > 16 {
		return nil, errors.New("1 to 16 cities")
	}
	if o.EtcdMembers < 0 || o.EtcdMembers > 5 || (o.EtcdMembers > 1 && o.EtcdMembers%2 == 0) {
		return nil, fmt.Errorf("%d etcd members; want 1 (the center's embedded etcd), 3 or 5", o.EtcdMembers)
	}
	if len(o.IPv6Only) > 0 && (!o.DualStack || o.EtcdMembers > 1 || o.Edges) {
		return nil, errors.New("IPv6-only cities need DualStack and the center's embedded etcd, and have no edges")
	}
	switch o.EdgeServer {
	case "", EdgeLab, EdgeNginx:
	default:
		return nil, fmt.Errorf("edge server %q is not one of %s, %s", o.EdgeServer, EdgeLab, EdgeNginx)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	l = &Lab{o: o, procs: map[string]*Proc{}, delays: LinkDelays(o)}
	if l.creds, err = newCreds(o.Dir); err != nil {
		return nil, err
	}
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
			for _, host := range edgeHosts() {
				addr := fmt.Sprintf("10.%d.4.%d:8080", i+1, host)
				name := EdgeName(i, host)
				cmd := []string{filepath.Join(o.Bin, "lab"), "edge", "--listen", addr, "--fail-file", l.failFile(name)}
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
	if l.clusterSize() > 0 {
		if err := l.provisionEtcd(ctx); err != nil {
			return l, err
		}
	}
	if err := l.StartCenter(); err != nil {
		return l, err
	}
	if len(o.IPv6Only) > 0 {
		if err := l.start("etcd-relay6", "ctr", filepath.Join(o.Bin, "lab"), "tcp-proxy", "--listen", etcdProxy6, "--to", "10.0.0.2:2379"); err != nil {
			return l, err
		}
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

// Request sends one STB request from city i's client namespace to the
// Anycast address and returns which scheduler answered (X-Anysched-Instance)
// and the HTTP status. The STB gives up after 2 s.
func (l *Lab) Request(ctx context.Context, i int) (instance string, status int, err error) {
	return l.request(ctx, i, "2", false)
}

// RequestFamily is Request over IPv4 or (v6) IPv6: curl -6 to ServiceIP6
// from the client namespace's IPv6 address (a dual-stack lab).
func (l *Lab) RequestFamily(ctx context.Context, i int, v6 bool) (instance string, status int, err error) {
	return l.request(ctx, i, "2", v6)
}

// Probe is Request with a 0.5 s limit, for measuring convergence: a request
// caught by a frozen scheduler must not hide the moment the routers moved.
func (l *Lab) Probe(ctx context.Context, i int) (instance string, status int, err error) {
	return l.request(ctx, i, "0.5", false)
}

// ProbeFamily is Probe over IPv4 or (v6) IPv6.
func (l *Lab) ProbeFamily(ctx context.Context, i int, v6 bool) (instance string, status int, err error) {
	return l.request(ctx, i, "0.5", v6)
}

// RedirectFamily is Redirect over IPv4 or (v6) IPv6 (curl -4/-6 from the
// client namespace).
func (l *Lab) RedirectFamily(ctx context.Context, i int, v6 bool) (string, error) {
	var loc string
	_, _, err := l.do(ctx, i, "2", v6, "%{redirect_url}", &loc)
	return loc, err
}

func (l *Lab) request(ctx context.Context, i int, maxTime string, v6 bool) (instance string, status int, err error) {
	return l.do(ctx, i, maxTime, v6, "", nil)
}

// do sends one STB request; with extra (a curl -w variable), its value is
// written to *into.
func (l *Lab) do(ctx context.Context, i int, maxTime string, v6 bool, extra string, into *string) (instance string, status int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	target, family := "http://"+ServiceIP.String()+"/ch1/index.m3u8", "-4"
	if v6 {
		target, family = "http://["+ServiceIP6.String()+"]/ch1/index.m3u8", "-6"
	}
	if l.o.QoE { // the regional schedulers require a viewer token
		tok, err := l.probeToken()
		if err != nil {
			return "", 0, err
		}
		target += "?token=" + tok
	}
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", l.nsName(fmt.Sprintf("c%d", i+1)),
		"curl", family, "-g", "-s", "-o", "/dev/null", "--max-time", maxTime, "-H", "Host: live.iptv.example",
		"-w", "%{http_code} %header{x-anysched-instance} "+extra, target).Output()
	if err != nil {
		return "", 0, fmt.Errorf("curl: %w", err)
	}
	var code int
	var inst string
	_, _ = fmt.Sscanf(string(out), "%d %s", &code, &inst) // nothing read: code 0, which callers treat as no answer
	if into != nil {
		f := strings.Fields(string(out))
		*into = f[len(f)-1]
		if len(f) < 3 {
			*into = ""
		}
	}
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
func Attach(o Options) *Lab {
	return &Lab{o: o, procs: map[string]*Proc{}, delays: LinkDelays(o), creds: attachCreds(o.Dir)}
}

// NS returns the full name of a lab namespace ("ctr", "c1", "r1", ...).
func (l *Lab) NS(short string) string { return l.nsName(short) }

// Dir is the lab's work directory.
func (l *Lab) Dir() string { return l.o.Dir }

// Query is one STB request a test sends.
type Query struct {
	// From is the STB's address: one of the city's client addresses
	// (AddClients); zero: the client namespace's own, 10.<i+1>.1.2.
	From netip.Addr
	Host string // zero: the live service's hostname
	Path string // zero: /ch1/index.m3u8
}

// Answer is what a scheduler answered an STB.
type Answer struct {
	Status   int
	Location string // the redirect target
	Instance string // X-Anysched-Instance: which scheduler answered
	Result   string // X-Anysched-Result: CZ, FALLBACK, OVERFLOW, ...
}

// Ask sends one STB request from city i's client namespace to the Anycast
// address, asking for the debug headers, and returns the answer. The STB
// gives up after 2 s.
func (l *Lab) Ask(ctx context.Context, i int, q Query) (Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if q.Host == "" {
		q.Host = topogen.Hostname
	}
	if q.Path == "" {
		q.Path = "/ch1/index.m3u8"
	}
	target := "http://" + ServiceIP.String() + q.Path
	if l.o.QoE {
		tok, err := l.probeToken()
		if err != nil {
			return Answer{}, err
		}
		target += "?token=" + tok
	}
	args := []string{"netns", "exec", l.nsName(fmt.Sprintf("c%d", i+1)), "curl", "-s", "-o", "/dev/null", "--max-time", "2",
		"-H", "Host: " + q.Host, "-H", "X-Anysched-Debug: 1",
		"-w", "%{http_code} %header{x-anysched-instance} %header{x-anysched-result} %{redirect_url}"}
	if q.From.IsValid() {
		args = append(args, "--interface", q.From.String())
	}
	out, err := exec.CommandContext(ctx, "ip", append(args, target)...).Output()
	if err != nil {
		return Answer{}, fmt.Errorf("curl from %v: %w", q.From, err)
	}
	// Fields in a fixed order, an empty one between two spaces.
	var a Answer
	f := strings.SplitN(string(out), " ", 4)
	_, _ = fmt.Sscanf(f[0], "%d", &a.Status) // nothing read: status 0, no answer
	for k, dst := range []*string{&a.Instance, &a.Result, &a.Location} {
		if k+1 < len(f) {
			*dst = strings.TrimSpace(f[k+1])
		}
	}
	return a, nil
}

// AddClients gives city i's client namespace n more STB addresses,
// 10.<i+1>.1.100 onwards (in the city's zone), and returns them. Adding
// again is harmless.
func (l *Lab) AddClients(i, n int) ([]netip.Addr, error) {
	if n < 1 || n > 150 {
		return nil, fmt.Errorf("lab: %d client addresses; 1 to 150", n)
	}
	var out []netip.Addr
	for k := range n {
		a := netip.AddrFrom4([4]byte{10, byte(i + 1), 1, byte(100 + k)})
		if err := l.in(fmt.Sprintf("c%d", i+1), "addr", "replace", a.String()+"/24", "dev", "up0"); err != nil {
			return nil, fmt.Errorf("lab: %w", err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Fetch GETs url from city i's client namespace, from the STB address from
// (zero: the namespace's own), as a player fetches a playlist or segment,
// and returns the HTTP status (0 when nothing answered).
func (l *Lab) Fetch(ctx context.Context, i int, from netip.Addr, url string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	args := []string{"netns", "exec", l.nsName(fmt.Sprintf("c%d", i+1)), "curl", "-s", "-o", "/dev/null", "--max-time", "2", "-w", "%{http_code}"}
	if from.IsValid() {
		args = append(args, "--interface", from.String())
	}
	out, err := exec.CommandContext(ctx, "ip", append(args, url)...).Output()
	var code int
	_, _ = fmt.Sscanf(string(out), "%d", &code) // nothing read: code 0, the error below
	if err != nil && code == 0 {
		return 0, fmt.Errorf("curl %s: %w", url, err)
	}
	return code, nil
}

// Metrics returns what city i's primary scheduler exports on its admin
// listener (/metrics, Prometheus text).
func (l *Lab) Metrics(ctx context.Context, i int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", l.nsName(fmt.Sprintf("s%d", i+1)),
		"curl", "-sf", "--max-time", "2", "http://"+regionalAdmin+"/metrics").Output()
	if err != nil {
		return "", fmt.Errorf("metrics of %s: %w", PrimaryID(l.o.Cities[i]), err)
	}
	return string(out), nil
}

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
		if cmd, _, _, _ := p.run(); cmd != nil && !p.Wait(0) {
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
