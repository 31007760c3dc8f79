package server

import (
	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// newRPCHistogram is idgen_grpc_request_duration_seconds: gRPC, gRPC-Web
// and Connect calls by procedure and status code, with the buckets of
// the HTTP histogram so that the two read alike.
func newRPCHistogram() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "idgen", Name: "grpc_request_duration_seconds",
		Help:    "gRPC, gRPC-Web and Connect calls, by procedure (/package.Service/Method, or unmatched) and gRPC status code (ok, invalid_argument, unavailable…).",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2.5, 14)}, []string{"procedure", "code"})
}

// rpcObserver returns the child of procedure and code, cached as the HTTP
// histogram's are (metricscache.go). Procedures come from the handlers
// registered, so the sync.Map stays small.
func (m *Metrics) rpcObserver(procedure string, code connect.Code) prometheus.Observer {
	v, ok := m.rpcCache.Load(procedure)
	if !ok {
		v, _ = m.rpcCache.LoadOrStore(procedure, new(children[prometheus.Observer]))
	}
	return v.(*children[prometheus.Observer]).get("", int(code), func() prometheus.Observer {
		return m.rpcRequests.WithLabelValues(procedure, rpcCodeLabel(code))
	})
}
