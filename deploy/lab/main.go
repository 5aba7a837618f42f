// Command lab runs the anycast province network on one machine in network namespaces
// (root, iproute2, BIRD): per city a BIRD router, a regional scheduler
// announcing the service /32 over BGP and a namespace of STBs; a core router;
// the center announcing the /26 with its embedded etcd.
//
//	lab demo [--cities 4]       up, STB load (playlist and segments from the edges), drills, summary, down
//	lab up [--cities 2 | --file lab.yaml]  up, then wait for Ctrl-C and tear down
//	lab load [--load 30s]       STB load from every city of a running lab, and what the STBs saw
//	lab status                  routes, link delays and etcd members of a running lab
//	lab chaos [--duration 3m --seed 1]  faults drawn from the seed under STB load, then the invariants
//	lab down                    remove everything a lab (or a crashed one) left
//
// --etcd-cluster 3 (or etcd_cluster: 3 in the lab file) runs the province's
// etcd as a 3-member cluster, each member (lab etcd-member, started by the
// lab) in a namespace of its own on the core; 1 is the center's embedded
// etcd. Each city's link to the core gets the delay of its distance to the
// capital (netem, or TUN links the lab process delays where the kernel has
// no netem). With --qoe (the default) the service selects by QoE allocation:
// servers have capacities, the STBs are fixed viewers with signed tokens,
// and the summary shows the bitrates they got and each city's plan.
// --edge nginx (edge: nginx) runs every media edge as nginx (stub_status for
// the checkers) instead of the lab's own edge server.
//
// It uses the binaries in --bin (make build puts them in bin/).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anysched/anysched/internal/testbed/chaos"
	"github.com/anysched/anysched/internal/testbed/edge"
	"github.com/anysched/anysched/internal/testbed/lab"
	"github.com/anysched/anysched/internal/testbed/stbload"
)

// allCities is the whole sample province.
var allCities = lab.AllCities()

func main() {
	err := run(os.Args[1:], os.Stdout)
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return
	case errors.Is(err, errUsage):
		fmt.Fprint(os.Stderr, err.Error()+"\n"+usage())
		os.Exit(2)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "lab: ") { // the lab package's errors name it already
		msg = "lab: " + msg
	}
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(1)
}

// commands are lab's commands with what each does, in the order help lists
// them; etcd-member and edge are started by the lab itself, inside it.
var commands = []struct{ name, args, what string }{
	{"demo", "[--cities 4]", "up, STB load, drills, a summary, down (make demo)"},
	{"up", "[--cities 2 | --file lab.yaml]", "up, then wait for Ctrl-C and tear down"},
	{"load", "[--load 30s]", "STB load from every city of a running lab, and what the STBs saw"},
	{"status", "", "routes, link delays and etcd members of a running lab"},
	{"chaos", "[--duration 3m --seed 1]", "faults drawn from the seed under STB load, then the invariants"},
	{"down", "", "remove everything a lab (or a crashed one) left"},
	{"geoip-db", "--out FILE [--network CIDR=LAT,LON[,CITY]]", "write a small GeoIP City database (geoip.database) for a lab; no root needed"},
	{"etcd-member", "--name ... --control ...", "one member of a lab's etcd cluster (the lab starts it)"},
	{"edge", "--listen ...", "a media edge inside a lab namespace (the lab starts it)"},
	{"tcp-proxy", "--listen ... --to ...", "relay TCP connections (an IPv6-only city's way to the center's etcd; the lab starts it)"},
	{"help", "", "this text; lab COMMAND --help lists a command's flags"},
}

// errUsage marks a command line lab cannot read: usage on stderr, exit 2.
var errUsage = errors.New("lab: usage")

func usage() string {
	var b strings.Builder
	b.WriteString("usage: lab COMMAND [flags]   (root, iproute2, BIRD; the daemons from --bin, make build)\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-12s %-32s %s\n", c.name, c.args, c.what)
	}
	return b.String()
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no command", errUsage)
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage())
		return nil
	}
	if !slices.ContainsFunc(commands, func(c struct{ name, args, what string }) bool { return c.name == args[0] }) {
		return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	fs := flag.NewFlagSet("lab "+args[0], flag.ContinueOnError)
	fs.SetOutput(stdout)
	n := fs.Int("cities", 4, "cities (1-16, from the sample province)")
	prefix := fs.String("prefix", "asl", "namespace name prefix")
	bin := fs.String("bin", "bin", "directory with the built daemons")
	dir := fs.String("dir", "/tmp/anysched-lab", "work directory: configs, logs")
	load := fs.Duration("load", 40*time.Second, "demo: how long the STBs send requests")
	drill := fs.Duration("drill", 12*time.Second, "demo: how long the drill withdraws the second city's route")
	listen := fs.String("listen", "", "edge, tcp-proxy: address to serve on")
	to := fs.String("to", "", "tcp-proxy: address to relay each connection to")
	failFile := fs.String("fail-file", "", "edge: while this file exists, playlist and segment requests fail (500); health and stats still answer")
	file := fs.String("file", "", "a lab file (YAML: cities, standby, edges, edge, ospf, etcd_cluster, qoe, prefix, dir) instead of --cities")
	etcdCluster := fs.Int("etcd-cluster", 1, "etcd members: 1 (the center's embedded etcd) or 3 (a cluster, a namespace per member)")
	qoe := fs.Bool("qoe", true, "the service selects by QoE allocation; STBs are viewers with signed tokens")
	chaosFor := fs.Duration("duration", 3*time.Minute, "chaos: how long the faults and the STB load run")
	seed := fs.Uint64("seed", 1, "chaos: the seed the fault schedule and the load are drawn from (the same seed replays a run)")
	dualStack := fs.Bool("dual-stack", true, "IPv6 beside IPv4 on every link, router and scheduler; each city has IPv4 and IPv6 STBs")
	edgeServer := fs.String("edge", lab.EdgeLab, "what runs each media edge: lab (bin/lab edge, JSON load stats) or nginx (stub_status)")
	geoOut := fs.String("out", "", "geoip-db: the database file to write")
	var geoNets networkFlags
	fs.Var(&geoNets, "network", "geoip-db: a network and where it is, CIDR=LAT,LON[,CITY] (repeatable; default: three documentation networks in Wuhu, Fuyang and Anqing)")
	var member lab.MemberOptions // etcd-member: one member of the lab's cluster (started by the lab itself)
	fs.StringVar(&member.Name, "name", "", "etcd-member: member name")
	fs.StringVar(&member.Dir, "data", "", "etcd-member: data directory")
	fs.StringVar(&member.ClientListen, "client-listen", "", "etcd-member: client host:port")
	fs.StringVar(&member.PeerListen, "peer-listen", "", "etcd-member: peer host:port")
	fs.StringVar(&member.InitialCluster, "initial-cluster", "", "etcd-member: name=http://peer,...")
	fs.StringVar(&member.ControlURL, "control", "", "etcd-member: host:port of the drill control endpoint")
	fs.StringVar(&member.CertFile, "tls-cert", "", "etcd-member: the member's certificate (clients and peers)")
	fs.StringVar(&member.KeyFile, "tls-key", "", "etcd-member: the member's key")
	fs.StringVar(&member.CAFile, "tls-ca", "", "etcd-member: the CA of the client and peer certificates it accepts")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *n < 1 || *n > len(allCities) {
		return fmt.Errorf("--cities %d: want 1 to 16", *n)
	}
	if *etcdCluster != 1 && *etcdCluster != 3 {
		return fmt.Errorf("--etcd-cluster %d: want 1 or 3", *etcdCluster)
	}
	absBin, _ := filepath.Abs(*bin)
	o := lab.Options{Prefix: *prefix, Cities: allCities[:*n], Bin: absBin, Dir: *dir, DistanceDelays: true, Edges: true, EtcdMembers: *etcdCluster, QoE: *qoe, EdgeServer: *edgeServer, DualStack: *dualStack}
	if *file != "" {
		f, err := readLabFile(*file)
		if err != nil {
			return err
		}
		o.Cities, o.OSPF = f.Cities, f.OSPF
		if f.Edges != nil {
			o.Edges = *f.Edges
		}
		if f.Edge != "" {
			o.EdgeServer = f.Edge
		}
		if f.Prefix != "" {
			o.Prefix = f.Prefix
		}
		if f.Dir != "" {
			o.Dir = f.Dir
		}
		if f.EtcdCluster != 0 {
			o.EtcdMembers = f.EtcdCluster
		}
		if f.QoE != nil {
			o.QoE = *f.QoE
		}
		if f.DualStack != nil {
			o.DualStack = *f.DualStack
		}
		o.Standby = map[int]bool{}
		for _, c := range f.Standby {
			o.Standby[slices.Index(o.Cities, c)] = true
		}
	}
	switch args[0] {
	case "etcd-member": // one member of a lab's etcd cluster (started by the lab itself)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return lab.RunEtcdMember(ctx, member, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	case "edge": // a media edge inside a lab namespace (started by the lab itself)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return (&edge.Server{Listen: *listen, FailFile: *failFile}).Run(ctx)
	case "tcp-proxy": // an IPv6-only city's way to the center's etcd (started by the lab itself)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return lab.RunTCPProxy(ctx, *listen, *to)
	case "geoip-db":
		return geoipDB(*geoOut, geoNets, stdout)
	case "down":
		lab.Cleanup(o.Prefix)
		fmt.Println("lab removed")
		return nil
	case "status":
		return status(o)
	case "up":
		l, err := up(o)
		if err != nil {
			return err
		}
		defer l.Down()
		fmt.Println("lab is up; Ctrl-C tears it down")
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		<-ctx.Done()
		return nil
	case "demo":
		return demo(o, *load, *drill)
	case "chaos":
		return chaosRun(o, *seed, *chaosFor)
	case "load":
		l := lab.Attach(o)
		fmt.Printf("STB load from %d cities for %s; per second: requests, failures and who answered\n", len(o.Cities), *load)
		lv := newLive(os.Stdout, o.Cities, 1)
		lv.gens = len(families(o))
		printLoad(runLoad(l, o, *load, lv))
		return nil
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

func up(o lab.Options) (*lab.Lab, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the lab needs root (network namespaces)")
	}
	_ = os.RemoveAll(o.Dir)
	etcd := "the center's embedded etcd"
	if o.EtcdMembers > 1 {
		etcd = fmt.Sprintf("a %d-member etcd cluster", o.EtcdMembers)
	}
	step("building the province: %d cities, BIRD routers, core, center, %s (namespaces %s-*)", len(o.Cities), etcd, o.Prefix)
	l, err := lab.Up(context.Background(), o)
	if err != nil {
		return nil, err
	}
	if l.NoNetem {
		fmt.Println("  city-core link delays (this kernel has no netem: TUN links delayed by the lab process; one-way, from each city's distance to " + lab.Capital + "):")
	} else {
		fmt.Println("  city-core link delays (netem, one-way, from each city's distance to " + lab.Capital + "):")
	}
	fmt.Println("    " + lab.FormatDelays(l.LinkDelays()))
	fmt.Println("  secure configuration: etcd and the admin API on mutual TLS with the lab's CA, an etcd role per daemon,")
	fmt.Println("  every topology signed by the center and checked by every scheduler")
	step("applying the province topology through the center's admin API (schedctl shows the diff, then applies)")
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := schedctl(l, "apply", "--yes", "-f", filepath.Join(o.Dir, "topology.yaml"))
		if err == nil {
			fmt.Print(indent(applySummary(out)))
			if who, err := schedctl(l, "whoami"); err == nil {
				fmt.Print(indent("as " + strings.Join(strings.Fields(who), " ") + "\n"))
			}
			break
		}
		if time.Now().After(deadline) {
			l.Down()
			return nil, fmt.Errorf("apply: %v: %s", err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if o.DualStack {
		step("waiting until every city's IPv4 and IPv6 STBs reach their own scheduler (BGP: the city's /32 and /128 beat the center's /26 and /48)")
	} else {
		step("waiting until every city's STBs reach their own scheduler (BGP: city /32 beats the center's /26)")
	}
	for i, c := range o.Cities {
		start := time.Now()
		var took []string
		for _, f := range families(o) {
			for {
				inst, code, _ := l.RequestFamily(context.Background(), i, f.v6)
				if code == 302 && inst == lab.PrimaryID(c) {
					took = append(took, fmt.Sprintf("%s after %s", f.name, time.Since(start).Round(time.Millisecond)))
					break
				}
				if time.Since(start) > 90*time.Second {
					l.Down()
					return nil, fmt.Errorf("%s: %s STBs not answered by its scheduler (last %q %d)", c, f.name, inst, code)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		fmt.Printf("  %-10s answered by %s: %s\n", c, lab.PrimaryID(c), strings.Join(took, ", "))
	}
	return l, nil
}

func schedctl(l *lab.Lab, args ...string) (string, error) {
	bin := filepath.Join(filepath.Dir(os.Args[0]), "schedctl")
	if _, err := os.Stat(bin); err != nil {
		bin = "bin/schedctl"
	}
	argv := append([]string{"netns", "exec", l.NS("ctr"), bin}, l.SchedctlArgs()...)
	out, err := exec.Command("ip", append(argv, args...)...).CombinedOutput()
	return string(out), err
}

func step(format string, args ...any) { fmt.Printf("\n== "+format+"\n", args...) }

// applySummary keeps the summary lines of schedctl apply's output: the
// diff's totals and what was applied, not every server it lists.
func applySummary(out string) string {
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		// Section headings and their entries are indented by two spaces
		// and more; the totals and the result are not, or are "servers ...".
		if t := strings.TrimSpace(line); t != "" && (!strings.HasPrefix(line, " ") || strings.HasPrefix(t, "servers ")) {
			b.WriteString(t + "\n")
		}
	}
	return b.String()
}

func demo(o lab.Options, loadFor, drillFor time.Duration) error {
	start := time.Now()
	l, err := up(o)
	if err != nil {
		return err
	}
	defer func() {
		step("tearing the lab down")
		l.Down()
		fmt.Printf("  done in %s\n", time.Since(start).Round(time.Second))
	}()
	out, _ := schedctl(l, "status")
	fmt.Print(out)

	viewers := ""
	if o.QoE {
		viewers = fmt.Sprintf(" (%d viewers per city and family with signed tokens)", lab.QoEViewers)
	}
	fams := ""
	if o.DualStack {
		fams = " per family (IPv4 and IPv6)"
	}
	step("STB load: %d cities, 4 STBs each%s zapping every 50 ms%s, for %s", len(o.Cities), fams, viewers, loadFor)
	var results []loadResult
	loadDone := make(chan struct{})
	lv := newLive(os.Stdout, o.Cities, 5) // a line every 5 s while it runs
	lv.gens = len(families(o))
	go func() { results = runLoad(l, o, loadFor, lv); close(loadDone) }()
	time.Sleep(loadFor / 4)
	drilled := o.Cities[min(1, len(o.Cities)-1)]
	step("failover drill: %s's scheduler withdraws its route for %s (its STBs must move to the center and back)", drilled, drillFor)
	out, err = schedctl(l, "drill", "failover", "--region", drilled, "--duration", drillFor.String())
	fmt.Print(indent(out))
	if err != nil {
		fmt.Println("  drill:", err)
	}
	if o.EtcdMembers > 1 {
		step("etcd-loss drill: 2 of the %d etcd members stop for 5s (quorum lost); every scheduler keeps answering from its snapshot", o.EtcdMembers)
		out, err = schedctl(l, "drill", "etcd-loss", "--members", "2", "--duration", "5s")
	} else {
		step("etcd-loss drill: the center's etcd stops for 5s; every scheduler keeps answering from its snapshot")
		out, err = schedctl(l, "drill", "etcd-loss", "--duration", "5s")
	}
	fmt.Print(indent(out))
	if err != nil {
		fmt.Println("  drill:", err)
	}
	<-loadDone

	step("summary: what the STBs saw (answered by their city's scheduler or the center)")
	printLoad(results)
	for _, r := range results {
		step("the drill from the %s STBs' side: who answered %s's STBs, second by second", r.family, drilled)
		fmt.Print(r.live.timeline(drilled))
	}
	if o.QoE {
		step("QoE allocation: each city scheduler's plan (%d viewers per city, 2 servers of %d Mbps each)", lab.QoEViewers*len(families(o)), lab.QoEServerMbps)
		out, _ := schedctl(l, "status")
		if i := strings.Index(out, "QOE PLAN"); i >= 0 {
			plans, _, _ := strings.Cut(out[i:], "\n\n")
			fmt.Print(indent(plans))
		}
	}
	step("the audit trail: every change and drill, who made it and from where")
	if out, err := schedctl(l, "audit", "--limit", "6"); err == nil {
		fmt.Print(indent(out))
	}
	return nil
}

// family is one address family of the lab's STBs.
type family struct {
	name string // IPv4, IPv6
	v6   bool
}

// families are the lab's STB families: IPv4, and IPv6 in a dual-stack lab.
func families(o lab.Options) []family {
	if o.DualStack {
		return []family{{"IPv4", false}, {"IPv6", true}}
	}
	return []family{{"IPv4", false}}
}

// loadResult is what one family's STBs saw: each city's table, the
// totals, and their seconds (for the drill's timeline).
type loadResult struct {
	family           string
	tables           []string
	requests, failed int
	live             *live
}

// runLoad runs bin/stbload in every city's client namespace for d, once
// per family, and returns each family's outputs (their tables) and
// totals; lv gets every per-second figure as it comes.
func runLoad(l *lab.Lab, o lab.Options, d time.Duration, lv *live) []loadResult {
	var wg sync.WaitGroup
	fams := families(o)
	results := make([]loadResult, len(fams))
	var mu sync.Mutex // the totals
	for k, f := range fams {
		results[k] = loadResult{family: f.name, tables: make([]string, len(o.Cities)), live: newLive(io.Discard, o.Cities, 1)}
		scheduler := lab.ServiceIP.String() + ":80"
		if f.v6 {
			scheduler = "[" + lab.ServiceIP6.String() + "]:80"
		}
		for i, c := range o.Cities {
			wg.Add(1)
			go func() {
				defer wg.Done()
				args := []string{"netns", "exec", l.NS(fmt.Sprintf("c%d", i+1)), filepath.Join(filepath.Dir(os.Args[0]), "stbload"),
					"--topology", filepath.Join(o.Dir, "topology.yaml"), "--cities", c, "--default", scheduler,
					"--requests", "1000000", "--concurrency", "4", "--pause", "50ms", "--max-duration", d.String(), "--per-second", "--follow",
					"--seed", fmt.Sprint(i + 1 + 100*k)}
				if o.DualStack {
					args = append(args, "--family", strings.ToLower(f.name))
				}
				if o.QoE {
					key, err := l.TokenKey()
					if err != nil {
						results[k].tables[i] = err.Error()
						return
					}
					args = append(args, "--viewers", fmt.Sprint(lab.QoEViewers), "--token-key-id", lab.TokenKeyID, "--token-secret-file", key)
				}
				results[k].tables[i] = streamLoad(exec.Command("ip", args...), func(s stbload.Second) {
					lv.add(s)
					results[k].live.add(s)
					mu.Lock()
					results[k].requests += s.Requests
					results[k].failed += s.Failures
					mu.Unlock()
				})
			}()
		}
	}
	wg.Wait()
	lv.flush()
	return results
}

// printLoad prints each family's tables and a line per family with its
// totals.
func printLoad(results []loadResult) {
	for _, r := range results {
		if len(results) > 1 {
			fmt.Printf("  %s STBs:\n", r.family)
		}
		for _, t := range r.tables {
			fmt.Print(tableOnly(t))
		}
	}
	for _, r := range results {
		fmt.Printf("  %s STBs: %d requests, %d failed\n", r.family, r.requests, r.failed)
	}
}

// streamLoad runs one load generator, hands its per-second lines to add as
// they come and returns the rest of its output.
func streamLoad(cmd *exec.Cmd, add func(stbload.Second)) string {
	var rest, stderr strings.Builder // stderr is written by exec's own goroutine
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		return err.Error()
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if s, ok := stbload.ParseLine(sc.Text()); ok {
			add(s)
		} else {
			rest.WriteString(sc.Text() + "\n")
		}
	}
	if err := sc.Err(); err != nil { // keep the pipe drained, or the generator blocks
		rest.WriteString(err.Error() + "\n")
		_, _ = io.Copy(&rest, stdout)
	}
	err = cmd.Wait()
	rest.WriteString(stderr.String())
	if err != nil {
		rest.WriteString("\n" + err.Error())
	}
	return rest.String()
}

// tableOnly keeps the per-city table of stbload's output.
func tableOnly(s string) string {
	i := strings.Index(s, "CITY")
	if i < 0 {
		return s
	}
	return indent(s[i:])
}

func indent(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}

func status(o lab.Options) error {
	out, _ := exec.Command("ip", "netns", "list").Output()
	var ns []string
	for _, line := range strings.Split(string(out), "\n") {
		if name, _, _ := strings.Cut(line, " "); strings.HasPrefix(name, o.Prefix+"-") {
			ns = append(ns, name)
		}
	}
	if len(ns) == 0 {
		fmt.Println("no lab is running")
		return nil
	}
	fmt.Printf("namespaces: %s\n", strings.Join(ns, " "))
	o.EtcdMembers = 0
	for _, n := range ns {
		if strings.HasPrefix(n, o.Prefix+"-etcd") {
			o.EtcdMembers++
		}
	}
	l := lab.Attach(o)
	fmt.Println("city-core link delays (one-way, from each city's distance to " + lab.Capital + "):")
	for i, d := range l.LinkDelays() {
		b, _ := exec.Command("ip", "netns", "exec", l.NS("core"), "tc", "qdisc", "show", "dev", fmt.Sprintf("city%d", i+1)).Output()
		link, _ := exec.Command("ip", "-n", l.NS("core"), "-d", "link", "show", "dev", fmt.Sprintf("city%d", i+1)).Output()
		applied := "not applied"
		switch {
		case strings.Contains(string(b), "netem"):
			applied = "applied with netem"
		case strings.Contains(string(link), "tun"):
			applied = "applied by the lab process (TUN link)"
		}
		fmt.Printf("  %-10s %6.0f km  %5.2f ms  %s\n", d.City, d.DistanceKm, float64(d.Delay.Microseconds())/1000, applied)
	}
	if o.EtcdMembers > 1 {
		fmt.Printf("etcd cluster (%d members):\n", o.EtcdMembers)
		for _, m := range l.EtcdMembers(context.Background()) {
			state := "running"
			switch {
			case m.Error != "":
				state = m.Error
			case !m.Running && time.Now().After(m.Until):
				state = "restarting after a drill"
			case !m.Running:
				state = "stopped by a drill until " + m.Until.Local().Format(time.TimeOnly)
			}
			fmt.Printf("  %-6s %s\n", m.Name, state)
		}
	}
	for i := range o.Cities {
		sock := filepath.Join(o.Dir, fmt.Sprintf("bird-r%d.ctl", i+1))
		if _, err := os.Stat(sock); err != nil {
			continue
		}
		b, _ := exec.Command("birdc", "-s", sock, "show", "route", "for", lab.ServiceIP.String()).CombinedOutput()
		fmt.Printf("router r%d (%s):\n%s", i+1, o.Cities[i], indent(string(b)))
	}
	return nil
}

// chaosRun brings up a province for a chaos run (a standby in the first
// city, a 3-member etcd cluster, edges), runs it, tears it down and
// prints the report; it fails when an invariant did.
func chaosRun(o lab.Options, seed uint64, d time.Duration) error {
	if len(o.Cities) < 2 {
		return errors.New("chaos: at least 2 cities")
	}
	o.EtcdMembers, o.Edges = 3, true
	if o.Standby == nil {
		o.Standby = map[int]bool{0: true}
	}
	l, err := up(o)
	if err != nil {
		return err
	}
	step("chaos run: seed %d for %s (the same seed replays the schedule)", seed, d)
	rep, err := l.RunChaos(context.Background(), lab.ChaosConfig{Seed: seed, Duration: d, Out: os.Stdout})
	step("tearing the lab down")
	l.Down()
	if err != nil {
		return err
	}
	rep.Invariants = append(rep.Invariants, chaos.Expect("nothing left behind (namespaces, interfaces, addresses, routes, processes)", 1, lab.Leftovers(o.Prefix, o.Dir)))
	rep.Write(os.Stdout)
	if !rep.Pass() {
		return fmt.Errorf("chaos run with seed %d failed an invariant", seed)
	}
	return nil
}
