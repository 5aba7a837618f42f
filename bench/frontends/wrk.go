package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// wrkLoad is one way of running wrk: where, how many threads and
// connections, and whether every request asks for its own connection.
type wrkLoad struct {
	wrk, script    string
	pin            pinning
	cpus           string
	threads, conns int
	close          bool // send Connection: close: a new connection per request, as a zapping STB
}

func (l wrkLoad) args(d time.Duration) []string {
	a := []string{"-t", strconv.Itoa(l.threads), "-c", strconv.Itoa(l.conns), "-d", strconv.Itoa(secs(d)) + "s",
		"--latency", "--timeout", "2s", "-s", l.script}
	if l.close {
		a = append(a, "-H", "Connection: close")
	}
	return a
}

// describe is the command line, as the report shows it.
func (l wrkLoad) describe(d time.Duration) string {
	s := fmt.Sprintf("wrk -t%d -c%d -d%ds --latency", l.threads, l.conns, secs(d))
	if l.close {
		s += " -H 'Connection: close'"
	}
	if l.cpus != "" && l.pin.on() {
		s += " on CPU " + l.cpus
	}
	return s
}

func (l wrkLoad) run(ctx context.Context, u string, d time.Duration) (runResult, error) {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	path, args := l.pin.wrap(l.cpus, l.wrk, append(l.args(d), u))
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		return runResult{}, fmt.Errorf("wrk: %w\n%s", err, out)
	}
	return parseWrk(string(out))
}

// secs is d in whole seconds, at least 1 (wrk and dnsperf take seconds).
func secs(d time.Duration) int { return max(1, int(d.Round(time.Second)/time.Second)) }

var (
	reRPS     = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	reTotal   = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	rePct     = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+[a-z]+)\s*$`)
	reNon3xx  = regexp.MustCompile(`(?m)Non-2xx or 3xx responses:\s+(\d+)`)
	reSockErr = regexp.MustCompile(`(?m)Socket errors:\s+(.*)$`)
)

func parseWrk(out string) (runResult, error) {
	var r runResult
	m := reRPS.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec in wrk output:\n%s", out)
	}
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	if m := reTotal.FindStringSubmatch(out); m != nil {
		r.total, _ = strconv.ParseInt(m[1], 10, 64)
	}
	for _, m := range rePct.FindAllStringSubmatch(out, -1) {
		v, err := time.ParseDuration(m[2])
		if err != nil {
			return r, fmt.Errorf("wrk latency %q: %w", m[2], err)
		}
		if m[1] == "50" {
			r.p50 = v
		} else {
			r.p99 = v
		}
	}
	if r.p50 == 0 || r.p99 == 0 {
		return r, fmt.Errorf("no latency distribution in wrk output:\n%s", out)
	}
	if m := reNon3xx.FindStringSubmatch(out); m != nil {
		r.problems = append(r.problems, m[1]+" non-2xx/3xx responses")
	}
	if m := reSockErr.FindStringSubmatch(out); m != nil {
		r.problems = append(r.problems, "socket errors: "+strings.TrimSpace(m[1]))
	}
	return r, nil
}
