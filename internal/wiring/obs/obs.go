// Package obs is the daemons' observability: slog setup, the Prometheus
// registry, and the admin HTTP listener (/metrics, /healthz, /readyz,
// /debug/pprof/) that is kept apart from STB traffic.
package obs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/wiring/version"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// NewLogger builds a logger writing to w.
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("obs: log level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("obs: log format %q: want text or json", format)
	}
}

// NewRegistry returns a registry with the Go runtime and process
// collectors, and anysched_build_info: 1, labelled with the version the
// binary reports (schedctl version, status's VERSION), so a dashboard sees
// an upgrade's progress.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "anysched_build_info",
		Help:        "Always 1; labelled with the build's version and Go version.",
		ConstLabels: prometheus.Labels{"version": version.String(), "goversion": runtime.Version()},
	})
	info.Set(1)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), info)
	return reg
}

// ReadyFunc reports nil when the daemon can take traffic, else why not.
type ReadyFunc func() error

// Admin is the operator-facing HTTP listener.
type Admin struct {
	Addr     string
	Gatherer prometheus.Gatherer
	Ready    ReadyFunc
	// ReadyDetail, if set, adds lines to /readyz's answer, ready or not
	// (a scheduler's route per address family).
	ReadyDetail func() []string
	Logger      *slog.Logger
	// Extra handlers mounted beside the standard ones (e.g. /debug/snapshot).
	Extra map[string]http.Handler
	// TLS, when set, makes the listener HTTPS (admin.tls; with a client CA,
	// clients without a certificate of it fail the handshake).
	TLS *tls.Config
}

// Handler returns the admin mux.
func (a *Admin) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(a.Logger.Handler(), slog.LevelError)}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		head := "ready\n"
		if a.Ready != nil {
			if err := a.Ready(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				head = "not ready: " + err.Error() + "\n"
			}
		}
		_, _ = io.WriteString(w, head)
		if a.ReadyDetail != nil {
			for _, l := range a.ReadyDetail() {
				_, _ = io.WriteString(w, l+"\n")
			}
		}
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	for p, h := range a.Extra {
		mux.Handle(p, h)
	}
	return mux
}

// Run serves until ctx is done. An empty Addr disables the listener.
func (a *Admin) Run(ctx context.Context) error {
	if a.Addr == "" {
		<-ctx.Done()
		return nil
	}
	ln, err := net.Listen("tcp", a.Addr)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	return a.Serve(ctx, ln)
}

// Serve serves on ln until ctx is done.
func (a *Admin) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           a.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(a.Logger.Handler(), slog.LevelWarn),
	}
	if a.TLS != nil {
		ln = tls.NewListener(ln, a.TLS)
	}
	a.Logger.Info("admin listener up", "addr", ln.Addr().String(), "tls", a.TLS != nil, "client_certificates", a.TLS != nil && a.TLS.ClientAuth == tls.RequireAndVerifyClientCert)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("admin listener: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

var metricName = regexp.MustCompile(`^anysched_[a-z0-9]+_[a-z0-9_]+$`)

// LintMetrics checks every anysched metric of g against the project's naming
// rule (anysched_<component>_<name>_<unit>) and Prometheus' own lint.
// Metrics of other namespaces (go_, process_) are left to their owners.
func LintMetrics(g prometheus.Gatherer) []string {
	mfs, err := g.Gather()
	if err != nil {
		return []string{"gather: " + err.Error()}
	}
	var problems []string
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "anysched_") {
			continue
		}
		if !metricName.MatchString(name) {
			problems = append(problems, name+": not anysched_<component>_<name>_<unit>")
		}
	}
	lp, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		problems = append(problems, "promlint: "+err.Error())
	}
	for _, p := range lp {
		if strings.HasPrefix(p.Metric, "anysched_") {
			problems = append(problems, p.Metric+": "+p.Text)
		}
	}
	return problems
}
