// Package stbload simulates set-top boxes asking schedulers where to play:
// each request comes from a client address inside one of its city's coverage
// networks (sent as X-Forwarded-For, so a scheduler that trusts the load
// generator locates it), asks for a channel drawn from a Zipf popularity, and
// records the answer: status, which scheduler answered, the result type and
// the decision time the scheduler reports (Server-Timing). The number of
// requests and the run time are bounded.
package stbload

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
)

// City is where a group of STBs lives and which scheduler its routers reach.
type City struct {
	Name      string
	Scheduler string         // host:port of the HTTP front end its STBs reach
	Networks  []netip.Prefix // client networks (the city's coverage zones)
}

// Options bound and shape a run.
type Options struct {
	Cities      []City
	Host        string // service hostname in the Host header
	Requests    int    // total, spread evenly over the cities
	Concurrency int
	MaxDuration time.Duration // the run stops at this time even if requests remain
	Channels    int           // distinct channels, Zipf(1.1) popularity
	Timeout     time.Duration // per request
	Pause       time.Duration // each STB waits this long between requests (zapping pace)
	// Follow: after the redirect, fetch the playlist and its first two
	// segments from the edge, as a player starting a channel does.
	Follow   bool
	Progress io.Writer // a line every 250 ms; nil for none
	// PerSecond, if set, gets each city's figures for every second of the
	// run as soon as the second is over (the last one, partial, at the end).
	PerSecond func(Second)
	Seed      uint64
	// Viewers: each city has this many STBs, each at a fixed address,
	// staying on its channel and zapping to another (Zipf) with probability
	// Zap per request, so a scheduler sees returning sessions (QoE
	// allocation plans for them). 0: every request is a new STB.
	Viewers int
	Zap     float64 // default 0.2
	// Token, if set, gives viewer v of a city the token it sends as
	// ?token= (a business platform's login token).
	Token func(city string, viewer int) string
	// Retries: an STB whose request fails (no answer, or a 5xx) tries again
	// through the Anycast address this many times, after 100 ms, 200 ms, ...
	// A request counts as failed only when every try failed. Negative: none.
	Retries int
}

// CitiesFromTopology returns the given cities' client networks, with each
// city's scheduler address from route (cities missing from route use def).
func CitiesFromTopology(t *topology.Topology, names []string, route map[string]string, def string) ([]City, error) {
	var out []City
	for _, n := range names {
		c := City{Name: n, Scheduler: def}
		if a, ok := route[n]; ok {
			c.Scheduler = a
		}
		for _, z := range t.Zones {
			if z.Region != n {
				continue
			}
			for _, s := range z.Networks {
				p, err := netip.ParsePrefix(s)
				if err != nil {
					return nil, fmt.Errorf("stbload: zone %s: %w", z.Name, err)
				}
				c.Networks = append(c.Networks, p)
			}
		}
		if len(c.Networks) == 0 {
			return nil, fmt.Errorf("stbload: city %q has no coverage zones in the topology", n)
		}
		out = append(out, c)
	}
	return out, nil
}

// OnlyFamily keeps the client networks of one address family (v6: IPv6)
// in each city: the STBs of an IPv4 or an IPv6 run of a dual-stack
// province. A city left without a network is an error.
func OnlyFamily(cs []City, v6 bool) ([]City, error) {
	out := make([]City, 0, len(cs))
	for _, c := range cs {
		var nets []netip.Prefix
		for _, p := range c.Networks {
			if p.Addr().Is6() == v6 {
				nets = append(nets, p)
			}
		}
		if len(nets) == 0 {
			return nil, fmt.Errorf("stbload: city %q has no client network of the family (IPv6 %v)", c.Name, v6)
		}
		c.Networks = nets
		out = append(out, c)
	}
	return out, nil
}

// CityStats is what one city's STBs saw.
type CityStats struct {
	Requests, Redirects, Failures int
	Results                       map[string]int
	AnsweredBy                    map[string]int
	Latency                       []time.Duration // request round trip
	Decide                        []time.Duration // scheduler-reported decision time
	Start                         []time.Duration // Follow: request to the second segment received
	EdgeFailures                  int             // Follow: playlist or segment not fetched
	Bitrates                      map[string]int  // redirects by the bitrate (kbps) the scheduler chose
	Retried                       int             // requests that needed more than one try
	Seconds                       []Second        // by second of the run
}

// Second is what one city's STBs saw in one second of the run (requests
// counted when they ended).
type Second struct {
	City       string
	At         int // seconds since the run started
	Requests   int
	Failures   int
	AnsweredBy map[string]int // successful answers by scheduler instance
}

// Line is s as one line: "sec=5 city=wuhu requests=75 failed=0
// by=center:60,wuhu-1:15" (ParseLine reads it back).
func (s Second) Line() string {
	by := make([]string, 0, len(s.AnsweredBy))
	for inst, n := range s.AnsweredBy {
		by = append(by, inst+":"+strconv.Itoa(n))
	}
	sort.Strings(by)
	return fmt.Sprintf("sec=%d city=%s requests=%d failed=%d by=%s", s.At, s.City, s.Requests, s.Failures, strings.Join(by, ","))
}

// ParseLine reads a Second written by Line; ok is false for other lines.
func ParseLine(line string) (s Second, ok bool) {
	if !strings.HasPrefix(line, "sec=") {
		return s, false
	}
	s.AnsweredBy = map[string]int{}
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		var err error
		switch k {
		case "sec":
			s.At, err = strconv.Atoi(v)
		case "city":
			s.City = v
		case "requests":
			s.Requests, err = strconv.Atoi(v)
		case "failed":
			s.Failures, err = strconv.Atoi(v)
		case "by":
			for _, p := range strings.Split(v, ",") {
				if p == "" {
					continue
				}
				inst, n, _ := strings.Cut(p, ":")
				c, perr := strconv.Atoi(n)
				if perr != nil || inst == "" {
					return s, false
				}
				s.AnsweredBy[inst] = c
			}
		default:
			return s, false
		}
		if err != nil {
			return s, false
		}
	}
	return s, s.City != ""
}

// second returns cs's record of second k, growing the list to it.
func (cs *CityStats) second(city string, k int) *Second {
	for len(cs.Seconds) <= k {
		cs.Seconds = append(cs.Seconds, Second{City: city, At: len(cs.Seconds), AnsweredBy: map[string]int{}})
	}
	return &cs.Seconds[k]
}

// Report is a whole run.
type Report struct {
	Cities   []string
	PerCity  map[string]*CityStats
	Duration time.Duration
	Follow   bool // the STBs played from the edges: start times are reported
}

type sample struct {
	city               int
	status             int
	instance           string
	result             string
	lat, decide, start time.Duration
	bitrate, location  string
	tries              int
	cut                bool // interrupted by the run's time bound
	edgeErr            error
	err                error
}

// Run sends the requests and returns what the STBs saw.
func Run(ctx context.Context, o Options) (*Report, error) {
	if len(o.Cities) == 0 || o.Requests <= 0 {
		return nil, fmt.Errorf("stbload: no cities or no requests")
	}
	o.Concurrency = max(o.Concurrency, 1)
	o.Channels = max(o.Channels, 1)
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, o.MaxDuration)
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: o.Concurrency, MaxConnsPerHost: o.Concurrency, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: o.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	if o.Viewers > 0 && o.Zap <= 0 {
		o.Zap = 0.2
	}
	tuned := newChannels(len(o.Cities) * max(o.Viewers, 0))
	var next atomic.Int64
	samples := make(chan sample, 1024)
	var wg sync.WaitGroup
	for w := range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(o.Seed, uint64(w)))
			zipf := rand.NewZipf(rand.New(rand.NewPCG(o.Seed^0xfeed, uint64(w))), 1.1, 1, uint64(o.Channels-1))
			for {
				i := next.Add(1) - 1
				if i >= int64(o.Requests) || ctx.Err() != nil {
					return
				}
				c := int(i) % len(o.Cities)
				samples <- one(ctx, client, o, c, rng, zipf, tuned)
				if o.Pause > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(o.Pause):
					}
				}
			}
		}()
	}
	go func() { wg.Wait(); close(samples) }()

	rep := &Report{PerCity: map[string]*CityStats{}, Follow: o.Follow}
	for _, c := range o.Cities {
		rep.Cities = append(rep.Cities, c.Name)
		rep.PerCity[c.Name] = &CityStats{Results: map[string]int{}, AnsweredBy: map[string]int{}, Bitrates: map[string]int{}}
	}
	start := time.Now()
	const every = 250 * time.Millisecond
	tick := time.NewTicker(every)
	defer tick.Stop()
	done, failed, lastDone := 0, 0, 0
	emitted := 0 // seconds handed to PerSecond
	emit := func(upTo int) {
		for ; o.PerSecond != nil && emitted < upTo; emitted++ {
			for _, c := range o.Cities {
				o.PerSecond(*rep.PerCity[c.Name].second(c.Name, emitted))
			}
		}
	}
	for {
		select {
		case s, ok := <-samples:
			if !ok {
				rep.Duration = time.Since(start)
				last := 0 // the seconds that saw an answer, up to the last one
				for _, cs := range rep.PerCity {
					last = max(last, len(cs.Seconds))
				}
				emit(last)
				if o.Progress != nil {
					fmt.Fprintf(o.Progress, "  %5.1fs  %d requests, %d failed (done)\n", rep.Duration.Seconds(), done, failed)
				}
				return rep, nil
			}
			if s.cut {
				continue // the run's time bound cut it short: neither a success nor a failure
			}
			cs := rep.PerCity[o.Cities[s.city].Name]
			cs.Requests++
			if s.tries > 1 {
				cs.Retried++
			}
			done++
			sec := cs.second(o.Cities[s.city].Name, max(int(time.Since(start)/time.Second), emitted))
			sec.Requests++
			if s.err != nil || s.status != http.StatusFound {
				sec.Failures++
			} else {
				sec.AnsweredBy[s.instance]++
			}
			if s.err != nil || s.status != http.StatusFound {
				cs.Failures++
				failed++
				if s.err != nil {
					cs.Results["conn-error"]++
					continue
				}
			} else {
				cs.Redirects++
			}
			cs.Results[s.result]++
			cs.AnsweredBy[s.instance]++
			if s.bitrate != "" && s.status == http.StatusFound {
				cs.Bitrates[s.bitrate]++
			}
			cs.Latency = append(cs.Latency, s.lat)
			if s.decide > 0 {
				cs.Decide = append(cs.Decide, s.decide)
			}
			if o.Follow && s.status == http.StatusFound {
				if s.edgeErr != nil {
					cs.EdgeFailures++
				} else {
					cs.Start = append(cs.Start, s.start)
				}
			}
		case <-tick.C:
			emit(int(time.Since(start) / time.Second))
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "  %5.2fs  %d/%d requests, %.0f/s, %d failed\n", time.Since(start).Seconds(), done, o.Requests, float64(done-lastDone)/every.Seconds(), failed)
			}
			lastDone = done
		}
	}
}

func one(ctx context.Context, client *http.Client, o Options, ci int, rng *rand.Rand, zipf *rand.Zipf, tuned *channels) sample {
	c := o.Cities[ci]
	viewer := -1
	var addr netip.Addr
	if o.Viewers > 0 {
		viewer = rng.IntN(o.Viewers)
		addr = viewerAddr(c, viewer, o.Seed)
	} else {
		addr = randomIn(c.Networks[rng.IntN(len(c.Networks))], rng)
	}
	ch := zipf.Uint64() + 1
	if viewer >= 0 {
		ch = tuned.watch(ci*o.Viewers+viewer, ch, rng.Float64() < o.Zap)
	}
	path := "/ch" + strconv.FormatUint(ch, 10) + "/index.m3u8"
	if o.Token != nil && viewer >= 0 {
		path += "?token=" + url.QueryEscape(o.Token(c.Name, viewer))
	}
	retries := o.Retries
	if retries == 0 {
		retries = 2
	}
	var sm sample
	for try := 1; ; try++ {
		sm = ask(ctx, client, o, ci, c.Scheduler+path, addr)
		sm.tries = try
		if (sm.err == nil && sm.status < 500) || try > retries || ctx.Err() != nil {
			break
		}
		select { // back off, then again through the Anycast address
		case <-ctx.Done():
		case <-time.After(time.Duration(50<<try) * time.Millisecond):
		}
	}
	if sm.err != nil {
		sm.cut = ctx.Err() != nil
		return sm
	}
	if o.Follow && sm.status == http.StatusFound {
		t0 := time.Now()
		sm.edgeErr = play(ctx, client, sm.location)
		sm.cut = sm.edgeErr != nil && ctx.Err() != nil
		sm.start = sm.lat + time.Since(t0)
	}
	return sm
}

// ask sends one try of an STB request.
func ask(ctx context.Context, client *http.Client, o Options, ci int, target string, addr netip.Addr) sample {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+target, nil)
	if err != nil {
		return sample{city: ci, err: err}
	}
	req.Host = o.Host
	req.Header.Set("X-Forwarded-For", addr.String())
	req.Header.Set("X-Anysched-Debug", "1") // result type, decision time and bitrate in the answer
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return sample{city: ci, err: err}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return sample{
		city: ci, status: resp.StatusCode, lat: time.Since(t0), location: resp.Header.Get("Location"),
		instance: resp.Header.Get("X-Anysched-Instance"), result: resp.Header.Get("X-Anysched-Result"),
		decide: serverTiming(resp.Header.Get("Server-Timing")), bitrate: resp.Header.Get("X-Anysched-Bitrate"),
	}
}

// channels is what each viewer watches (0: nothing yet).
type channels struct {
	mu sync.Mutex
	ch []uint64
}

func newChannels(n int) *channels { return &channels{ch: make([]uint64, n)} }

// watch returns viewer v's channel: the one it watches, or next when it
// zaps (or watches nothing yet).
func (c *channels) watch(v int, next uint64, zap bool) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch[v] == 0 || zap {
		c.ch[v] = next
	}
	return c.ch[v]
}

// viewerAddr is viewer v's fixed address in city c: the same for the
// whole run (and for runs with the same seed).
func viewerAddr(c City, v int, seed uint64) netip.Addr {
	return randomIn(c.Networks[v%len(c.Networks)], rand.New(rand.NewPCG(seed^cityHash(c.Name), uint64(v))))
}

// cityHash is FNV-1a of a city's name: per-city random streams.
func cityHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// play fetches a media playlist and its first two segments.
func play(ctx context.Context, client *http.Client, playlist string) error {
	base, err := url.Parse(playlist)
	if err != nil {
		return err
	}
	body, err := fetch(ctx, client, playlist)
	if err != nil {
		return err
	}
	got := 0
	for _, line := range strings.Split(string(body), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ref, err := base.Parse(line)
		if err != nil {
			return err
		}
		if _, err := fetch(ctx, client, ref.String()); err != nil {
			return err
		}
		if got++; got == 2 {
			return nil
		}
	}
	return fmt.Errorf("playlist %s has %d segments", playlist, got)
}

func fetch(ctx context.Context, client *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", u, resp.Status)
	}
	return b, err
}

// randomIn picks a random address inside p.
func randomIn(p netip.Prefix, rng *rand.Rand) netip.Addr {
	b := p.Addr().AsSlice()
	host := len(b)*8 - p.Bits()
	for i := len(b) - 1; i >= 0 && host > 0; i-- {
		bits := min(host, 8)
		b[i] |= byte(rng.IntN(1<<bits)) & byte((1<<bits)-1)
		host -= bits
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// serverTiming reads "decide;dur=0.012" (milliseconds).
func serverTiming(v string) time.Duration {
	_, d, ok := strings.Cut(v, "dur=")
	if !ok {
		return 0
	}
	if i := strings.IndexAny(d, ",;"); i >= 0 {
		d = d[:i]
	}
	ms, err := strconv.ParseFloat(d, 64)
	if err != nil {
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// Percentile returns the p-th percentile (0-100) of ds, 0 when empty.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// WriteTable prints one row per city.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "CITY\tREQUESTS\t302\tFAILED\tRETRIED\tRESULTS\tANSWERED BY\tRTT p50/p99\tDECIDE p50/p99"
	if r.Follow {
		head += "\tSTART p50/p99\tEDGE FAILED"
	}
	bitrates := false
	for _, c := range r.PerCity {
		bitrates = bitrates || len(c.Bitrates) > 0
	}
	if bitrates {
		head += "\tBITRATES (kbps=redirects)"
	}
	fmt.Fprintln(tw, head)
	total := 0
	for _, name := range r.Cities {
		c := r.PerCity[name]
		total += c.Requests
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s / %s\t%s / %s", name, c.Requests, c.Redirects, c.Failures, c.Retried,
			counts(c.Results), counts(c.AnsweredBy),
			round(Percentile(c.Latency, 50)), round(Percentile(c.Latency, 99)),
			round(Percentile(c.Decide, 50)), round(Percentile(c.Decide, 99)))
		if r.Follow {
			fmt.Fprintf(tw, "\t%s / %s\t%d", round(Percentile(c.Start, 50)), round(Percentile(c.Start, 99)), c.EdgeFailures)
		}
		if bitrates {
			fmt.Fprintf(tw, "\t%s", counts(c.Bitrates))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d requests in %s (%.0f/s)\n", total, r.Duration.Round(time.Millisecond), float64(total)/r.Duration.Seconds())
	return err
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		name := k
		if name == "" {
			name = "?"
		}
		parts = append(parts, fmt.Sprintf("%s=%d", name, m[k]))
	}
	return strings.Join(parts, " ")
}

func round(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	default:
		return d.Round(10 * time.Microsecond).String()
	}
}
