package main

import (
	"context"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/anysched/anysched/bench/internal/host"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/testbed/lab"
	"github.com/anysched/anysched/internal/testbed/stbload"
)

// clientResult is what one city's STBs saw; the client prints it as JSON.
type clientResult struct {
	City      string         `json:"city"`
	Requests  int            `json:"requests"`
	Failures  int            `json:"failures"`
	Skipped   int            `json:"skipped"` // ticks missed because the STB's previous request was still running
	Answered  map[string]int `json:"answered"`
	LocalUS   []int64        `json:"local_us"`  // round trips answered by a city scheduler (µs)
	CenterUS  []int64        `json:"center_us"` // round trips answered by the center (µs)
	FirstErr  string         `json:"first_err,omitempty"`
	StartedAt time.Time      `json:"started_at"`
}

// runClient is the hidden `rollout client` mode: it runs inside one city's
// client namespace (ip netns exec), so its requests to the Anycast address
// take the routes that city's STBs take. Open loop: every STB sends one
// request every --pause from --start for --duration, whatever the answers
// take, so every mode gets the same offered load.
func runClient(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	topo := fs.String("topology", "", "topology file")
	city := fs.String("city", "", "city of these STBs")
	stbs := fs.Int("stbs", 4, "STBs")
	pause := fs.Duration("pause", 100*time.Millisecond, "interval between one STB's requests")
	dur := fs.Duration("duration", 20*time.Second, "load duration")
	start := fs.Int64("start", 0, "start time (unix ns)")
	seed := fs.Uint64("seed", 1, "random seed")
	host := fs.String("host", "live.iptv.example", "service hostname")
	keepalive := fs.Bool("keepalive", false, "reuse one connection per STB")
	if err := fs.Parse(args); err != nil {
		return err
	}
	data, err := os.ReadFile(*topo)
	if err != nil {
		return err
	}
	t, err := topology.Parse(data)
	if err != nil {
		return err
	}
	cs, err := stbload.CitiesFromTopology(t, []string{*city}, nil, lab.ServiceIP.String()+":80")
	if err != nil {
		return err
	}
	nets := cs[0].Networks
	tr := &http.Transport{DisableKeepAlives: !*keepalive, MaxIdleConnsPerHost: *stbs}
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	t0 := time.Unix(0, *start)
	end := t0.Add(*dur)
	res := clientResult{City: *city, Answered: map[string]int{}, StartedAt: t0}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range *stbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(*seed, uint64(w)))
			zipf := rand.NewZipf(rand.New(rand.NewPCG(*seed^0xfeed, uint64(w))), 1.1, 1, 199)
			// STBs are spread evenly over the interval.
			for at := t0.Add(time.Duration(w) * *pause / time.Duration(*stbs)); at.Before(end); at = at.Add(*pause) {
				if d := time.Until(at); d > 0 {
					time.Sleep(d)
				} else if -d > *pause {
					mu.Lock()
					res.Skipped++
					mu.Unlock()
					continue
				}
				inst, lat, err := request(client, *host, nets[rng.IntN(len(nets))], rng, zipf)
				mu.Lock()
				res.Requests++
				switch {
				case err != nil:
					res.Failures++
					if res.FirstErr == "" {
						res.FirstErr = err.Error()
					}
				case inst == lab.CenterID:
					res.Answered[inst]++
					res.CenterUS = append(res.CenterUS, lat.Microseconds())
				default:
					res.Answered[inst]++
					res.LocalUS = append(res.LocalUS, lat.Microseconds())
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return json.NewEncoder(os.Stdout).Encode(res)
}

// request is one STB asking the Anycast address where to play a channel;
// the client address inside the city's coverage network goes in
// X-Forwarded-For, as the lab's stbload does.
func request(client *http.Client, hostname string, p netip.Prefix, rng *rand.Rand, zipf *rand.Zipf) (string, time.Duration, error) {
	b := p.Addr().AsSlice()
	hostBits := len(b)*8 - p.Bits()
	for i := len(b) - 1; i >= 0 && hostBits > 0; i-- {
		bits := min(hostBits, 8)
		b[i] |= byte(rng.IntN(1 << bits))
		hostBits -= bits
	}
	addr, _ := netip.AddrFromSlice(b)
	path := "/ch" + strconv.FormatUint(zipf.Uint64()+1, 10) + "/index.m3u8"
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+lab.ServiceIP.String()+path, nil)
	if err != nil {
		return "", 0, err
	}
	req.Host = hostname
	req.Header.Set("X-Forwarded-For", addr.String())
	return host.Ask(client, req)
}
