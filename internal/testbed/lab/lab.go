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

	"github.com/anysched/anysched/internal/testbed/tunlink"
	"github.com/anysched/anysched/internal/topology"
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
	if l.clusterSize() > 0 {
		if err := l.provisionEtcd(ctx); err != nil {
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
func Attach(o Options) *Lab {
	return &Lab{o: o, procs: map[string]*Proc{}, delays: LinkDelays(o), creds: attachCreds(o.Dir)}
}

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
