package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// LoadOptions shape the STB load of a run. Every request is a new
// connection (an STB zapping opens one per channel change), retried once
// after RetryAfter when it fails (no answer, or anything but a 302), as an
// STB does.
type LoadOptions struct {
	Cities []string
	// Dial opens a connection from city i's STB network (the lab: a socket
	// made inside the city's client namespace).
	Dial     func(city int) func(ctx context.Context, network, addr string) (net.Conn, error)
	Target   string // host:port the STBs ask: the Anycast address
	Host     string // the service's hostname
	Token    func(city string, viewer int) string
	Viewers  int           // STBs per city; each zaps now and then
	Steady   int           // STBs per city asking all the time, one after another
	Pause    time.Duration // a steady STB's pause between requests
	Storms   []time.Duration
	StormSTB int // STBs per city that change channel within the storm's second
	Duration time.Duration
	Timeout  time.Duration // per try; default 2 s (the lab's STBs)
	Retry    time.Duration // before the one retry; default 100 ms
	Channels int
	Seed     uint64
	// MaxRequests bounds the run whatever its pace.
	MaxRequests int
}

// Request is one STB request as the STB saw it, after its retry if it
// needed one.
type Request struct {
	City     int
	STB      int
	Storm    bool
	Start    time.Time // the first try
	End      time.Time
	Tries    int
	Status   int
	Instance string // X-Anysched-Instance of the last try
	Result   string
	Location string
	FirstErr string // the first try's failure, if it failed
	Err      string // the last try's failure
	cut      bool   // the run's end cut it short
}

// OK reports whether the STB got its 302.
func (r Request) OK() bool { return r.Status == http.StatusFound && r.Err == "" }

// RunLoad runs the load until Duration (or ctx) ends and returns every
// request, in the order they ended.
func RunLoad(ctx context.Context, o LoadOptions) []Request {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Retry <= 0 {
		o.Retry = 100 * time.Millisecond
	}
	o.Channels = max(o.Channels, 1)
	o.Viewers = max(o.Viewers, 1)
	if o.MaxRequests <= 0 {
		o.MaxRequests = 500_000
	}
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	start := time.Now()
	clients := make([]*http.Client, len(o.Cities))
	for i := range o.Cities {
		tr := &http.Transport{DisableKeepAlives: true, DialContext: o.Dial(i), ResponseHeaderTimeout: o.Timeout}
		clients[i] = &http.Client{Transport: tr, Timeout: o.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	var (
		mu   sync.Mutex
		out  []Request
		wg   sync.WaitGroup
		sent int
	)
	record := func(r Request) bool {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, r)
		sent++
		return sent < o.MaxRequests
	}
	ask := func(rng *rand.Rand, city, stb int, storm bool) bool {
		ch := 1 + rng.IntN(o.Channels)
		return record(one(ctx, clients[city], o, city, stb, ch, storm))
	}
	for i := range o.Cities {
		for s := range o.Steady {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(o.Seed, uint64(i*1000+s)))
				for ctx.Err() == nil {
					if !ask(rng, i, rng.IntN(o.Viewers), false) {
						return
					}
					select {
					case <-ctx.Done():
					case <-time.After(o.Pause): // the STB's pace
					}
				}
			}()
		}
		for n, at := range o.Storms {
			rng := rand.New(rand.NewPCG(o.Seed^0x5707, uint64(i*1000+n)))
			for range o.StormSTB {
				wg.Add(1)
				// Within the storm's second, each STB at its own moment.
				when := at + time.Duration(rng.Int64N(int64(time.Second)))
				stb, seed := rng.IntN(o.Viewers), rng.Uint64()
				go func() {
					defer wg.Done()
					select {
					case <-ctx.Done():
						return
					case <-time.After(time.Until(start.Add(when))):
					}
					ask(rand.New(rand.NewPCG(seed, 1)), i, stb, true)
				}()
			}
		}
	}
	wg.Wait()
	// Requests the run's end cut short are neither successes nor failures.
	kept := out[:0]
	for _, r := range out {
		if !r.cut {
			kept = append(kept, r)
		}
	}
	return kept
}

func one(ctx context.Context, client *http.Client, o LoadOptions, city, stb, ch int, storm bool) Request {
	r := Request{City: city, STB: stb, Storm: storm, Start: time.Now()}
	target := fmt.Sprintf("http://%s/ch%d/index.m3u8", o.Target, ch)
	if o.Token != nil {
		target += "?token=" + url.QueryEscape(o.Token(o.Cities[city], stb))
	}
	for r.Tries < 2 {
		r.Tries++
		r.Status, r.Instance, r.Result, r.Location, r.Err = try(ctx, client, o.Host, target)
		if r.Err == "" && r.Status == http.StatusFound {
			break
		}
		if r.Err == "" {
			r.Err = fmt.Sprintf("status %d from %q", r.Status, r.Instance)
		}
		if r.Tries == 1 {
			r.FirstErr = r.Err
			select {
			case <-ctx.Done():
			case <-time.After(o.Retry): // the STB's retry delay
			}
		}
	}
	r.End = time.Now()
	r.cut = r.Err != "" && ctx.Err() != nil
	return r
}

func try(ctx context.Context, client *http.Client, host, target string) (status int, inst, result, loc, errText string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, "", "", "", err.Error()
	}
	req.Host = host
	req.Header.Set("X-Anysched-Debug", "1")
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", "", "", err.Error()
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Anysched-Instance"), resp.Header.Get("X-Anysched-Result"), resp.Header.Get("Location"), ""
}
