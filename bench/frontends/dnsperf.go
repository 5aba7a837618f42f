package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// dnsLoad is one way of loading a DNS server: the tool, where it runs, and
// the query.
type dnsLoad struct {
	tool, dnsperf, qfile string // tool: dnsperf or internal
	pin                  pinning
	cpus                 string
	threads, clients     int
	outstanding, maxQPS  int
	perQuery             bool   // dnsperf -v: every query's latency, for percentiles (with maxQPS: a fixed offered rate)
	ecs                  string // ECS prefix sent with every query; "" for none
	fam                  family // the queries' (A or AAAA) and the server's address family
	q                    *dns.Msg
}

func (l dnsLoad) describe(d time.Duration) string {
	var s string
	if l.tool == "dnsperf" {
		s = fmt.Sprintf("dnsperf -T%d -c%d -q%d -l%d", l.threads, l.clients, l.outstanding, secs(d))
		if l.maxQPS > 0 {
			s += fmt.Sprintf(" -Q%d", l.maxQPS)
		}
		if l.ecs != "" {
			s += " -e -E 8:" + ecsHex(l.q)
		}
		if l.perQuery {
			s += " -v"
		}
		if l.maxQPS > 0 {
			s += fmt.Sprintf(" (%d q/s offered, at most %d queries in flight)", l.maxQPS, l.outstanding)
		} else {
			s += fmt.Sprintf(" (closed loop, %d queries in flight)", l.outstanding)
		}
	} else {
		s = fmt.Sprintf("internal miekg UDP generator, %d clients with 1 query in flight each, %ds", l.clients, secs(d))
	}
	if l.cpus != "" && l.pin.on() {
		s += " on CPU " + l.cpus
	}
	return s
}

func (l dnsLoad) run(ctx context.Context, addr string, d time.Duration) (runResult, error) {
	if l.tool != "dnsperf" {
		return runInternalDNS(ctx, l, addr, d)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return runResult{}, err
	}
	args := []string{"-s", host, "-p", port, "-f", map[bool]string{false: "inet", true: "inet6"}[l.fam.v6], "-d", l.qfile, "-l", strconv.Itoa(secs(d)), "-c", strconv.Itoa(l.clients),
		"-T", strconv.Itoa(l.threads), "-q", strconv.Itoa(l.outstanding), "-t", "2"}
	if l.maxQPS > 0 {
		args = append(args, "-Q", strconv.Itoa(l.maxQPS))
	}
	if l.ecs != "" {
		args = append(args, "-e", "-E", "8:"+ecsHex(l.q))
	}
	if l.perQuery {
		args = append(args, "-v")
	}
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	path, args := l.pin.wrap(l.cpus, l.dnsperf, args)
	// The output goes to a file (written on the load generator's core),
	// read after the run: parsing hundreds of thousands of -v lines as they
	// come would take CPU time wherever this process runs, maybe the
	// server's core.
	outFile, err := os.CreateTemp(filepath.Dir(l.qfile), "dnsperf-*.out")
	if err != nil {
		return runResult{}, err
	}
	defer os.Remove(outFile.Name())
	defer outFile.Close()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = outFile, outFile
	if err := cmd.Run(); err != nil {
		_, _ = outFile.Seek(0, io.SeekStart)
		head, _ := io.ReadAll(io.LimitReader(outFile, 4096))
		return runResult{}, fmt.Errorf("dnsperf: %w\n%s", err, head)
	}
	if _, err := outFile.Seek(0, io.SeekStart); err != nil {
		return runResult{}, err
	}
	out, lat, err := readDNSPerf(outFile)
	if err != nil {
		return runResult{}, fmt.Errorf("dnsperf output: %w", err)
	}
	r, err := parseDNSPerf(out)
	if err != nil || !l.perQuery {
		return r, err
	}
	if len(lat) == 0 {
		return r, fmt.Errorf("dnsperf -v printed no query latency:\n%s", out)
	}
	r.p50, r.p99, r.p999 = percentiles(lat)
	return r, nil
}

// readDNSPerf reads dnsperf's standard output: the latency of every
// answered query that -v prints ("> NOERROR name type 0.000093", in
// seconds), and the rest of the text, its statistics.
func readDNSPerf(rd io.Reader) (string, []time.Duration, error) {
	var rest strings.Builder
	var lat []time.Duration
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "> ") {
			rest.WriteString(line + "\n")
			continue
		}
		f := strings.Fields(line)
		sec, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil || len(f) < 3 {
			return rest.String(), nil, fmt.Errorf("query line %q: no latency at its end", line)
		}
		lat = append(lat, time.Duration(sec*1e9))
	}
	return rest.String(), lat, sc.Err()
}

// ecsHex is the value of the query's ECS option as dnsperf -E wants it.
func ecsHex(q *dns.Msg) string {
	for _, rr := range q.Extra {
		if opt, ok := rr.(*dns.OPT); ok {
			for _, o := range opt.Option {
				if s, ok := o.(*dns.EDNS0_SUBNET); ok { // RFC 7871 §6
					addr := s.Address.To4()
					if s.Family == 2 {
						addr = s.Address.To16()
					}
					b := []byte{byte(s.Family >> 8), byte(s.Family), s.SourceNetmask, 0}
					b = append(b, addr[:(int(s.SourceNetmask)+7)/8]...)
					return hex.EncodeToString(b)
				}
			}
		}
	}
	return ""
}

var (
	reQPS       = regexp.MustCompile(`(?m)Queries per second:\s+([0-9.]+)`)
	reCompleted = regexp.MustCompile(`(?m)Queries completed:\s+(\d+)`)
	reLost      = regexp.MustCompile(`(?m)Queries lost:\s+(\d+)`)
	reAvgLat    = regexp.MustCompile(`(?m)Average Latency \(s\):\s+([0-9.]+)`)
	reRcodes    = regexp.MustCompile(`(?m)Response codes:\s+(.*)$`)
)

func parseDNSPerf(out string) (runResult, error) {
	var r runResult
	m := reQPS.FindStringSubmatch(out)
	a := reAvgLat.FindStringSubmatch(out)
	if m == nil || a == nil {
		return r, fmt.Errorf("no Queries per second / Average Latency in dnsperf output:\n%s", out)
	}
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	sec, _ := strconv.ParseFloat(a[1], 64)
	r.avg = time.Duration(sec * 1e9)
	if m := reCompleted.FindStringSubmatch(out); m != nil {
		r.total, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reLost.FindStringSubmatch(out); m != nil {
		r.lost, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reRcodes.FindStringSubmatch(out); m != nil && strings.TrimSpace(m[1]) != "" {
		if rc := strings.TrimSpace(m[1]); !strings.HasPrefix(rc, "NOERROR") || strings.Contains(rc, ",") {
			r.problems = append(r.problems, "response codes: "+rc)
		}
	}
	return r, nil
}

// runInternalDNS runs the fallback load generator in a child process on
// the load generator's CPU, so it neither shares a server's heap nor shows
// in its profile.
func runInternalDNS(ctx context.Context, l dnsLoad, addr string, d time.Duration) (runResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return runResult{}, err
	}
	d = time.Duration(secs(d)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	path, args := l.pin.wrap(l.cpus, exe, []string{"-child", "dns-load", "--", "-target", addr, "-duration", d.String(),
		"-clients", strconv.Itoa(l.clients), "-ecs", l.ecs, "-family", l.fam.name()})
	out, err := exec.CommandContext(ctx, path, args...).Output()
	if err != nil {
		return runResult{}, fmt.Errorf("internal load generator: %w", err)
	}
	var r runResult
	var sent, completed, lost, avg, p50, p99 int64
	var qps float64
	line := strings.TrimSpace(string(out))
	if _, err := fmt.Sscanf(line, "RESULT %d %d %d %f %d %d %d", &sent, &completed, &lost, &qps, &avg, &p50, &p99); err != nil {
		return r, fmt.Errorf("internal load generator printed %q: %w", line, err)
	}
	r.rps, r.total, r.lost = qps, completed, lost
	r.avg, r.p50, r.p99 = time.Duration(avg), time.Duration(p50), time.Duration(p99)
	return r, nil
}
