package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anysched/anysched/bench/internal/host"
	"github.com/anysched/anysched/internal/testbed/lab"
)

// Results is everything a run measured.
type Results struct {
	When     time.Time `json:"when"`
	Machine  string    `json:"machine"`
	LoadAvg  string    `json:"loadavg,omitempty"` // /proc/loadavg when the run began
	Settings Settings  `json:"settings"`
	LabUp    float64   `json:"lab_up_s"` // lab start, apply and routing, seconds
	// DelayBy: what delays the city-core links ("netem", or "tun": the
	// lab's TUN links, in this process).
	DelayBy string   `json:"delay_by"`
	Samples []Sample `json:"samples"`
	// Load: per sampling interval, what the STBs of all cities did;
	// PerCity, each city's whole run.
	Load    []Bucket   `json:"load"`
	PerCity []CityLoad `json:"per_city"`
	Late    int        `json:"late"` // requests sent more than 1 s after their time
	Foreign int        `json:"foreign_namespaces"`
	Errors  []string   `json:"errors,omitempty"` // each city's first failure
	Storms  []float64  `json:"storms"`           // storm starts, seconds into the load
	// Keys: the puts under each part of the key layout during the load,
	// over KeysSpan seconds (empty if etcd could not be read).
	Keys     []KeyWrites `json:"keys,omitempty"`
	KeysSpan float64     `json:"keys_span_s,omitempty"`
}

// CityLoad is one city's STBs over the whole run.
type CityLoad struct {
	City string `json:"city"`
	Bucket
}

// runLoad starts every city's load generator in its client namespace and
// samples the province until they are done.
func runLoad(ctx context.Context, l *lab.Lab, prefix, self, dir string, set Settings, res *Results) error {
	res.DelayBy = "netem"
	if l.NoNetem {
		res.DelayBy = "tun"
	}
	keyFile, err := l.TokenKey()
	if err != nil {
		return err
	}
	smp, err := newSampler(l, prefix, dir, set)
	if err != nil {
		return err
	}
	for _, at := range storms(set.StormFirst, set.StormEvery, set.StormWindow, set.Duration) {
		res.Storms = append(res.Storms, at.Seconds())
	}
	start := time.Now().Add(3 * time.Second)
	results := make([]clientResult, len(allCities))
	errs := make([]error, len(allCities))
	var wg sync.WaitGroup
	for i, c := range set.Cities {
		var addrs []string
		for k := range set.Addrs {
			addrs = append(addrs, fmt.Sprintf("10.%d.1.%d", i+1, 100+k))
		}
		standby := ""
		for _, s := range set.Standby {
			if s == c.City {
				standby = lab.StandbyID(c.City)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, "ip", "netns", "exec", l.NS(fmt.Sprintf("c%d", i+1)), self, "client",
				"-city", c.City, "-viewers", strconv.Itoa(c.Sessions), "-start", strconv.FormatInt(start.UnixNano(), 10),
				"-duration", set.Duration.String(), "-refresh", set.Refresh.String(), "-bucket", set.Sample.String(),
				"-zap", fmt.Sprint(set.Zap), "-storm-every", set.StormEvery.String(), "-storm-first", set.StormFirst.String(),
				"-storm-share", fmt.Sprint(set.StormShare), "-storm-window", set.StormWindow.String(),
				"-seed", strconv.Itoa(i+1), "-token-key", keyFile, "-addrs", strings.Join(addrs, ","),
				"-keepalive="+strconv.FormatBool(set.KeepAlive), "-workers", strconv.Itoa(set.Workers),
				"-channels", strconv.Itoa(set.Channels), "-primary", lab.PrimaryID(c.City), "-standby", standby)
			var out, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			// One thread per generator: 16 of them must leave the cores to the province.
			cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("client %s: %v: %s", c.City, err, bytes.TrimSpace(stderr.Bytes()))
				return
			}
			errs[i] = json.Unmarshal(out.Bytes(), &results[i])
		}()
	}
	step("load: %d sessions over %d cities for %s; each asks again every %s (alloc.session_ttl %s), %.0f%% of those on another channel; storms of %.0f%% of the viewers within %s every %s from +%s",
		set.Sessions, len(allCities), set.Duration, set.Refresh, set.SessionTTL, 100*set.Zap, 100*set.StormShare, set.StormWindow, set.StormEvery, set.StormFirst)
	res.Foreign = host.ForeignNS(smp.prefix + "-")
	before, kerr := keyVersions(ctx, l.NS("core"), dir, l.EtcdEndpoints())
	if kerr != nil {
		fmt.Println("  etcd keys not read:", kerr)
	}
	k0 := time.Now()
	host.Sleep(ctx, time.Until(start))
	res.Samples = append(res.Samples, smp.take(ctx, start))
	tick := time.NewTicker(set.Sample)
	end := start.Add(set.Duration)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case now := <-tick.C:
			s := smp.take(ctx, start)
			res.Samples = append(res.Samples, s)
			res.Foreign = max(res.Foreign, host.ForeignNS(smp.prefix+"-"))
			printSample(s, set)
			if !now.Before(end) {
				tick.Stop()
				goto done
			}
		}
	}
done:
	if after, err := keyVersions(ctx, l.NS("core"), dir, l.EtcdEndpoints()); err == nil && kerr == nil {
		res.Keys, res.KeysSpan = keyWrites(before, after), time.Since(k0).Seconds()
	} else if err != nil {
		fmt.Println("  etcd keys not read:", err)
	}
	wg.Wait()
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return err
	}
	nb := 0
	for _, r := range results {
		nb = max(nb, len(r.Buckets))
	}
	res.Load = make([]Bucket, nb)
	for _, r := range results {
		cl := CityLoad{City: r.City}
		for k, b := range r.Buckets {
			res.Load[k].add(b)
			cl.add(b)
		}
		cl.Hist = nil
		res.PerCity = append(res.PerCity, cl)
		res.Late += r.Late
		if r.FirstErr != "" {
			res.Errors = append(res.Errors, r.City+": "+r.FirstErr)
		}
	}
	return nil
}

// printSample prints one line per sample as the run goes.
func printSample(s Sample, set Settings) {
	var sess, planned, solves, solveSum, timeouts float64
	for _, p := range s.Planners {
		if p.Instance == lab.CenterID {
			continue
		}
		sess += p.Sessions
		planned += p.Planned
		solves += p.Solves
		solveSum += p.SolveSum
		timeouts += p.Timeouts
	}
	var cpu, rss float64
	for _, p := range s.Procs {
		cpu += p.CPU
		rss += p.RSS
	}
	var lead EtcdSample
	for _, e := range s.Etcd {
		if e.Leader {
			lead = e
		}
	}
	mean := 0.0
	if solves > 0 {
		mean = 1000 * solveSum / solves
	}
	fmt.Printf("  +%4.0fs machine %3.0f%%  lab CPU %5.1f%% of a core, RSS %6.0f MiB  sessions %6.0f planned %6.0f  solves %3.0f mean %6.1f ms uncertified %.0f  etcd rev %.0f db %.1f MiB puts %.0f/s\n",
		s.T, s.MachineBusy, cpu, rss, sess, planned, solves, mean, timeouts, lead.Revision, lead.DBSize/(1<<20), lead.Puts/set.Sample.Seconds())
}
