package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anysched/anysched/bench/internal/host"
	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/testbed/lab"
	"github.com/anysched/anysched/netconfig"
)

// Sample is the province at one moment of the load.
type Sample struct {
	T           float64 `json:"t"`            // seconds since the load started
	MachineBusy float64 `json:"machine_busy"` // whole machine since the last sample, % of all cores
	// Procs: per daemon (and per group of the lab's helpers) CPU since
	// the last sample and RSS now.
	Procs    []ProcSample    `json:"procs"`
	Planners []PlannerSample `json:"planners"`
	Etcd     []EtcdSample    `json:"etcd"`
}

// ProcSample is one daemon's (or group's) CPU and memory.
type ProcSample struct {
	Name string  `json:"name"`
	N    int     `json:"n"`       // processes in it
	CPU  float64 `json:"cpu"`     // % of one core since the last sample
	RSS  float64 `json:"rss_mib"` // MiB now
}

// PlannerSample is one scheduler's planner, from its /metrics. Counters
// are per interval (since the last sample); gauges as they are now.
type PlannerSample struct {
	Instance  string  `json:"instance"`
	City      string  `json:"city"`
	Up        bool    `json:"up"` // its /metrics answered
	Sessions  float64 `json:"sessions"`
	Planned   float64 `json:"planned"`
	Fallback  float64 `json:"fallback"`
	Starved   float64 `json:"starved"`
	Gap       float64 `json:"gap"`
	AtDesired float64 `json:"at_desired"`
	Idle      float64 `json:"idle"`
	Solves    float64 `json:"solves"`
	SolveSum  float64 `json:"solve_sum_s"`
	// SolveHist: the interval's solves below each of SolveBuckets (cumulative).
	SolveHist []float64 `json:"solve_hist"`
	Timeouts  float64   `json:"timeouts"`
	Requests  float64   `json:"requests"` // STB requests it answered
	// EtcdWriteBytes: anysched_etcd_client_write_bytes_total's growth; -1
	// when the daemon does not export it.
	EtcdWriteBytes float64 `json:"etcd_write_bytes"`
	Heap           float64 `json:"heap_mib"` // go_memstats_heap_inuse_bytes
}

// EtcdSample is one etcd member, from its /metrics.
type EtcdSample struct {
	Member    string  `json:"member"`
	Up        bool    `json:"up"`
	Leader    bool    `json:"leader"`
	Puts      float64 `json:"puts"`       // etcd_mvcc_put_total since the last sample
	Txns      float64 `json:"txns"`       // etcd_mvcc_txn_total
	Deletes   float64 `json:"deletes"`    // etcd_mvcc_delete_total
	Proposals float64 `json:"proposals"`  // etcd_server_proposals_committed_total
	RecvBytes float64 `json:"recv_bytes"` // etcd_network_client_grpc_received_bytes_total
	SentBytes float64 `json:"sent_bytes"` // etcd_network_client_grpc_sent_bytes_total
	DBSize    float64 `json:"db_bytes"`   // etcd_mvcc_db_total_size_in_bytes
	DBInUse   float64 `json:"db_in_use_bytes"`
	Revision  float64 `json:"revision"`         // etcd_debugging_mvcc_current_revision
	Compacted float64 `json:"compact_revision"` // etcd_debugging_mvcc_compact_revision
	Keys      float64 `json:"keys"`             // etcd_debugging_mvcc_keys_total
}

// SolveBuckets are anysched_alloc_solve_duration_seconds' buckets.
var SolveBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5}

// metrics is a /metrics page: each series' value summed over its labels
// but le (histogram buckets: name|le).
type metrics map[string]float64

func parseMetrics(text string) metrics {
	m := metrics{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		key := name
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndexByte(rest, '}')
			if j < 0 {
				continue
			}
			labels := rest[1:j]
			rest = rest[j+1:]
			if k := strings.Index(labels, `le="`); k >= 0 && (k == 0 || labels[k-1] == ',') {
				le := labels[k+4:]
				if e := strings.IndexByte(le, '"'); e >= 0 {
					key = name + "|" + le[:e]
				}
			}
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		m[key] += v
	}
	return m
}

// has says whether the page exports a series.
func (m metrics) has(name string) bool { _, ok := m[name]; return ok }

// target is one /metrics endpoint, reached from inside a lab namespace.
type target struct {
	name, city, ns, url string
	client              *http.Client
}

// nsClient is an HTTP client whose connections are made inside network
// namespace ns (netconfig.InNamespace: a socket stays in the namespace it
// was made in), so this process scrapes the lab without spawning curl.
func nsClient(ns string, tlsConf *tls.Config) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := netconfig.InNamespace(ns, func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial, TLSClientConfig: tlsConf, MaxIdleConnsPerHost: 2}}
}

func (t *target) scrape(ctx context.Context) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", t.url, resp.StatusCode)
	}
	return parseMetrics(string(b)), nil
}

// sampler keeps what the next sample's differences need.
type sampler struct {
	l        *lab.Lab
	prefix   string
	planners []*target
	members  []*target
	prevM    map[string]metrics
	prevCPU  map[int]int64
	prevT    time.Time
	busy0    int64
	total0   int64
}

// newSampler finds the lab's metrics endpoints: every scheduler's admin
// listener (inside its namespace) and every etcd member's client URL
// (TLS, with the lab's root certificate, from the core's namespace).
func newSampler(l *lab.Lab, prefix, dir string, set Settings) (*sampler, error) {
	s := &sampler{l: l, prefix: prefix, prevM: map[string]metrics{}, prevCPU: map[int]int64{}}
	s.planners = append(s.planners, &target{name: lab.CenterID, ns: l.NS("ctr"), url: "http://127.0.0.1:9100/metrics"})
	for i, c := range allCities {
		s.planners = append(s.planners, &target{name: lab.PrimaryID(c), city: c, ns: l.NS(fmt.Sprintf("s%d", i+1)), url: "http://127.0.0.1:9101/metrics"})
		if slices.Contains(set.Standby, c) {
			s.planners = append(s.planners, &target{name: lab.StandbyID(c), city: c, ns: l.NS(fmt.Sprintf("t%d", i+1)), url: "http://127.0.0.1:9101/metrics"})
		}
	}
	for _, t := range s.planners {
		t.client = nsClient(t.ns, nil)
	}
	pkiDir := filepath.Join(dir, "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, etcdauth.RootUser+".pem"), filepath.Join(pkiDir, etcdauth.RootUser+"-key.pem"))
	if err != nil {
		return nil, fmt.Errorf("etcd metrics: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(pkiDir, "ca.pem"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	core := nsClient(l.NS("core"), &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12})
	for k, ep := range l.EtcdEndpoints() {
		s.members = append(s.members, &target{name: fmt.Sprintf("etcd%d", k+1), url: ep + "/metrics", client: core})
	}
	return s, nil
}

// take samples the province now; t0 is the load's start.
func (s *sampler) take(ctx context.Context, t0 time.Time) Sample {
	now := time.Now()
	dt := now.Sub(s.prevT)
	first := s.prevT.IsZero()
	smp := Sample{T: now.Sub(t0).Seconds()}
	var mu sync.Mutex
	var wg sync.WaitGroup
	pages := map[string]metrics{}
	for _, t := range append(append([]*target{}, s.planners...), s.members...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := t.scrape(ctx)
			if err == nil {
				mu.Lock()
				pages[t.name] = m
				mu.Unlock()
			}
		}()
	}
	procs := s.procs(dt, first)
	busy, total := host.MachineCPU()
	if !first && total > s.total0 {
		smp.MachineBusy = 100 * float64(busy-s.busy0) / float64(total-s.total0)
	}
	s.busy0, s.total0 = busy, total
	wg.Wait()
	smp.Procs = procs
	delta := func(name string, cur metrics, key string) float64 {
		prev, ok := s.prevM[name]
		if !ok || first {
			return 0
		}
		return max(0, cur[key]-prev[key])
	}
	for _, t := range s.planners {
		m, ok := pages[t.name]
		p := PlannerSample{Instance: t.name, City: t.city, Up: ok, EtcdWriteBytes: -1}
		if ok {
			p.Sessions, p.Planned, p.Fallback = m["anysched_alloc_sessions"], m["anysched_alloc_planned_sessions"], m["anysched_alloc_fallback_sessions"]
			p.Starved, p.Gap, p.AtDesired, p.Idle = m["anysched_alloc_starved_sessions"], m["anysched_alloc_gap_ratio"], m["anysched_alloc_at_desired_ratio"], m["anysched_alloc_idle"]
			p.Heap = m["go_memstats_heap_inuse_bytes"] / (1 << 20)
			p.Solves = delta(t.name, m, "anysched_alloc_solve_duration_seconds_count")
			p.SolveSum = delta(t.name, m, "anysched_alloc_solve_duration_seconds_sum")
			for _, le := range SolveBuckets {
				p.SolveHist = append(p.SolveHist, delta(t.name, m, "anysched_alloc_solve_duration_seconds_bucket|"+strconv.FormatFloat(le, 'g', -1, 64)))
			}
			p.Timeouts = delta(t.name, m, "anysched_alloc_uncertified_plans_total")
			p.Requests = delta(t.name, m, "anysched_requests_total")
			if m.has("anysched_etcd_client_write_bytes_total") {
				p.EtcdWriteBytes = delta(t.name, m, "anysched_etcd_client_write_bytes_total")
			}
			s.prevM[t.name] = m
		}
		smp.Planners = append(smp.Planners, p)
	}
	for _, t := range s.members {
		m, ok := pages[t.name]
		e := EtcdSample{Member: t.name, Up: ok}
		if ok {
			e.Leader = m["etcd_server_is_leader"] == 1
			e.Puts = delta(t.name, m, "etcd_mvcc_put_total")
			e.Txns = delta(t.name, m, "etcd_mvcc_txn_total")
			e.Deletes = delta(t.name, m, "etcd_mvcc_delete_total")
			e.Proposals = delta(t.name, m, "etcd_server_proposals_committed_total")
			e.RecvBytes = delta(t.name, m, "etcd_network_client_grpc_received_bytes_total")
			e.SentBytes = delta(t.name, m, "etcd_network_client_grpc_sent_bytes_total")
			e.DBSize, e.DBInUse = m["etcd_mvcc_db_total_size_in_bytes"], m["etcd_mvcc_db_total_size_in_use_in_bytes"]
			e.Revision, e.Compacted, e.Keys = m["etcd_debugging_mvcc_current_revision"], m["etcd_debugging_mvcc_compact_revision"], m["etcd_debugging_mvcc_keys_total"]
			s.prevM[t.name] = m
		}
		smp.Etcd = append(smp.Etcd, e)
	}
	s.prevT = now
	return smp
}

// procs groups the lab's processes by daemon: each scheduler and etcd
// member alone, the BIRD routers, the edges and the load generators each
// as one group.
func (s *sampler) procs(dt time.Duration, first bool) []ProcSample {
	names := host.NetNS(s.prefix + "-")
	type agg struct {
		n        int
		cpu, rss int64
	}
	groups := map[string]*agg{}
	var order []string
	cur := map[int]int64{}
	self := os.Getpid()
	for pid, p := range host.Procs() {
		short, ok := names[p.NetNS]
		if !ok && pid != self {
			continue
		}
		g := groupOf(short, p.Comm)
		if pid == self {
			g = groupDriver
		}
		if g == "" {
			continue
		}
		a := groups[g]
		if a == nil {
			a = &agg{}
			groups[g] = a
			order = append(order, g)
		}
		a.n++
		a.rss += p.RSS
		cur[pid] = p.Ticks
		if prev, ok := s.prevCPU[pid]; ok {
			a.cpu += max(0, p.Ticks-prev)
		} else if !first {
			a.cpu += p.Ticks // started since the last sample
		}
	}
	s.prevCPU = cur
	slices.SortFunc(order, func(a, b string) int { return procRank(a) - procRank(b) })
	out := make([]ProcSample, 0, len(order))
	for _, g := range order {
		a := groups[g]
		ps := ProcSample{Name: g, N: a.n, RSS: float64(a.rss) / (1 << 20)}
		if !first && dt > 0 {
			ps.CPU = host.Pct(a.cpu, dt)
		}
		out = append(out, ps)
	}
	return out
}

// Group names of the lab's helpers.
const (
	groupBIRD  = "bird"
	groupEdges = "edges"
	groupLoad  = "load generator"
	// groupDriver is this process: sampling, and with no netem the lab's
	// delayed TUN links between the cities and the core.
	groupDriver = "bench driver"
)

// groupOf names the daemon (or group) of a process in lab namespace short
// ("ctr", "s3", "etcd1", ...).
func groupOf(short, comm string) string {
	num := func(p string) int {
		n, err := strconv.Atoi(strings.TrimPrefix(short, p))
		if err != nil {
			return -1
		}
		return n
	}
	switch {
	case short == "ctr" && strings.HasPrefix(comm, "central-sched"):
		return lab.CenterID
	case strings.HasPrefix(short, "etcd") && num("etcd") > 0:
		return short
	case short == "core" || strings.HasPrefix(short, "r") && num("r") > 0:
		if comm == "bird" {
			return groupBIRD
		}
	case strings.HasPrefix(short, "s") && num("s") > 0 && num("s") <= len(allCities) && strings.HasPrefix(comm, "regional-sch"):
		return lab.PrimaryID(allCities[num("s")-1])
	case strings.HasPrefix(short, "t") && num("t") > 0 && num("t") <= len(allCities) && strings.HasPrefix(comm, "regional-sch"):
		return lab.StandbyID(allCities[num("t")-1])
	case strings.HasPrefix(short, "e") && num("e") > 0:
		return groupEdges
	case strings.HasPrefix(short, "c") && num("c") > 0 && comm != "ip" && comm != "curl":
		return groupLoad
	}
	return ""
}

// procRank orders the daemons: the center, the cities' schedulers in the
// lab's order (primary, standby), the etcd members, then the groups.
func procRank(name string) int {
	switch name {
	case lab.CenterID:
		return 0
	case groupBIRD:
		return 1000
	case groupEdges:
		return 1001
	case groupLoad:
		return 1002
	case groupDriver:
		return 1003
	}
	if strings.HasPrefix(name, "etcd") {
		n, _ := strconv.Atoi(strings.TrimPrefix(name, "etcd"))
		return 500 + n
	}
	for i, c := range allCities {
		switch name {
		case lab.PrimaryID(c):
			return 1 + 2*i
		case lab.StandbyID(c):
			return 2 + 2*i
		}
	}
	return 999
}
