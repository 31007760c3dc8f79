package server

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idgen/idgen/lock"
)

// Lock metrics (docs/operations.md). No label names a lock or an owner:
// names are the callers' to make up, and even bounded by --max-locks
// they would be thousands of series. Calls, outcomes and ways of loss
// are fixed sets, and every series exists from the start, so that
// increase() over a first event is not lost to an absent series.

// lockObserver is what lockService reports to; *Metrics is one, and
// nopLockObserver stands in without metrics.
type lockObserver interface {
	// lockCall counts one acquire, renew or release by outcome.
	lockCall(call, outcome string)
	// lockWaiting moves the gauge of acquires queued now by delta.
	lockWaiting(delta int)
	// lockWaited records one queued acquire: how it ended and how long.
	lockWaited(outcome string, d time.Duration)
	// lockLost counts a grant found lost while its holder renewed it.
	lockLost(via string)
}

type nopLockObserver struct{}

func (nopLockObserver) lockCall(string, string)          {}
func (nopLockObserver) lockWaiting(int)                  {}
func (nopLockObserver) lockWaited(string, time.Duration) {}
func (nopLockObserver) lockLost(string)                  {}

// Lock call outcomes: the first of each call's list is its success.
var lockOutcomes = map[string][]string{
	"acquire": {"granted", "held", "limit", "invalid", "canceled", "error"},
	"renew":   {"renewed", "lost", "invalid", "canceled", "error"},
	"release": {"released", "not_held", "invalid", "canceled", "error"},
}

// lockWaitOutcomes end a queued acquire: granted, still held at the end
// of the wait, the caller gone, or the store failing.
var lockWaitOutcomes = []string{"granted", "held", "canceled", "error"}

// Ways a grant is found lost: a Renew refused (the client's lease ends
// with lock_lost) or a Hold stream that ended lost.
var lockLossVias = []string{"renew", "hold"}

// lockOutcome names err's outcome for a call whose success is ok.
func lockOutcome(err error, ok string) string {
	var held *lockHeldError
	switch {
	case err == nil:
		return ok
	case errors.As(err, &held), errors.Is(err, lock.ErrHeld):
		return "held"
	case errors.Is(err, lock.ErrLost):
		return "lost"
	case errors.Is(err, lock.ErrNotHeld):
		return "not_held"
	case errors.Is(err, errLockLimit):
		return "limit"
	case errors.Is(err, lock.ErrInvalidName), errors.Is(err, lock.ErrInvalidOwner), errors.Is(err, lock.ErrInvalidTTL),
		errors.Is(err, errLockWait):
		return "invalid"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "error"
}

// lockMetrics are the lock collectors of Metrics.
type lockMetrics struct {
	calls   *prometheus.CounterVec
	waiting prometheus.Gauge
	waited  *prometheus.HistogramVec
	losses  *prometheus.CounterVec
	guard   *prometheus.CounterVec
}

func newLockMetrics(reg *prometheus.Registry) lockMetrics {
	m := lockMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "lock_calls_total",
			Help: "Lock calls over every transport, by call (acquire, renew, release) and outcome (granted, renewed, released, held, lost, not_held, limit, invalid, canceled, error)."},
			[]string{"call", "outcome"}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "idgen", Name: "lock_waiting",
			Help: "Acquires on this instance queued now for a lock another owner holds."}),
		// Buckets from 1 ms to about 33 s: a wait ends by MaxLockWait (20 s).
		waited: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "idgen", Name: "lock_wait_seconds",
			Help:    "Acquires that found the lock held and queued for it, by how the wait ended (granted, held, canceled, error): the time queued.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"outcome"}),
		losses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "lock_losses_total",
			Help: "Grants found lost while their holder still renewed them (lapsed or taken over), by how: renew (a Renew answered lock_lost) or hold (a Hold stream ended lost)."},
			[]string{"via"}),
		guard: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "lock_guard_checks_total",
			Help: "Fencing-token checks of a lock.Guard given these Metrics as its Observer, by result: accepted, stale (a write refused: its holder lost the lock) or error."},
			[]string{"result"}),
	}
	for call, outs := range lockOutcomes {
		for _, o := range outs {
			m.calls.WithLabelValues(call, o)
		}
	}
	for _, o := range lockWaitOutcomes {
		m.waited.WithLabelValues(o)
	}
	for _, v := range lockLossVias {
		m.losses.WithLabelValues(v)
	}
	for _, r := range []string{"accepted", "stale", "error"} {
		m.guard.WithLabelValues(r)
	}
	reg.MustRegister(m.calls, m.waiting, m.waited, m.losses, m.guard)
	return m
}

func (m *Metrics) lockCall(call, outcome string) { m.lock.calls.WithLabelValues(call, outcome).Inc() }
func (m *Metrics) lockWaiting(delta int)         { m.lock.waiting.Add(float64(delta)) }
func (m *Metrics) lockLost(via string)           { m.lock.losses.WithLabelValues(via).Inc() }

func (m *Metrics) lockWaited(outcome string, d time.Duration) {
	m.lock.waited.WithLabelValues(outcome).Observe(d.Seconds())
}

var _ lock.GuardObserver = (*Metrics)(nil)

// TokenChecked implements lock.GuardObserver: a program that guards its
// writes with a lock.Guard passes its *Metrics as GuardConfig.Observer,
// and its stale tokens are counted beside the server's lock metrics.
func (m *Metrics) TokenChecked(err error) {
	switch {
	case err == nil:
		m.lock.guard.WithLabelValues("accepted").Inc()
	case errors.Is(err, lock.ErrStaleToken):
		m.lock.guard.WithLabelValues("stale").Inc()
	default:
		m.lock.guard.WithLabelValues("error").Inc()
	}
}
