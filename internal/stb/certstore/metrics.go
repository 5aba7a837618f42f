package certstore

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	reloads             *prometheus.CounterVec
	reloadOK, reloadErr prometheus.Counter
	rotations           prometheus.Counter
	failing             atomic.Bool
	expiry              *expiryCollector
}

func newMetrics(s *Store) *metrics {
	m := &metrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anysched_certstore_reloads_total",
			Help: "Loads of the HTTPS certificate files, by result (ok, error); on error the previous certificates stay in use.",
		}, []string{"result"}),
		rotations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anysched_certstore_ticket_key_rotations_total",
			Help: "Session ticket key rotations.",
		}),
		expiry: &expiryCollector{s: s, desc: prometheus.NewDesc(
			"anysched_certstore_certificate_expiry_timestamp_seconds",
			"Expiry (NotAfter, Unix seconds) of each HTTPS certificate in use, by certificate file and first DNS name.",
			[]string{"cert_file", "name"}, nil)},
	}
	m.reloadOK = m.reloads.WithLabelValues("ok")
	m.reloadErr = m.reloads.WithLabelValues("error")
	return m
}

func (m *metrics) register(reg prometheus.Registerer) {
	reg.MustRegister(m.reloads, m.rotations, m.expiry,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "anysched_certstore_reload_failing_bool",
			Help: "1 when the last load of the HTTPS certificate files failed: the certificates served are older than the files.",
		}, func() float64 {
			if m.failing.Load() {
				return 1
			}
			return 0
		}))
}

// expiryCollector reports the set in use at each scrape, so a replaced
// certificate leaves no stale series behind.
type expiryCollector struct {
	s    *Store
	desc *prometheus.Desc
}

func (c *expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *expiryCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.s.set.Load().entries {
		// Not Must: a scrape must not panic on a label that is not UTF-8.
		if m, err := prometheus.NewConstMetric(c.desc, prometheus.GaugeValue, float64(e.notAfter.Unix()), e.pair.CertFile, e.label()); err == nil {
			ch <- m
		}
	}
}
