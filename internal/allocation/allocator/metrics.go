package allocator

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Kinds of allocation decisions (the kind label).
const (
	kindPlanned   = iota // a returning session on its planned server
	kindPriced           // a new session, best choice at the plan's prices
	kindFallback         // sent to the region's fallback
	kindUnplanned        // no plan for the current snapshot: the steer decision stands
	kinds
)

var kindNames = [kinds]string{"planned", "priced", "fallback", "unplanned"}

type metrics struct {
	objective, gap, planned, fallback, sessions, lastSolve prometheus.Gauge
	starved, held, idle, safe, atDesired                   prometheus.Gauge
	originPulls, originKbps                                prometheus.Gauge
	switches, drops, stateErrors                           prometheus.Counter
	statePublished                                         prometheus.Gauge
	solve                                                  prometheus.Histogram
	serverUsers                                            *prometheus.GaugeVec
	decisions                                              [kinds]prometheus.Counter
	conflicts, claimErrors                                 prometheus.Counter
	uncertified, overruns                                  prometheus.Counter
	newerClaims, newerState                                prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: "anysched_alloc_" + name, Help: help})
	}
	m := &metrics{
		objective:      g("objective", "Weighted QoE (objective) of the current plan, summed over the region's QoE services."),
		gap:            g("gap_ratio", "Certified optimality gap of the current plan: (bound - objective) / bound."),
		planned:        g("planned_sessions", "Sessions the current plan places (on a server or the fallback)."),
		fallback:       g("fallback_sessions", "Sessions the current plan sends to the region's fallback."),
		sessions:       g("sessions", "Live sessions (user, channel) in the table."),
		lastSolve:      g("last_solve_timestamp_seconds", "When the current plan was made (Unix time)."),
		starved:        g("starved_sessions", "Sessions of the current plan sent to the fallback although a server covers them: capacity this instance could not get."),
		held:           g("held_capacity_ratio", "Share of the region's server bandwidth this instance may use (its claims, or in safe mode what its rank allows)."),
		idle:           g("idle", "1 when no STB of the region reached this instance lately: it plans nobody and holds only the arrival reserve."),
		safe:           g("safe_mode", "1 when the current plan was made without reading the region's claims (etcd unreachable)."),
		atDesired:      g("at_desired_ratio", "Share of the sessions the current plan puts on a server that get their desired bitrate."),
		originPulls:    g("origin_pulls", "(Server, channel) pairs of the current plan with a viewer: each pulls the channel from the origin once."),
		originKbps:     g("origin_kbps", "What the current plan's origin pulls stream from the origin (each at the channel's top rung)."),
		statePublished: g("state_sessions", "Sessions in the plan this instance last published for the region's next planner."),
		stateErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anysched_alloc_state_errors_total", Help: "Failed publications or reads of the region's plan state in etcd.",
		}),
		switches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anysched_alloc_switches_total", Help: "Sessions a new plan moved to another server than the one they had.",
		}),
		drops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anysched_alloc_bitrate_drops_total", Help: "Sessions a new plan gave a lower bitrate than the one they had.",
		}),
		solve: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "anysched_alloc_solve_duration_seconds", Help: "Time from a period's sweep of the sessions to its plan out (claims read and committed): what the period's new STBs wait for.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5},
		}),
		serverUsers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "anysched_alloc_server_sessions", Help: "Sessions the current plan puts on each server of the region.",
		}, []string{"server"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anysched_alloc_claim_conflicts_total", Help: "Claim commits refused because a peer instance committed first.",
		}),
		claimErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anysched_alloc_claim_errors_total", Help: "Failed reads or commits of the region's capacity claims in etcd.",
		}),
		uncertified: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anysched_alloc_uncertified_plans_total", Help: "Plans published with a certified gap above alloc.target_gap: the solve stopped first (solve_timeout, or its iteration limit) and the plan is the best it had (its gap in anysched_alloc_gap_ratio).",
		}),
		overruns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anysched_alloc_solve_overruns_total", Help: "Plans out later than alloc.solve_timeout after their period's sweep: what every solve does before its first iteration (grouping the sessions, the option table, the first repair) and the claims' round trips took longer than the budget.",
		}),
	}
	dec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anysched_alloc_decisions_total", Help: "QoE decisions, by kind: planned, priced, fallback, unplanned.",
	}, []string{"kind"})
	for k := range m.decisions {
		m.decisions[k] = dec.WithLabelValues(kindNames[k])
	}
	newer := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anysched_alloc_newer_format_refusals_total", Help: "Reads of the region's documents refused whole because a newer release wrote them in a format this build does not read, by document: claims (a peer's capacity claims: planned as without etcd), plan_state (the region's last published plan: planned from this instance's own sessions).",
	}, []string{"document"})
	m.newerClaims, m.newerState = newer.WithLabelValues("claims"), newer.WithLabelValues("plan_state")
	if reg != nil {
		reg.MustRegister(m.objective, m.gap, m.planned, m.fallback, m.sessions, m.lastSolve, m.solve, m.serverUsers, dec, m.conflicts, m.claimErrors,
			m.starved, m.held, m.idle, m.safe, m.atDesired, m.switches, m.drops, m.statePublished, m.stateErrors, m.originPulls, m.originKbps, m.uncertified, m.overruns, newer)
	}
	return m
}
