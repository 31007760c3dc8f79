package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are idgen's Prometheus collectors, all under the idgen_
// namespace. It implements segment.Observer, so the allocator reports
// loads and waits to it directly. Create one per process with NewMetrics
// and pass it to both the allocator and the server.
type Metrics struct {
	reg *prometheus.Registry

	issued       *prometheus.CounterVec
	loads        *prometheus.CounterVec
	loadLatency  *prometheus.HistogramVec
	waits        *prometheus.CounterVec
	storeErrors  *prometheus.CounterVec
	clockBack    prometheus.Counter
	requests     *prometheus.HistogramVec
	leaseHeld    prometheus.Gauge
	leaseExpires prometheus.Gauge
	workerID     prometheus.Gauge
}

// NewMetrics creates the collectors on a registry of their own, with the
// Go runtime and process collectors beside them.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{
		reg: reg,
		issued: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "ids_issued_total",
			Help: "IDs handed out, by tag and mode."}, []string{"tag", "mode"}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "segment_loads_total",
			Help: "Segment reservations, by tag and result (ok or error)."}, []string{"tag", "result"}),
		loadLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "idgen", Name: "segment_load_seconds",
			Help:    "Latency of segment reservations against the store.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"tag"}),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "segment_empty_buffer_waits_total",
			Help: "Requests that found both buffers of a tag empty and had to wait for a load."}, []string{"tag"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idgen", Name: "store_errors_total",
			Help: "Failed store operations, by operation."}, []string{"op"}),
		clockBack: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "idgen", Name: "clock_backward_events_total",
			Help: "Requests refused because the clock was behind the last issued timestamp."}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "idgen", Name: "http_request_duration_seconds",
			Help:    "HTTP requests, by route, method and status code.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2.5, 14)}, []string{"route", "method", "code"}),
		leaseHeld: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "idgen", Name: "worker_lease_held",
			Help: "1 while this instance holds a snowflake worker lease and may issue IDs, else 0."}),
		leaseExpires: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "idgen", Name: "worker_lease_expiry_timestamp_seconds",
			Help: "Unix time at which the held worker lease expires."}),
		workerID: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "idgen", Name: "worker_id",
			Help: "The snowflake worker ID in use, or -1."}),
	}
	m.workerID.Set(-1)
	for _, c := range []prometheus.Collector{m.issued, m.loads, m.loadLatency, m.waits, m.storeErrors, m.clockBack,
		m.requests, m.leaseHeld, m.leaseExpires, m.workerID,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	return m
}

// SegmentLoaded implements segment.Observer.
func (m *Metrics) SegmentLoaded(tag string, _ int64, latency time.Duration, err error) {
	if err != nil {
		m.loads.WithLabelValues(tag, "error").Inc()
		m.storeErrors.WithLabelValues("reserve").Inc()
		return
	}
	m.loads.WithLabelValues(tag, "ok").Inc()
	m.loadLatency.WithLabelValues(tag).Observe(latency.Seconds())
}

// WaitedForLoad implements segment.Observer.
func (m *Metrics) WaitedForLoad(tag string) { m.waits.WithLabelValues(tag).Inc() }

// WorkerLease records the snowflake lease state.
func (m *Metrics) WorkerLease(workerID int64, held bool, expires time.Time) {
	if !held {
		m.leaseHeld.Set(0)
		return
	}
	m.leaseHeld.Set(1)
	m.workerID.Set(float64(workerID))
	m.leaseExpires.Set(float64(expires.UnixMilli()) / 1000)
}

func (m *Metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// observe is middleware recording every request in the histogram, by
// route pattern rather than raw path, so that tags do not explode the
// label set.
func (m *Metrics) observe(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(route, c.Request.Method, strconv.Itoa(c.Writer.Status())).Observe(time.Since(start).Seconds())
}
