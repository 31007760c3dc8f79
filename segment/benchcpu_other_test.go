//go:build !unix

package segment_test

import "time"

// processCPU is not measured here; the benchmarks then report wall time
// alone.
func processCPU() (time.Duration, bool) { return 0, false }
