package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology"
)

// Target is one server to probe.
type Target struct {
	Server  string         // the server's name in the topology; the key of its reports
	Address netip.AddrPort // TCP connect probe, used when URL is empty
	URL     string         // HTTP GET probe (e.g. http://10.1.2.3/nginx_status); empty: TCP connect
	// Address6 is a dual-stack server's IPv6 address, probed beside
	// Address (URL's host replaced by it: Family6); invalid: none.
	Address6     netip.AddrPort
	CapacityMbps float64 // egress capacity; 0 disables the bandwidth threshold
	// Policy is the server's probe expectations and load thresholds from
	// the topology (servers[].health over pools[].health); the zero value
	// is any 2xx and no thresholds but the checker's bandwidth one.
	//
	// Expectations (HTTP probes only; a TCP probe ignores them):
	//   - ExpectStatus: exactly this status is healthy (a 204, or a 3xx
	//     or 4xx a status page is known to give); 0: any 2xx.
	//   - ExpectBody: the body's first MaxBody bytes must match it.
	//
	// A probe that misses one fails with kind "expect", which counts
	// towards Fall like any other failure.
	//
	// Thresholds, on the figures the server reports (JSON stats; nginx
	// stub_status gives only connections); 0 sets none. An answer over any
	// of them is "overloaded": Fall such answers in a row take the server
	// out for new STBs, Rise answers under all of them bring it back, as
	// for the bandwidth threshold (CheckerOptions.BandwidthThreshold). A
	// figure the server does not report never exceeds its threshold.
	//   - MaxCPU: CPU utilisation, a fraction in [0,1].
	//   - MaxMemory: share of memory in use, a fraction in [0,1].
	//   - MaxConnections: active connections.
	//   - MaxLoad: the (1-minute) load average.
	Policy topology.HealthPolicy
}

// Family6 is the target that probes t's IPv6 address: a TCP connect to
// Address6, or t's URL with its host the IPv6 address (the URL's port
// kept: the status page listens on both families alike).
// ok is false when t has no IPv6 address.
func (t Target) Family6() (Target, bool) {
	if !t.Address6.IsValid() {
		return Target{}, false
	}
	t6 := t
	t6.Address, t6.Address6 = t.Address6, netip.AddrPort{}
	if t.URL == "" {
		return t6, true
	}
	u, err := url.Parse(t.URL)
	if err != nil {
		return t6, true // probed as is: the failure says why
	}
	host := "[" + t.Address6.Addr().String() + "]"
	if port := u.Port(); port != "" {
		host += ":" + port
	}
	u.Host = host
	t6.URL = u.String()
	return t6, true
}

// Error kinds of a Result, the label values of
// anysched_health_probe_errors_total{kind}.
const (
	KindTimeout = "timeout" // no answer within the timeout (connect, headers or body)
	KindRefused = "refused" // connection refused: nothing listens on the port
	KindStatus  = "status"  // an HTTP answer that is not 2xx
	KindConnect = "connect" // any other failure to get an answer: reset, unreachable, bad URL, ...
	KindBody    = "body"    // reading the body failed, or its load figures are malformed
	KindExpect  = "expect"  // an answer other than the target's expected status or body
	// KindCanceled: the caller's context was canceled (the checker is
	// stopping or the target was removed); says nothing about the server and
	// is neither counted nor used for a verdict.
	KindCanceled = "canceled"
)

// ErrorKinds are the kinds a probe of a live checker can report.
var ErrorKinds = []string{KindTimeout, KindRefused, KindStatus, KindConnect, KindBody, KindExpect}

// Result is the outcome of one probe.
//
// OK with an empty Kind is a clean success. OK with Kind "body" means the
// server answered 2xx but its load figures could not be read (a broken or
// truncated stats body): the server is reachable, so the probe counts as a
// success for the verdict, but the error is still counted by kind and
// HasLoad is false. A probe that missed the target's expectations (kind
// "expect") is a failure and carries no load.
type Result struct {
	OK      bool
	RTT     time.Duration // connect (TCP) or time to the response headers (HTTP); on failure, time until it failed
	Load    avail.Load
	HasLoad bool // Load holds figures the server reported
	Err     string
	Kind    string // "" or one of the Kind* constants
}

// DefaultProbeTimeout bounds a probe when neither Prober.Timeout nor the
// context sets a deadline.
const DefaultProbeTimeout = 2 * time.Second

// Prober probes targets. The zero value is ready to use.
//
// Connections: with a nil Client, every probe opens a new TCP connection and
// closes it afterwards (keep-alives disabled), as HAProxy's checks do. A
// reused keep-alive connection would still notice a dead process (its kernel
// resets the idle connection, or the request times out), but it would not
// notice a server whose listener no longer accepts (accept queue full,
// listening socket gone, firewall change) while old connections still work,
// and it would leave the TCP handshake out of the RTT, which is the part an
// STB pays. The default client also ignores proxy environment variables and
// does not follow redirects (a 3xx is a "status" failure, unless it is the
// target's expected status). A caller-supplied Client is used as is; if it
// keeps connections alive, the above applies.
type Prober struct {
	Client  *http.Client  // nil: the default client described above
	Timeout time.Duration // per probe, on top of the context's deadline; 0: DefaultProbeTimeout unless the context has a deadline

	once   sync.Once
	client *http.Client
}

// userAgent identifies probes in edge servers' access logs.
const userAgent = "anysched-health/1"

func (p *Prober) httpClient() *http.Client {
	if p.Client != nil {
		return p.Client
	}
	p.once.Do(func() {
		d := &net.Dialer{}
		p.client = &http.Client{
			Transport: &http.Transport{
				Proxy:                  nil,
				DialContext:            d.DialContext,
				DisableKeepAlives:      true,
				DisableCompression:     true,
				MaxResponseHeaderBytes: MaxBody,
				ForceAttemptHTTP2:      false,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	})
	return p.client
}

// Probe checks one target: an HTTP GET of t.URL when set (OK: any 2xx, or
// exactly t.Policy.ExpectStatus when set, with a body matching
// t.Policy.ExpectBody when set; load figures parsed from the body when it
// is nginx stub_status or JSON stats; at most MaxBody bytes are read), else
// a TCP connect to t.Address. It never panics and always returns within the
// timeout.
func (p *Prober) Probe(ctx context.Context, t Target) Result {
	parent := ctx
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Timeout)
		defer cancel()
	} else if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultProbeTimeout)
		defer cancel()
	}
	start := time.Now()
	if t.URL == "" {
		return p.probeTCP(ctx, parent, t, start)
	}
	return p.probeHTTP(ctx, parent, t, start)
}

func (p *Prober) probeTCP(ctx, parent context.Context, t Target, start time.Time) Result {
	if !t.Address.IsValid() {
		return Result{Kind: KindConnect, Err: "connect: target has neither URL nor address"}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", t.Address.String())
	rtt := time.Since(start)
	if err != nil {
		kind := classify(parent, err)
		return Result{RTT: rtt, Kind: kind, Err: kind + ": " + err.Error()}
	}
	conn.Close()
	return Result{OK: true, RTT: rtt}
}

func (p *Prober) probeHTTP(ctx, parent context.Context, t Target, start time.Time) Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		return Result{Kind: KindConnect, Err: "connect: bad URL: " + err.Error()}
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := p.httpClient().Do(req)
	rtt := time.Since(start)
	if err != nil {
		kind := classify(parent, err)
		return Result{RTT: rtt, Kind: kind, Err: kind + ": " + err.Error()}
	}
	defer resp.Body.Close() // not drained: with keep-alives off the connection is closed anyway
	if want := t.Policy.ExpectStatus; want != 0 {
		if resp.StatusCode != want {
			return Result{RTT: rtt, Kind: KindExpect, Err: fmt.Sprintf("expect: HTTP %d, want %d", resp.StatusCode, want)}
		}
	} else if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Result{RTT: rtt, Kind: KindStatus, Err: fmt.Sprintf("status: HTTP %d", resp.StatusCode)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		kind := classify(parent, err)
		if kind == KindConnect || kind == KindRefused {
			kind = KindBody // the answer started, then broke off
		}
		return Result{RTT: rtt, Kind: kind, Err: kind + ": reading body: " + err.Error()}
	}
	if re := t.Policy.ExpectBody; re != nil && !re.Match(body) {
		return Result{RTT: rtt, Kind: KindExpect, Err: fmt.Sprintf("expect: body does not match %s", clip(strconv.Quote(re.String())))}
	}
	res := Result{OK: true, RTT: rtt}
	l, isLoad, err := parseBody(resp.Header.Get("Content-Type"), body)
	switch {
	case err != nil:
		res.Kind, res.Err = KindBody, "body: "+err.Error()
	case isLoad:
		res.Load, res.HasLoad = l, true
	}
	return res
}

// classify maps a dial, transport or read error to an error kind. parent is
// the caller's context: its cancellation is "canceled", while the probe's
// own deadline (or the caller's) is "timeout".
func classify(parent context.Context, err error) string {
	if errors.Is(parent.Err(), context.Canceled) {
		return KindCanceled
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT),
		errors.As(err, &ne) && ne.Timeout():
		return KindTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return KindRefused
	case errors.Is(err, context.Canceled):
		return KindCanceled
	}
	return KindConnect
}
