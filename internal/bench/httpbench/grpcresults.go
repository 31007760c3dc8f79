package httpbench

import (
	"fmt"
	"slices"
	"strings"
)

// GRPCFile is the result file of TestLiveGRPC.
const GRPCFile = "grpc.json"

// GRPCResult is the gRPC table.
type GRPCResult struct {
	Quick      bool         `json:"quick"`
	LoadAvg    LoadAvg      `json:"load_avg"`
	Rounds     int          `json:"rounds"`
	Seconds    float64      `json:"seconds"`
	Conns      int          `json:"conns"`
	Throughput []Throughput `json:"throughput"` // Conns holds the streams
	Batch      int          `json:"batch"`
	// Batches of Batch IDs per call, from idgen.
	Batches []WrkResult `json:"batches"`
	// CachingClient is IDs/s of client.WithGRPC's caching allocator, one
	// value per round, with the ranges it reserved over gRPC.
	CachingClient []float64 `json:"caching_client_ids_per_s"`
	RangeCalls    []int64   `json:"caching_client_range_calls"`
}

// Markdown renders the result as docs/benchmarks.md's gRPC tables.
func (r GRPCResult) Markdown() string {
	var b strings.Builder
	ratioTable(&b, "| streams | floor calls/s | idgen calls/s | idgen ÷ floor | ratio range | floor CPU µs/call | idgen CPU µs/call | CPU idgen ÷ floor | ratio range |", r.Throughput)
	var bi []float64
	for _, w := range r.Batches {
		bi = append(bi, w.RPS*float64(r.Batch))
	}
	fmt.Fprintf(&b, "\n| what | IDs/s |\n|---|--:|\n")
	fmt.Fprintf(&b, "| `Next` with `count: %d`, 64 streams | %.2f M |\n", r.Batch, Median(bi)/1e6)
	fmt.Fprintf(&b, "| `client.WithGRPC()` caching allocator, 8 goroutines | %.2f M |\n", Median(r.CachingClient)/1e6)
	return b.String()
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// thousands formats n with thousands separators, as the HTTP tables do.
func thousands(n float64) string {
	s := fmt.Sprintf("%.0f", n)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// GRPCNativeFile is the result file of TestLiveGRPCNative.
const GRPCNativeFile = "grpcnative.json"

// GRPCNativeResult is the table of gRPC on grpc-go's transport: pairs of
// servers measured in the same interleaved rounds with the same grpc-go
// client.
type GRPCNativeResult struct {
	Quick   bool    `json:"quick"`
	LoadAvg LoadAvg `json:"load_avg"`
	Rounds  int     `json:"rounds"`
	Seconds float64 `json:"seconds"`
	Conns   int     `json:"conns"`
	// CheckIDs is how many IDs of each run were checked for duplicates.
	CheckIDs int          `json:"check_ids"`
	Pairs    []NativePair `json:"pairs"`
}

// NativePair is idgen beside its floor (or a peer) at each stream count:
// in Throughput, Conns holds the streams.
type NativePair struct {
	Floor      string       `json:"floor"`
	Idgen      string       `json:"idgen"`
	Throughput []Throughput `json:"throughput"`
}

// Markdown renders the result: one ratio table per pair, and the
// duplicate check.
func (r GRPCNativeResult) Markdown() string {
	var b strings.Builder
	var checked, dups, failed, calls int64
	for _, p := range r.Pairs {
		fmt.Fprintf(&b, "**%s** beside **%s**:\n\n", p.Idgen, p.Floor)
		ratioTable(&b, "| streams | floor calls/s | idgen calls/s | idgen ÷ floor | ratio range | floor CPU µs/call | idgen CPU µs/call | CPU idgen ÷ floor | ratio range |", p.Throughput)
		b.WriteString("\n")
		for _, tp := range p.Throughput {
			for _, w := range append(slices.Clone(tp.Floor), tp.Idgen...) {
				checked, dups, failed, calls = checked+w.Checked, dups+w.Duplicates, failed+w.Non2xx, calls+w.Requests
			}
		}
	}
	fmt.Fprintf(&b, "Every answer was checked to carry an ID; the first %s IDs of every run, %s in all, were checked for duplicates: %d found. %d of %s calls failed.\n",
		thousands(float64(r.CheckIDs)), thousands(float64(checked)), dups, failed, thousands(float64(calls)))
	return b.String()
}
