package httpbench

import (
	"math"
	"slices"
	"time"
)

func sortSamples(s []Sample) {
	slices.SortFunc(s, func(a, b Sample) int {
		switch {
		case a.Due < b.Due:
			return -1
		case a.Due > b.Due:
			return 1
		}
		return 0
	})
}

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values
// at or below it. It returns 0 for no values.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// The epsilon keeps 99.9% of 1000 at rank 999 despite rounding.
	i := int(math.Ceil(p/100*float64(len(sorted))-1e-9)) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Median returns the median of vs, the mean of the middle two for an even
// count, or 0 for none. vs is not changed.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Latencies summarises the successful (200) requests of a run.
type Latencies struct {
	// Offered is the load in requests/s.
	Offered float64 `json:"offered"`
	// OK, Failed and Unsent count requests answered 200, answered
	// otherwise or not at all, and never sent.
	OK     int `json:"ok"`
	Failed int `json:"failed"`
	Unsent int `json:"unsent"`
	// Percentiles of latency from due time, in microseconds.
	P50  float64 `json:"p50_us"`
	P99  float64 `json:"p99_us"`
	P999 float64 `json:"p999_us"`
	Max  float64 `json:"max_us"`
	// LagP99 is the 99th percentile of how late the generator sent
	// requests, in microseconds: the measurement's own error.
	LagP99 float64 `json:"lag_p99_us"`
}

// Summarise computes the Latencies of r at offered requests/s.
func (r Run) Summarise(offered float64) Latencies {
	l := Latencies{Offered: offered, Unsent: r.Unsent}
	var lat, lag []time.Duration
	for _, s := range r.Samples {
		if s.Status != 200 {
			l.Failed++
			continue
		}
		l.OK++
		lat = append(lat, s.Latency())
		lag = append(lag, s.Lag())
	}
	slices.Sort(lat)
	slices.Sort(lag)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	l.P50, l.P99, l.P999 = us(Percentile(lat, 50)), us(Percentile(lat, 99)), us(Percentile(lat, 99.9))
	if len(lat) > 0 {
		l.Max = us(lat[len(lat)-1])
	}
	l.LagP99 = us(Percentile(lag, 99))
	return l
}
