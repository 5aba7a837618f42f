package etcdhousekeep

import "github.com/prometheus/client_golang/prometheus"

// The alarms etcd raises, as AlarmType names them; each has a gauge.
const (
	AlarmNoSpace = "NOSPACE"
	AlarmCorrupt = "CORRUPT"
)

type metrics struct {
	dbSize, dbInUse, quota *prometheus.GaugeVec // by member
	alarm                  *prometheus.GaugeVec // by alarm
	revision, compacted    prometheus.Gauge
	leading                prometheus.Gauge
	compactions            *prometheus.CounterVec // by result
	defrags                *prometheus.CounterVec // by result
	recoveries             *prometheus.CounterVec // by result
	statusErrors           prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		dbSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "anysched_etcd_db_size_bytes",
			Help: "Size of each etcd member's backend file: what counts against the quota (etcd Status)."}, []string{"member"}),
		dbInUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "anysched_etcd_db_size_in_use_bytes",
			Help: "What each member's backend file holds; the rest is free space a defragmentation gives back."}, []string{"member"}),
		quota: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "anysched_etcd_quota_bytes",
			Help: "Each member's backend quota (--quota-backend-bytes): at it etcd raises NOSPACE and refuses every write."}, []string{"member"}),
		alarm: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "anysched_etcd_alarm_active_bool",
			Help: "1 while etcd has an alarm of this type raised on any member (NOSPACE: no writes anywhere in the province)."}, []string{"alarm"}),
		revision: prometheus.NewGauge(prometheus.GaugeOpts{Name: "anysched_etcd_revision_number",
			Help: "The store's current revision."}),
		compacted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "anysched_etcd_compacted_revision_number",
			Help: "The revision this housekeeper last compacted to (0: none yet)."}),
		leading: prometheus.NewGauge(prometheus.GaugeOpts{Name: "anysched_etcd_housekeeper_leading_bool",
			Help: "1 when this center keeps etcd's house (compacts, defragments, clears NOSPACE); the other centers only watch."}),
		compactions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anysched_etcd_compactions_total",
			Help: "Compactions of the history by the housekeeper, by result (ok, error)."}, []string{"result"}),
		defrags: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anysched_etcd_defragmentations_total",
			Help: "Defragmentations of one member by the housekeeper, by result (ok, error)."}, []string{"result"}),
		recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anysched_etcd_nospace_recoveries_total",
			Help: "NOSPACE recoveries: disarmed (compacted, defragmented, alarm cleared), no_room (live data too large: left to the operator), error."}, []string{"result"}),
		statusErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "anysched_etcd_status_errors_total",
			Help: "Rounds in which the housekeeper could not read etcd's members, status or alarms."}),
	}
	for _, a := range []string{AlarmNoSpace, AlarmCorrupt} {
		m.alarm.WithLabelValues(a)
	}
	for _, r := range []string{"ok", "error"} {
		m.compactions.WithLabelValues(r)
		m.defrags.WithLabelValues(r)
	}
	for _, r := range []string{"disarmed", "no_room", "error"} {
		m.recoveries.WithLabelValues(r)
	}
	reg.MustRegister(m.dbSize, m.dbInUse, m.quota, m.alarm, m.revision, m.compacted, m.leading, m.compactions, m.defrags, m.recoveries, m.statusErrors)
	return m
}
