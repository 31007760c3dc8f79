package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idgen/idgen/idempotency"
)

// idemMetrics are the collectors of idempotency keys. No label names a
// caller or a key: reasons and results are fixed sets.
type idemMetrics struct {
	stored, replays, swept prometheus.Counter
	conflicts, sweeps      *prometheus.CounterVec
	live, expired          prometheus.Gauge
}

func newIdemMetrics(reg *prometheus.Registry) idemMetrics {
	m := idemMetrics{
		stored: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "idgen", Name: "idempotency_keys_stored_total",
			Help: "Idempotency keys whose first request recorded its answer."}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "idgen", Name: "idempotency_replays_total",
			Help: "Requests answered with the recorded answer of their key (Idempotent-Replayed: true)."}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "idempotency_conflicts_total",
			Help: "Keyed requests refused, by reason: reused (422), in_flight (409), limit (429)."}, []string{"reason"}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "idgen", Name: "idempotency_swept_keys_total",
			Help: "Expired idempotency keys deleted by this instance's sweeps."}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "idempotency_sweeps_total",
			Help: "Sweeps of expired idempotency keys, by result (ok or error)."}, []string{"result"}),
		live: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "idgen", Name: "idempotency_keys",
			Help: "Live idempotency keys in the store, all callers, as counted at the last sweep."}),
		expired: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "idgen", Name: "idempotency_expired_keys",
			Help: "Expired idempotency keys still in the store after the last sweep: a backlog the sweeps have not worked off (0 when each sweep keeps up)."}),
	}
	for _, r := range []string{"reused", "in_flight", "limit"} {
		m.conflicts.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "error"} {
		m.sweeps.WithLabelValues(r)
	}
	reg.MustRegister(m.stored, m.replays, m.conflicts, m.swept, m.sweeps, m.live, m.expired)
	return m
}

var _ idempotency.Observer = (*Metrics)(nil)

// KeyStored implements idempotency.Observer.
func (m *Metrics) KeyStored() { m.idem.stored.Inc() }

// Replayed implements idempotency.Observer.
func (m *Metrics) Replayed() { m.idem.replays.Inc() }

// Conflict implements idempotency.Observer.
func (m *Metrics) Conflict(reason string) { m.idem.conflicts.WithLabelValues(reason).Inc() }

// Swept implements idempotency.Observer.
func (m *Metrics) Swept(n int, live, expired int64, err error) {
	if err != nil {
		m.idem.sweeps.WithLabelValues("error").Inc()
	} else {
		m.idem.sweeps.WithLabelValues("ok").Inc()
	}
	if live >= 0 {
		m.idem.live.Set(float64(live))
	}
	if expired >= 0 {
		m.idem.expired.Set(float64(expired))
	}
	m.idem.swept.Add(float64(n))
}
