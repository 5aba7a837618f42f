package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// rateLoad is HTTP keep-alive load at a fixed offered rate: h2load (over
// HTTP/1.1) with conns connections, each sending rate/conns requests per
// second, so every server is asked the same, whatever its speed. wrk has
// no fixed-rate mode; its latencies are those of a closed loop, where the
// faster server is also the more loaded one.
type rateLoad struct {
	h2load, dir string
	pin         pinning
	cpus        string
	conns       int
	rate        int    // requests per second over all connections
	host, xff   string // Host and X-Forwarded-For of every request
}

// perConn is h2load's --rps (per connection).
func (l rateLoad) perConn() int { return max(1, l.rate/l.conns) }

// offered is the rate actually asked for (a whole number per connection).
func (l rateLoad) offered() int { return l.perConn() * l.conns }

func (l rateLoad) describe(d time.Duration) string {
	s := fmt.Sprintf("h2load --h1 -c%d --rps %d -D %d (%d req/s offered over keep-alive connections)",
		l.conns, l.perConn(), secs(d), l.offered())
	if l.cpus != "" && l.pin.on() {
		s += " on CPU " + l.cpus
	}
	return s
}

func (l rateLoad) run(ctx context.Context, u string, d time.Duration) (runResult, error) {
	logFile := filepath.Join(l.dir, "h2load.log")
	_ = os.Remove(logFile) // h2load appends
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	args := []string{"--h1", "-c", strconv.Itoa(l.conns), "--rps", strconv.Itoa(l.perConn()),
		"-D", strconv.Itoa(secs(d)),
		"-H", ":authority: " + l.host, "-H", "X-Forwarded-For: " + l.xff, "--log-file", logFile, u}
	path, args := l.pin.wrap(l.cpus, l.h2load, args)
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		return runResult{}, fmt.Errorf("h2load: %w\n%s", err, out)
	}
	r, err := parseH2load(string(out))
	if err != nil {
		return r, err
	}
	f, err := os.Open(logFile)
	if err != nil {
		return r, err
	}
	defer f.Close()
	lat, bad, err := h2loadLatencies(f)
	if err != nil {
		return r, fmt.Errorf("h2load log: %w", err)
	}
	if len(lat) == 0 {
		return r, fmt.Errorf("h2load logged no request:\n%s", out)
	}
	if bad > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d answers other than 302", bad))
	}
	r.total = int64(len(lat) + bad)
	r.p50, r.p99, r.p999 = percentiles(lat)
	return r, nil
}

var (
	reH2Finished = regexp.MustCompile(`(?m)^finished in [^,]+, ([0-9.]+) req/s`)
	reH2Requests = regexp.MustCompile(`(?m)^requests: (\d+) total, \d+ started, \d+ done, \d+ succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
)

func parseH2load(out string) (runResult, error) {
	var r runResult
	m := reH2Finished.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no req/s in h2load output:\n%s", out)
	}
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	if m := reH2Requests.FindStringSubmatch(out); m != nil {
		for i, what := range []string{"", "", "failed", "errored", "timed out"} {
			if i >= 2 && m[i] != "0" {
				r.problems = append(r.problems, m[i]+" requests "+what)
			}
		}
	}
	return r, nil
}

// h2loadLatencies reads h2load's per-request log (start in µs since the
// epoch, HTTP status, µs until the end of the response, tab-separated):
// the durations of the 302 answers, and how many answers were not 302.
func h2loadLatencies(rd io.Reader) (lat []time.Duration, bad int, err error) {
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 3 {
			return nil, 0, fmt.Errorf("line %q: want 3 tab-separated columns", sc.Text())
		}
		us, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("line %q: %w", sc.Text(), err)
		}
		if f[1] != "302" {
			bad++
			continue
		}
		lat = append(lat, time.Duration(us)*time.Microsecond)
	}
	return lat, bad, sc.Err()
}

// percentiles are the 50th, 99th and 99.9th percentiles of lat (nearest
// rank), which it sorts.
func percentiles(lat []time.Duration) (p50, p99, p999 time.Duration) {
	slices.Sort(lat)
	at := func(q float64) time.Duration {
		i := int(q*float64(len(lat))+0.999999) - 1 // ceil(q*n) - 1
		return lat[min(max(i, 0), len(lat)-1)]
	}
	return at(0.50), at(0.99), at(0.999)
}
