package health

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type checkerMetrics struct {
	duration prometheus.Histogram
	errors   *prometheus.CounterVec
	changes  *prometheus.CounterVec
}

func newCheckerMetrics(reg prometheus.Registerer) (*checkerMetrics, error) {
	m := &checkerMetrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "anysched_health_probe_duration_seconds",
			Help:    "Duration of health probes of edge servers, failed ones included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anysched_health_probe_errors_total",
			Help: "Failed health probes by kind (timeout, refused, status, connect, body, expect).",
		}, []string{"kind"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anysched_health_verdict_changes_total",
			Help: "Server verdict changes made by this agent's checker, by new verdict (up, down).",
		}, []string{"to"}),
	}
	if reg != nil {
		var err error
		if m.duration, err = register(reg, m.duration); err != nil {
			return nil, err
		}
		if m.errors, err = register(reg, m.errors); err != nil {
			return nil, err
		}
		if m.changes, err = register(reg, m.changes); err != nil {
			return nil, err
		}
	}
	for _, k := range ErrorKinds {
		m.errors.WithLabelValues(k)
	}
	m.changes.WithLabelValues("up")
	m.changes.WithLabelValues("down")
	return m, nil
}

// register registers c, or returns the collector already registered under
// the same description (a second checker in the same process).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if ex, ok := are.ExistingCollector.(C); ok {
				return ex, nil
			}
		}
		return c, fmt.Errorf("health: registering metrics: %w", err)
	}
	return c, nil
}
