package overflow

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	nodes       *prometheus.GaugeVec   // by service
	transitions *prometheus.CounterVec // by service, direction
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "anysched_overflow_nodes", Help: "Nodes whose new STBs of the service go past them (over an overflow threshold).",
		}, []string{"service"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anysched_overflow_transitions_total", Help: "Nodes going over a service's overflow thresholds (direction over) and taking its new STBs again (back).",
		}, []string{"service", "direction"}),
	}
	if reg != nil {
		reg.MustRegister(m.nodes, m.transitions)
	}
	return m
}
