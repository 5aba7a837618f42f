package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"time"

	"github.com/anysched/anysched/internal/stb/dnsd"
	"github.com/anysched/anysched/internal/stb/httpd"
)

// anyschedInfo is what the anysched child serves, on its READY line.
type anyschedInfo struct {
	HTTP, DNS, Debug string
	HTTPS            string // "" when not available: HTTPSMissing says why
	HTTPSMissing     string
	Topology         string
	BuildTime        time.Duration
	Clients          []string // STB addresses inside coverage zones
	Zones            int      // coverage zones they are in
	GOMAXPROCS       int
	Family           string // ipv4 or ipv6: what the front ends listen on, the clients' and the answers' family
}

// childAnysched serves anysched's front ends (HTTP, HTTPS when the build
// has it, DNS over UDP and TCP) over the province-scale snapshot, as a
// scheduler does, plus a debug listener the harness takes CPU profiles
// and access-log counters from (on 127.0.0.1); the front ends on the
// loopback address of -family (127.0.0.1 or ::1), the province dual-stack
// for ipv6; until stdin closes.
func childAnysched(args []string) error {
	fs := flag.NewFlagSet("anysched", flag.ContinueOnError)
	sampleEvery := fs.Uint64("sample-every", 1, "")
	accessLog := fs.String("access-log", "", "file the access log is appended to; empty: io.Discard; -: no lines")
	zones := fs.Int("zones", 32, "")
	clients := fs.Int("clients", 256, "")
	certFile := fs.String("tls-cert", "", "")
	keyFile := fs.String("tls-key", "", "")
	resume := fs.Bool("tls-resume", true, "")
	var fam family
	fs.Var(&fam, "family", "ipv4 or ipv6")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var out io.Writer = io.Discard
	switch *accessLog {
	case "":
	case "-":
		out = nil // as access_log.enabled: false
	default:
		// O_APPEND: the harness truncates the file between runs.
		f, err := os.OpenFile(*accessLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	w, err := buildWorld(fam, *sampleEvery, out, *zones, *clients)
	if err != nil {
		return err
	}
	defer w.stop()
	runtime.GC() // the build's garbage is not the front ends' to collect

	// Every server runs until ctx ends; each reports on done when it stops.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 4)
	running := 0
	serve := func(f func(context.Context) error) {
		running++
		go func() { done <- f(ctx) }()
	}
	defer func() {
		cancel()
		for ; running > 0; running-- {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				fmt.Fprintln(os.Stderr, "frontends: a server stopped with:", err)
			}
		}
	}()
	info := anyschedInfo{Topology: w.describe(), BuildTime: w.buildTime, Zones: w.zonesUsed, GOMAXPROCS: runtime.GOMAXPROCS(0), Family: fam.name()}
	for _, a := range w.clients {
		info.Clients = append(info.Clients, a.String())
	}

	// HTTP: as a scheduler runs it behind a proxy, the STB located from
	// X-Forwarded-For.
	hcfg := httpd.Config{
		Listen:         fam.listen(),
		TrustedProxies: []netip.Prefix{fam.trusted()},
		InstanceID:     "bench-frontends",
	}
	hln, err := net.Listen("tcp", hcfg.Listen)
	if err != nil {
		return err
	}
	hsrv := httpd.New(hcfg, w.engineFunc, w.rec, nil)
	info.HTTP = hln.Addr().String()
	serve(func(ctx context.Context) error { return hsrv.Serve(ctx, hln) })

	if *certFile != "" {
		tserve, err := anyschedHTTPS(w, hcfg, tlsFiles{cert: *certFile, key: *keyFile, resume: *resume})
		switch {
		case errors.Is(err, errNoHTTPS):
			info.HTTPSMissing = err.Error()
		case err != nil:
			return fmt.Errorf("https: %w", err)
		default:
			tln, err := net.Listen("tcp", fam.listen())
			if err != nil {
				return err
			}
			info.HTTPS = tln.Addr().String()
			serve(func(ctx context.Context) error { return tserve(ctx, tln) })
		}
	}

	// DNS: UDP and TCP on one port; the load generator speaks for its STBs
	// with ECS, as a resolver would.
	pc, ln, err := listenDNS(fam)
	if err != nil {
		return err
	}
	dsrv := dnsd.New(dnsd.Config{
		Listen: pc.LocalAddr().String(), InstanceID: "bench-frontends",
		TrustedResolvers: []netip.Prefix{fam.trusted()},
	}, w.engineFunc, w.rec, nil)
	info.DNS = pc.LocalAddr().String()
	serve(func(ctx context.Context) error { return dsrv.Serve(ctx, pc, ln) })

	dln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	info.Debug = dln.Addr().String()
	dbg := &http.Server{Handler: debugMux(w), ReadHeaderTimeout: 5 * time.Second}
	serve(func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			_ = dbg.Close()
		}()
		if err := dbg.Serve(dln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})

	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	fmt.Printf("READY %s\n", b)
	select {
	case <-untilStdinCloses().Done():
		return nil
	case err := <-done:
		running--
		if err == nil {
			err = errors.New("a server stopped by itself")
		}
		return err
	}
}

// listenDNS binds UDP and TCP on one free port of the family's loopback
// address. The kernel picks the UDP port, which TCP may already use: then
// it tries again.
func listenDNS(f family) (net.PacketConn, net.Listener, error) {
	var err error
	for range 10 {
		var pc net.PacketConn
		var ln net.Listener
		if pc, ln, err = dnsd.Listen(f.listen()); err == nil {
			return pc, ln, nil
		}
	}
	return nil, nil, err
}

// debugMux serves GET /profile?seconds=N (a CPU profile of this process
// over the next N seconds, in pprof format), GET /trace?seconds=N (an
// execution trace, for go tool trace: where the processor was when
// answers waited) and GET /stats (access-log
// lines dropped so far, as JSON).
func debugMux(w *world) *http.ServeMux {
	mux := http.NewServeMux()
	// record runs start, waits ?seconds=N (1..600), then runs stop.
	record := func(start func(io.Writer) error, stop func()) http.HandlerFunc {
		return func(rw http.ResponseWriter, r *http.Request) {
			secs, err := strconv.Atoi(r.URL.Query().Get("seconds"))
			if err != nil || secs < 1 || secs > 600 {
				http.Error(rw, "seconds must be 1..600", http.StatusBadRequest)
				return
			}
			rw.Header().Set("Content-Type", "application/octet-stream")
			if err := start(rw); err != nil {
				http.Error(rw, err.Error(), http.StatusConflict)
				return
			}
			select {
			case <-time.After(time.Duration(secs) * time.Second):
			case <-r.Context().Done():
			}
			stop()
		}
	}
	mux.HandleFunc("GET /profile", record(pprof.StartCPUProfile, pprof.StopCPUProfile))
	mux.HandleFunc("GET /trace", record(trace.Start, trace.Stop))
	mux.HandleFunc("GET /stats", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]float64{"dropped": w.dropped()})
	})
	return mux
}

// anyschedProc is a running anysched child, as the harness sees it.
type anyschedProc struct {
	*goChild
	info anyschedInfo
	cpus string // where it runs ("" unpinned)
	log  string // its access log file ("" discarded)
}

// startAnysched starts the anysched child of family f on cpus.
func startAnysched(ctx context.Context, o opts, f family, pin pinning, cpus, accessLog, certFile, keyFile string) (*anyschedProc, error) {
	c, err := startChild(ctx, pin, cpus, "anysched", "-family", f.name(),
		"-sample-every", strconv.FormatUint(o.sampleEvery, 10), "-access-log", accessLog,
		"-zones", strconv.Itoa(o.zones), "-clients", strconv.Itoa(o.clients),
		"-tls-cert", certFile, "-tls-key", keyFile, "-tls-resume="+strconv.FormatBool(o.tlsResume))
	if err != nil {
		return nil, err
	}
	a := &anyschedProc{goChild: c, cpus: cpus, log: accessLog}
	if err := json.Unmarshal([]byte(c.ready), &a.info); err != nil {
		c.stop()
		return nil, fmt.Errorf("anysched child: %w", err)
	}
	return a, nil
}

// clients are the STB addresses the child picked.
func (a *anyschedProc) clients() ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range a.info.Clients {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("anysched child client %q: %w", s, err)
		}
		out = append(out, ip)
	}
	return out, nil
}

// dropped is the access-log lines the child dropped so far (queue full).
func (a *anyschedProc) dropped(ctx context.Context) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.info.Debug+"/stats", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct{ Dropped float64 }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("anysched child stats: %w", err)
	}
	return st.Dropped, nil
}

// profileTo asks the child for a CPU profile over the next d, written to
// path; it returns at once (the load is to start now), and wait reports
// the outcome.
func (a *anyschedProc) profileTo(ctx context.Context, d time.Duration, path string) (wait func() error) {
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
			defer cancel()
			u := fmt.Sprintf("http://%s/profile?seconds=%d", a.info.Debug, int(d/time.Second))
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
				return fmt.Errorf("profile: %s: %s", resp.Status, b)
			}
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, resp.Body); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}()
	}()
	return func() error { return <-done }
}
