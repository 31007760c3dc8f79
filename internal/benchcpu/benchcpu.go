// Package benchcpu adds the process's CPU time per operation to a
// benchmark (cpu-ns/op). On a machine shared with other work, wall time
// (sec/op) grows with the load, since a benchmark's goroutines wait for
// a core; CPU time per operation is the cost, the garbage collector
// included, and holds steadier, so a benchmark and its floor compare
// better by it when neither can run on a quiet machine.
package benchcpu

import "testing"

// Report, deferred around a benchmark's loop (defer benchcpu.Report(b)()),
// reports cpu-ns/op. Where the process's CPU time cannot be read it
// reports nothing, and the benchmark has wall time alone.
func Report(b *testing.B) func() {
	start, ok := processCPU()
	return func() {
		end, ok2 := processCPU()
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
