package geoip

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	lookups                 *prometheus.CounterVec
	found, notFound, errors prometheus.Counter // resolved once: no label lookup per Locate
	reloads                 *prometheus.CounterVec
	reloadOK, reloadErr     prometheus.Counter
	buildTime               prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anysched_geoip_lookups_total",
			Help: "GeoIP lookups, by result: found (a location), not_found (no network, no location or an invalid address), error (an unreadable record).",
		}, []string{"result"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anysched_geoip_reloads_total",
			Help: "Reloads of the GeoIP database file, by result (ok, error); on error the previous database stays in use.",
		}, []string{"result"}),
		buildTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "anysched_geoip_database_build_timestamp_seconds",
			Help: "Build time (Unix seconds) of the GeoIP database in use, from its metadata.",
		}),
	}
	m.found = m.lookups.WithLabelValues("found")
	m.notFound = m.lookups.WithLabelValues("not_found")
	m.errors = m.lookups.WithLabelValues("error")
	m.reloadOK = m.reloads.WithLabelValues("ok")
	m.reloadErr = m.reloads.WithLabelValues("error")
	return m
}

// register registers all of m or, on error, none of it.
func (m *metrics) register(reg prometheus.Registerer) error {
	cs := []prometheus.Collector{m.lookups, m.reloads, m.buildTime}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return err
		}
	}
	return nil
}
