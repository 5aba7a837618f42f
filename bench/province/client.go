package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/bench/internal/host"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/testbed/lab"
)

// Latency histogram: bucket k holds round trips below histBase x histGrowth^k.
const (
	histBase    = 50 * time.Microsecond
	histGrowth  = 1.15
	histBuckets = 110 // up to about 2.3 minutes
)

// histBucket is the bucket of a round trip.
func histBucket(d time.Duration) int {
	if d < histBase {
		return 0
	}
	k := int(math.Ceil(math.Log(float64(d)/float64(histBase)) / math.Log(histGrowth)))
	return min(k, histBuckets-1)
}

// histQuantile is the upper bound of the bucket holding quantile q, in ms.
func histQuantile(h []uint64, q float64) float64 {
	var n uint64
	for _, c := range h {
		n += c
	}
	if n == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for k, c := range h {
		seen += c
		if seen >= want {
			return float64(histBase) * math.Pow(histGrowth, float64(k)) / 1e6
		}
	}
	return float64(histBase) * math.Pow(histGrowth, float64(len(h)-1)) / 1e6
}

// Bucket is what a city's STBs did in one sampling interval of the load.
type Bucket struct {
	Requests int      `json:"requests"` // sent (refreshes, zaps and first requests)
	Zaps     int      `json:"zaps"`     // of which channel changes (storms included)
	Storm    int      `json:"storm"`    // of which a storm's
	Failures int      `json:"failures"` // no 302
	Skipped  int      `json:"skipped"`  // not sent: every worker busy and the queue full
	Own      int      `json:"own"`      // answered by the city's primary
	Standby  int      `json:"standby"`  // ... by its standby
	Center   int      `json:"center"`
	Other    int      `json:"other"`
	Hist     []uint64 `json:"hist,omitempty"`
}

func (b *Bucket) add(o Bucket) {
	b.Requests += o.Requests
	b.Zaps += o.Zaps
	b.Storm += o.Storm
	b.Failures += o.Failures
	b.Skipped += o.Skipped
	b.Own += o.Own
	b.Standby += o.Standby
	b.Center += o.Center
	b.Other += o.Other
	if len(o.Hist) > 0 && len(b.Hist) == 0 {
		b.Hist = make([]uint64, histBuckets)
	}
	for k, c := range o.Hist {
		b.Hist[k] += c
	}
}

// clientResult is what one city's STBs saw; the client prints it as JSON.
type clientResult struct {
	City     string   `json:"city"`
	Sessions int      `json:"sessions"`
	Buckets  []Bucket `json:"buckets"`
	FirstErr string   `json:"first_err,omitempty"`
	// Late: requests sent more than a second after their time (the
	// generator fell behind).
	Late int `json:"late"`
}

// clientConfig is one city's load.
type clientConfig struct {
	city                    string
	viewers                 int
	start                   time.Time
	duration, refresh       time.Duration
	bucket                  time.Duration
	zap                     float64
	stormEvery, stormFirst  time.Duration
	stormShare              float64
	stormWindow             time.Duration
	seed                    uint64
	keyFile                 string
	addrs                   []netip.Addr
	keepalive               bool
	workers, channels       int
	tokenLife               time.Duration
	host, target, primary   string
	standby, centerInstance string
}

// storms are the storms' start offsets within the load.
func storms(first, every, window, dur time.Duration) []time.Duration {
	var out []time.Duration
	if every <= 0 {
		return out
	}
	for at := first; at+window <= dur; at += every {
		out = append(out, at)
	}
	return out
}

// runClient is the hidden `province client` mode: it runs inside one
// city's client namespace (ip netns exec), so its requests to the Anycast
// address take the routes the city's STBs take. Open loop: each viewer
// asks at its own times whatever the answers take.
func runClient(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	var c clientConfig
	var start int64
	var addrs string
	fs.StringVar(&c.city, "city", "", "city of these STBs")
	fs.IntVar(&c.viewers, "viewers", 0, "sessions (viewers)")
	fs.Int64Var(&start, "start", 0, "start time (unix ns)")
	fs.DurationVar(&c.duration, "duration", time.Minute, "load duration")
	fs.DurationVar(&c.refresh, "refresh", 90*time.Second, "a session asks again this often")
	fs.DurationVar(&c.bucket, "bucket", 10*time.Second, "reporting interval")
	fs.Float64Var(&c.zap, "zap", 0.2, "share of refreshes that change channel")
	fs.DurationVar(&c.stormEvery, "storm-every", time.Minute, "storm period (0: none)")
	fs.DurationVar(&c.stormFirst, "storm-first", 100*time.Second, "first storm")
	fs.Float64Var(&c.stormShare, "storm-share", 0.3, "share of viewers in a storm")
	fs.DurationVar(&c.stormWindow, "storm-window", 10*time.Second, "storm window")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed")
	fs.StringVar(&c.keyFile, "token-key", "", "viewer-token secret file")
	fs.StringVar(&addrs, "addrs", "", "STB source addresses, comma-separated")
	fs.BoolVar(&c.keepalive, "keepalive", false, "reuse connections")
	fs.IntVar(&c.workers, "workers", 256, "concurrent requests")
	fs.IntVar(&c.channels, "channels", channels, "channels")
	fs.StringVar(&c.primary, "primary", "", "the city's primary instance id")
	fs.StringVar(&c.standby, "standby", "", "the city's standby instance id")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.start = time.Unix(0, start)
	c.host, c.target, c.centerInstance = topogen.Hostname, "http://"+lab.ServiceIP.String(), lab.CenterID
	c.tokenLife = c.duration + time.Hour
	for _, a := range strings.Split(addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				return err
			}
			c.addrs = append(c.addrs, ip)
		}
	}
	if c.viewers < 1 || c.keyFile == "" {
		return errors.New("client: -viewers and -token-key are required")
	}
	res, err := c.run(context.Background())
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// job is one request a viewer sends.
type job struct {
	v     int32
	at    time.Time
	zap   bool
	storm bool
}

// run plays the city's viewers from start for duration.
func (c clientConfig) run(ctx context.Context) (*clientResult, error) {
	secret, err := token.ReadSecret(c.keyFile)
	if err != nil {
		return nil, err
	}
	key := token.Key{ID: lab.TokenKeyID, Secret: secret}
	rng := rand.New(rand.NewPCG(c.seed, 0x5e55))
	nan := math.NaN()
	tokens := make([]string, c.viewers)
	chans := make([]atomic.Int32, c.viewers)
	zipf := rand.NewZipf(rand.New(rand.NewPCG(c.seed, 0x21bf)), 1.1, 1, uint64(c.channels-1))
	offsets := make([]time.Duration, c.viewers) // each viewer's place in the refresh period
	order := make([]int32, c.viewers)
	now := time.Now()
	for v := range c.viewers {
		tok, err := token.Sign(key, token.Claims{Subject: fmt.Sprintf("%s-%d", c.city, v), IssuedAt: now, Expires: now.Add(c.tokenLife),
			DesiredKbps: nan, DanmakuPerHour: nan, Gift: nan})
		if err != nil {
			return nil, err
		}
		tokens[v] = tok
		chans[v].Store(int32(zipf.Uint64()) + 1)
		offsets[v] = time.Duration(rng.Int64N(int64(c.refresh)))
		order[v] = int32(v)
	}
	slices.SortFunc(order, func(a, b int32) int { return int(offsets[a] - offsets[b]) })
	// The storms: each a fresh random share of the viewers, each at a
	// random moment of the window.
	var stormJobs []job
	for _, at := range storms(c.stormFirst, c.stormEvery, c.stormWindow, c.duration) {
		for v := range c.viewers {
			if rng.Float64() < c.stormShare {
				stormJobs = append(stormJobs, job{v: int32(v), at: c.start.Add(at + time.Duration(rng.Int64N(int64(c.stormWindow)))), zap: true, storm: true})
			}
		}
	}
	slices.SortFunc(stormJobs, func(a, b job) int { return a.at.Compare(b.at) })

	nb := int((c.duration + c.bucket - 1) / c.bucket)
	res := &clientResult{City: c.city, Sessions: c.viewers, Buckets: make([]Bucket, nb)}
	for i := range res.Buckets {
		res.Buckets[i].Hist = make([]uint64, histBuckets)
	}
	var mu sync.Mutex
	bucketOf := func(t time.Time) *Bucket {
		i := int(t.Sub(c.start) / c.bucket)
		return &res.Buckets[max(0, min(i, nb-1))]
	}

	// One transport per source address: each dials from its address.
	clients := make([]*http.Client, max(1, len(c.addrs)))
	for i := range clients {
		d := &net.Dialer{Timeout: 2 * time.Second}
		if len(c.addrs) > 0 {
			d.LocalAddr = &net.TCPAddr{IP: c.addrs[i].AsSlice()}
		}
		tr := &http.Transport{DialContext: d.DialContext, DisableKeepAlives: !c.keepalive, MaxIdleConnsPerHost: c.workers}
		clients[i] = &http.Client{Transport: tr, Timeout: 2 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}

	jobs := make(chan job, 4*c.workers+c.viewers/10)
	var wg sync.WaitGroup
	for w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wrng := rand.New(rand.NewPCG(c.seed, uint64(w)+1))
			wzipf := rand.NewZipf(wrng, 1.1, 1, uint64(c.channels-1))
			for j := range jobs {
				ch := chans[j.v].Load()
				if j.zap {
					for n := int32(wzipf.Uint64()) + 1; ; n = int32(wzipf.Uint64()) + 1 {
						if n != ch || c.channels < 2 {
							ch = n
							break
						}
					}
					chans[j.v].Store(ch)
				}
				client := clients[int(j.v)%len(clients)]
				inst, lat, err := c.request(ctx, client, tokens[j.v], ch)
				mu.Lock()
				b := bucketOf(j.at)
				b.Requests++
				if j.zap {
					b.Zaps++
				}
				if j.storm {
					b.Storm++
				}
				switch {
				case err != nil:
					b.Failures++
					if res.FirstErr == "" {
						res.FirstErr = fmt.Sprintf("+%.1fs: %v", time.Since(c.start).Seconds(), err)
					}
				default:
					b.Hist[histBucket(lat)]++
					switch inst {
					case c.primary:
						b.Own++
					case c.standby:
						b.Standby++
					case c.centerInstance:
						b.Center++
					default:
						b.Other++
					}
				}
				mu.Unlock()
			}
		}()
	}

	// The dispatcher: refreshes in each viewer's place of the period, and
	// the storms, in time order; a tick every 5 ms.
	end := c.start.Add(c.duration)
	send := func(j job) {
		if late := time.Since(j.at); late > time.Second {
			mu.Lock()
			res.Late++
			mu.Unlock()
		}
		select {
		case jobs <- j:
		default:
			mu.Lock()
			bucketOf(j.at).Skipped++
			mu.Unlock()
		}
	}
	if d := time.Until(c.start); d > 0 {
		time.Sleep(d)
	}
	first := true // the first period: each viewer's first request starts its session
	period, next, si := 0, 0, 0
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for t := time.Now(); t.Before(end); t = <-tick.C {
		for {
			base := c.start.Add(time.Duration(period) * c.refresh)
			if next == len(order) {
				period, next, first = period+1, 0, false
				continue
			}
			v := order[next]
			at := base.Add(offsets[v])
			if at.After(t) || !at.Before(end) {
				break
			}
			send(job{v: v, at: at, zap: !first && rng.Float64() < c.zap})
			next++
		}
		for si < len(stormJobs) && !stormJobs[si].at.After(t) {
			send(stormJobs[si])
			si++
		}
	}
	close(jobs)
	wg.Wait()
	return res, nil
}

// request is one STB asking the Anycast address where to play channel ch,
// with its viewer token.
func (c clientConfig) request(ctx context.Context, client *http.Client, tok string, ch int32) (string, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.target+"/ch"+strconv.Itoa(int(ch))+"/index.m3u8?token="+tok, nil)
	if err != nil {
		return "", 0, err
	}
	req.Host = c.host
	return host.Ask(client, req)
}
