package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/fence"
)

// Metrics are idgen's Prometheus collectors, all under the idgen_
// namespace. It implements segment.Observer, so the allocator reports
// loads and waits to it directly. Create one per process with NewMetrics
// and pass it to both the allocator and the server. It is also a
// segment.RegressionObserver and a segment.ReleaseObserver.
type Metrics struct {
	reg *prometheus.Registry
	// epoch is when the Metrics were made: request durations are read
	// as time.Since(epoch) at both ends, one monotonic clock read each,
	// where time.Now reads the wall clock too.
	epoch time.Time

	issued      *prometheus.CounterVec
	loads       *prometheus.CounterVec
	reserved    *prometheus.CounterVec
	loadLatency *prometheus.HistogramVec
	waits       *prometheus.CounterVec
	regressions *prometheus.CounterVec
	released    *prometheus.CounterVec
	storeErrors *prometheus.CounterVec
	clientErrs  *prometheus.CounterVec
	retries     *prometheus.CounterVec
	fences      prometheus.Counter
	clockBack   prometheus.Counter
	requests    *prometheus.HistogramVec
	rpcRequests *prometheus.HistogramVec
	buildInfo   *prometheus.GaugeVec
	worker      atomic.Pointer[func() WorkerStatus]
	stats       atomic.Pointer[SegmentStats]
	ready       atomic.Pointer[func(context.Context) error]
	tls         atomic.Pointer[tls.Config] // WatchTLS

	// known holds the tags that reserved a segment in this process: only
	// they get per-tag series, so that made-up tags add none.
	known sync.Map

	// tags bounds the tags with series of their own (metricstags.go).
	// rank is held for reading while a tag's label is chosen and used,
	// and for writing while the tags are ranked again, so that no series
	// of a tag that lost its place is made again after it was deleted.
	tags     *tagLabels
	rank     sync.RWMutex
	rankedAt atomic.Int64 // Unix nanoseconds of the last ranking

	// cache keeps the hot path's labelled children (metricscache.go).
	cache seriesCache
	// rpcCache keeps the gRPC histogram's children by procedure
	// (grpcmetrics.go).
	rpcCache sync.Map

	idem idemMetrics // idempotency_metrics.go
	lock lockMetrics // lockmetrics.go
}

// readyProbeTimeout bounds the readiness check behind idgen_ready, so
// that a hung store cannot hold a scrape.
const readyProbeTimeout = time.Second

// NewMetrics creates the collectors on a registry of their own, with the
// Go runtime and process collectors beside them, with the default
// MetricsConfig: per-tag series for up to DefaultMetricsTagLimit tags.
func NewMetrics() *Metrics {
	m, err := NewMetricsConfig(MetricsConfig{})
	if err != nil {
		panic(err) // the zero config is valid
	}
	return m
}

// NewMetricsConfig is NewMetrics with per-tag series bounded by cfg.
func NewMetricsConfig(cfg MetricsConfig) (*Metrics, error) {
	tags, err := newTagLabels(cfg)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{
		reg:   reg,
		epoch: time.Now(),
		tags:  tags,
		issued: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "ids_issued_total",
			Help: "IDs handed out, by tag and mode."}, []string{"tag", "mode"}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "segment_loads_total",
			Help: "Segment reservations, by tag and result (ok or error)."}, []string{"tag", "result"}),
		reserved: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "segment_reserved_ids_total",
			Help: "IDs reserved from the store by segment loads, by tag: summed over instances, the growth of max_id."}, []string{"tag"}),
		// One histogram for all tags: per tag it cost 19 series each, and
		// /admin/segments has every tag's last load latency.
		loadLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "idgen", Name: "segment_load_seconds",
			Help:    "Latency of successful segment reservations against the store, all tags.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, nil),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "segment_empty_buffer_waits_total",
			Help: "Requests that found both buffers of a tag empty and had to wait for a load."}, []string{"tag"}),
		regressions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "segment_regressions_total",
			Help: "Ranges the store handed out below one reserved before (a restore, a lossy failover, a lowered max_id); skipped, never handed out."}, []string{"tag"}),
		// Shutdown's hand-back happens after idgen serve's listener
		// closed, so no scrape of that process sees source="shutdown"
		// (its log line does); a program that embeds the allocator and
		// closes it while serving its registry does.
		released: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "segment_released_ids_total",
			Help: "IDs handed back to the store, which hands them out again, by tag and source: shutdown (the unused rest of the segments, on Close) or client (a range's tail, through the release route). Only hand-backs the store accepted."}, []string{"tag", "source"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "store_errors_total",
			Help: "Failed store operations, by operation."}, []string{"op"}),
		clientErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "client_errors_total",
			Help: "Requests refused because of the caller's input, credentials or limits, by error code."}, []string{"code"}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "idgen", Name: "build_info",
			Help: "Always 1; the labels say which build is running."}, []string{"version", "goversion"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "store_retries_total",
			Help: "Store transactions run again after the database aborted them as a deadlock or serialization failure, by operation."}, []string{"op"}),
		fences: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "idgen", Name: "store_fences_total",
			Help: "Fences this instance performed: the store's history changed (a failover, a restore), so every tag's max_id moved up and worker leases were held."}),
		clockBack: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "idgen", Name: "clock_backward_events_total",
			Help: "Requests refused because the clock was behind the last issued timestamp."}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "idgen", Name: "http_request_duration_seconds",
			Help:    "HTTP requests, by route, method and status code.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2.5, 14)}, []string{"route", "method", "code"}),
		rpcRequests: newRPCHistogram(),
	}
	leaseHeld := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "idgen", Name: "worker_lease_held",
		Help: "1 while this instance's snowflake generator may issue IDs (lease held, clock sane), else 0."},
		func() float64 {
			if w, ok := m.workerStatus(); ok && w.Err == nil {
				return 1
			}
			return 0
		})
	leaseExpires := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "idgen", Name: "worker_lease_expiry_timestamp_seconds",
		Help: "Unix time at which the snowflake worker lease expires; 0 without a lease."},
		func() float64 {
			if w, ok := m.workerStatus(); ok && !w.LeaseExpiresAt.IsZero() {
				return float64(w.LeaseExpiresAt.UnixMilli()) / 1000
			}
			return 0
		})
	workerID := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "idgen", Name: "worker_id",
		Help: "The snowflake worker ID in use, or -1."},
		func() float64 {
			if w, ok := m.workerStatus(); ok {
				return float64(w.WorkerID)
			}
			return -1
		})
	snowflakeOn := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "idgen", Name: "snowflake_enabled",
		Help: "1 when this instance runs a snowflake generator (so idgen_worker_lease_held 0 means it cannot issue), else 0."},
		func() float64 {
			if _, ok := m.workerStatus(); ok {
				return 1
			}
			return 0
		})
	ready := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "idgen", Name: "ready",
		Help: "1 while /readyz would answer 200 (the instance can issue IDs), else 0."},
		func() float64 {
			f := m.ready.Load()
			if f == nil {
				return 0
			}
			ctx, cancel := context.WithTimeout(context.Background(), readyProbeTimeout)
			defer cancel()
			if (*f)(ctx) != nil {
				return 0
			}
			return 1
		})
	// The one store operation every instance performs: its series exists
	// from the start, so that rate() over it is 0 rather than absent.
	m.storeErrors.WithLabelValues("reserve")
	m.retries.WithLabelValues("reserve")
	m.rankedAt.Store(time.Now().UnixNano())
	for _, c := range []prometheus.Collector{m.issued, m.loads, m.reserved, m.loadLatency, m.waits, m.regressions, m.released, m.storeErrors, m.retries, m.fences, m.clockBack,
		m.requests, m.rpcRequests, m.clientErrs, m.buildInfo, m.tlsExpiryGauge(), leaseHeld, leaseExpires, workerID, snowflakeOn, ready, bufferCollector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	m.idem = newIdemMetrics(reg)
	m.lock = newLockMetrics(reg)
	return m, nil
}

// SegmentLoaded implements segment.Observer. A tag the store does not
// know, or that the tag cap refuses, is the caller's mistake, not the
// store's: the server counts it as a client error, and it adds no series.
// A store failure is labelled by tag only for tags that exist.
func (m *Metrics) SegmentLoaded(tag string, size int64, latency time.Duration, err error) {
	switch {
	case err == nil:
		m.known.Store(tag, struct{}{})
		m.withLabel(tag, func(label string) {
			m.loads.WithLabelValues(label, "ok").Inc()
			m.reserved.WithLabelValues(label).Add(float64(size))
			// A tag's regression and wait counters exist at 0 from its
			// first load: a series that first appears at 1 has no
			// increase() for an alert, and a dashboard shows 0 rather
			// than nothing.
			m.regressions.WithLabelValues(label)
			m.waits.WithLabelValues(label)
		})
		m.loadLatency.WithLabelValues().Observe(latency.Seconds())
	case errors.Is(err, segment.ErrTagNotFound), errors.Is(err, segment.ErrTagLimit), errors.Is(err, segment.ErrInvalidTag):
	default:
		m.storeErrors.WithLabelValues("reserve").Inc()
		if m.isKnown(tag) {
			m.withLabel(tag, func(label string) { m.loads.WithLabelValues(label, "error").Inc() })
		}
	}
}

// StoreRetried counts a store transaction run again after a retryable
// error, by operation; it fits the stores' ObserveRetries.
func (m *Metrics) StoreRetried(op string) { m.retries.WithLabelValues(op).Inc() }

// StoreFenced counts a fence this instance performed; it fits the
// stores' ObserveFences.
func (m *Metrics) StoreFenced(fence.Event) { m.fences.Inc() }

// WaitedForLoad implements segment.Observer. The first load of a tag
// always has a waiter; waits count from the second on.
func (m *Metrics) WaitedForLoad(tag string) {
	if m.isKnown(tag) {
		m.withLabel(tag, func(label string) { m.waits.WithLabelValues(label).Inc() })
	}
}

func (m *Metrics) isKnown(tag string) bool {
	_, ok := m.known.Load(tag)
	return ok
}

// SetBuildInfo sets idgen_build_info{version,goversion} to 1.
func (m *Metrics) SetBuildInfo(version, goVersion string) {
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, goVersion).Set(1)
}

// SegmentRegressed implements segment.RegressionObserver.
func (m *Metrics) SegmentRegressed(tag string, _ segment.Range, _ int64) {
	m.withLabel(tag, func(label string) { m.regressions.WithLabelValues(label).Inc() })
}

// SegmentReleased implements segment.ReleaseObserver.
func (m *Metrics) SegmentReleased(tag string, ids int64, shutdown bool) {
	source := "client"
	if shutdown {
		source = "shutdown"
	}
	m.withLabel(tag, func(label string) { m.released.WithLabelValues(label, source).Add(float64(ids)) })
}

// WatchWorker makes the worker gauges read the snowflake generator's
// state at each scrape.
func (m *Metrics) WatchWorker(status func() WorkerStatus) { m.worker.Store(&status) }

// watch makes the segment buffer gauges and idgen_ready read the
// server's allocator and readiness check at each scrape.
func (m *Metrics) watch(stats SegmentStats, ready func(context.Context) error) {
	if stats != nil {
		m.stats.Store(&stats)
	}
	m.ready.Store(&ready)
}

// bufferCollector reports each tag's buffered IDs and step, read from
// the allocator at scrape time rather than updated on the hot path. The
// tags without series of their own are summed under OtherTag for
// buffered IDs, so that buffered over issued (the time-to-empty rule)
// still divides like by like; they have no step series, as a sum or a
// maximum of steps means nothing.
type bufferCollector struct{ m *Metrics }

var (
	bufferedDesc = prometheus.NewDesc("idgen_segment_buffered_ids",
		"IDs of a tag held in memory (current and next segment): what this instance can hand out without the store.",
		[]string{"tag"}, nil)
	stepDesc = prometheus.NewDesc("idgen_segment_step",
		"Size of a tag's last loaded segment (the dynamic step); both buffers full hold twice this.",
		[]string{"tag"}, nil)
)

func (c bufferCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- bufferedDesc
	ch <- stepDesc
}

func (c bufferCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.m.stats.Load()
	if p == nil {
		return
	}
	var other int64
	var others bool
	for _, st := range (*p).Stats() {
		if !c.m.tags.has(st.Tag) {
			other += buffered(st)
			others = true
			continue
		}
		ch <- prometheus.MustNewConstMetric(bufferedDesc, prometheus.GaugeValue, float64(buffered(st)), st.Tag)
		ch <- prometheus.MustNewConstMetric(stepDesc, prometheus.GaugeValue, float64(st.Step), st.Tag)
	}
	if others {
		ch <- prometheus.MustNewConstMetric(bufferedDesc, prometheus.GaugeValue, float64(other), OtherTag)
	}
}

func buffered(st segment.SequenceStats) int64 {
	n := st.Current.End - st.Current.Pos
	if st.Next != nil {
		n += st.Next.End - st.Next.Pos
	}
	return max(n, 0)
}

func (m *Metrics) workerStatus() (WorkerStatus, bool) {
	f := m.worker.Load()
	if f == nil {
		return WorkerStatus{}, false
	}
	return (*f)(), true
}

func (m *Metrics) handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.maybeRank(time.Now())
		h.ServeHTTP(w, r)
	})
}

// observe is middleware recording every request in the histogram, by
// route pattern rather than raw path, so that tags do not explode the
// label set.
func (m *Metrics) observe(c *gin.Context) {
	start := time.Since(m.epoch)
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	m.requestObserver(route, methodLabel(c.Request.Method), c.Writer.Status()).Observe((time.Since(m.epoch) - start).Seconds())
}

// methodLabel keeps made-up methods, which any caller can send, from
// becoming series of their own.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete, http.MethodHead, http.MethodOptions:
		return m
	}
	return "other"
}
