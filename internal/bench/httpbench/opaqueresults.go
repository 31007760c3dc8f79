package httpbench

import (
	"fmt"
	"strings"
)

// OpaqueFile is the result file of TestLiveOpaque.
const OpaqueFile = "opaque.json"

// OpaqueResult is the opaque table: GET /id/{tag} of one idgen binary on
// a plain and an opaque tag, rounds interleaved. In Throughput, Floor is
// the plain tag and Idgen the opaque one.
type OpaqueResult struct {
	Quick      bool         `json:"quick"`
	LoadAvg    LoadAvg      `json:"load_avg"`
	Rounds     int          `json:"rounds"`
	Seconds    float64      `json:"seconds"`
	Throughput []Throughput `json:"throughput"`
	// Batch is the count of the batch rows, each one request at a time
	// (wrk -c1): what a caller of a big batch waits.
	Batch       int         `json:"batch"`
	BatchPlain  []WrkResult `json:"batch_plain"`
	BatchOpaque []WrkResult `json:"batch_opaque"`
}

// Markdown renders the result as docs/benchmarks.md's opaque tables.
func (r OpaqueResult) Markdown() string {
	var b strings.Builder
	ratioTable(&b, "| connections | plain req/s | opaque req/s | opaque ÷ plain | ratio range | plain CPU µs/req | opaque CPU µs/req | CPU opaque ÷ plain | ratio range |", r.Throughput)
	var lat, cpu []float64
	for i := range r.BatchPlain {
		lat = append(lat, r.BatchPlain[i].RPS/r.BatchOpaque[i].RPS)
		cpu = append(cpu, r.BatchOpaque[i].CPUPerRequest()/r.BatchPlain[i].CPUPerRequest())
	}
	fmt.Fprintf(&b, "\n| `count=%d`, one request at a time | plain | opaque | opaque ÷ plain | ratio range |\n|---|--:|--:|--:|--:|\n", r.Batch)
	fmt.Fprintf(&b, "| latency, ms | %.2f | %.2f | %.2f | %.2f–%.2f |\n",
		1e3/median(r.BatchPlain, WrkResult.rps), 1e3/median(r.BatchOpaque, WrkResult.rps), Median(lat), minOf(lat), maxOf(lat))
	fmt.Fprintf(&b, "| server CPU, ms | %.2f | %.2f | %.2f | %.2f–%.2f |\n",
		median(r.BatchPlain, WrkResult.CPUPerRequest)/1e3, median(r.BatchOpaque, WrkResult.CPUPerRequest)/1e3, Median(cpu), minOf(cpu), maxOf(cpu))
	return b.String()
}

func (w WrkResult) rps() float64 { return w.RPS }

func median(ws []WrkResult, f func(WrkResult) float64) float64 {
	v := make([]float64, len(ws))
	for i, w := range ws {
		v[i] = f(w)
	}
	return Median(v)
}

// ratioTable writes header and one row per connection count of tps: the
// medians of both sides' rate and CPU per call, and the median and range
// of each round's ratio, Idgen ÷ Floor.
func ratioTable(b *strings.Builder, header string, tps []Throughput) {
	b.WriteString(header + "\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, tp := range tps {
		var fr, ir, fc, ic, rr, cr []float64
		for i := range tp.Floor {
			fr, ir = append(fr, tp.Floor[i].RPS), append(ir, tp.Idgen[i].RPS)
			fc, ic = append(fc, tp.Floor[i].CPUPerRequest()), append(ic, tp.Idgen[i].CPUPerRequest())
			rr = append(rr, tp.Idgen[i].RPS/tp.Floor[i].RPS)
			cr = append(cr, tp.Idgen[i].CPUPerRequest()/tp.Floor[i].CPUPerRequest())
		}
		fmt.Fprintf(b, "| %d | %s | %s | %.2f | %.2f–%.2f | %.1f | %.1f | %.2f | %.2f–%.2f |\n", tp.Conns,
			thousands(Median(fr)), thousands(Median(ir)), Median(rr), minOf(rr), maxOf(rr), Median(fc), Median(ic), Median(cr), minOf(cr), maxOf(cr))
	}
}
