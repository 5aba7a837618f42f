package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// profileTop is the top of one CPU profile of the anysched child, as go
// tool pprof prints it.
type profileTop struct {
	flat, cum  string
	components []component
	total      time.Duration // samples in the profile
}

// component is the cumulative CPU time of one function of interest.
type component struct {
	what, fn string
	cum      time.Duration
}

// profiled runs load while the anysched child takes a CPU profile of
// itself, then prints the profile's top entries by flat and by cumulative
// time. The profile file is temporary unless -profile-dir names a
// directory (github.com/google/pprof is not a module dependency, so the go
// command's pprof reads it).
func profiled(ctx context.Context, a *anyschedProc, name string, o opts, parts [][2]string, load func() error) (*profileTop, error) {
	n := o.topN
	dir, err := os.MkdirTemp("", "frontends-prof-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, name+".pprof")
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return nil, err
		}
		path = filepath.Join(o.profileDir, name+".pprof")
	}
	wait := a.profileTo(ctx, time.Duration(secs(o.duration))*time.Second, path)
	lerr := load()
	if err := wait(); err != nil {
		return nil, err
	}
	if lerr != nil {
		return nil, lerr
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("go command not on PATH, cannot read the profile: %w", err)
	}
	top := func(extra ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		args := append([]string{"tool", "pprof", "-top", "-nodecount=" + strconv.Itoa(n)}, extra...)
		out, err := exec.CommandContext(ctx, goCmd, append(args, path)...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go tool pprof: %w\n%s", err, out)
		}
		return trimPprof(string(out)), nil
	}
	var p profileTop
	if p.flat, err = top(); err != nil {
		return nil, err
	}
	if p.cum, err = top("-cum"); err != nil {
		return nil, err
	}
	all, err := top("-cum", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0")
	if err != nil {
		return nil, err
	}
	cums, total := parseTop(all)
	p.total = total
	for _, part := range parts {
		p.components = append(p.components, component{what: part[0], fn: part[1], cum: cums[part[1]]})
	}
	return &p, nil
}

// parseTop reads pprof -top output into cumulative time by function, and
// the profile's total sample time.
func parseTop(s string) (map[string]time.Duration, time.Duration) {
	cums := map[string]time.Duration{}
	var total time.Duration
	for _, l := range strings.Split(s, "\n") {
		if _, rest, ok := strings.Cut(l, "Total samples = "); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				total, _ = time.ParseDuration(f[0])
			}
			continue
		}
		f := strings.Fields(l)
		if len(f) < 6 || !strings.HasSuffix(f[4], "%") {
			continue
		}
		d, err := time.ParseDuration(f[3])
		if err != nil {
			continue
		}
		name := strings.TrimSuffix(strings.Join(f[5:], " "), " (inline)")
		cums[name] = max(cums[name], d)
	}
	return cums, total
}

// share is d as a percentage of the profile's total.
func (p *profileTop) share(d time.Duration) float64 {
	if p.total <= 0 {
		return 0
	}
	return 100 * float64(d) / float64(p.total)
}

// trimPprof drops the lines of pprof's header that only name the file and
// the time, and shortens the module path in function names.
func trimPprof(s string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Time:") {
			continue
		}
		out = append(out, strings.ReplaceAll(l, "github.com/anysched/anysched/", ""))
	}
	return strings.Join(out, "\n")
}
