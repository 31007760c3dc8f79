package main

// The figures of the rendered tables: medians of wrk's rounds, and
// numbers written as the document writes them.

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/idgen/idgen/internal/bench/httpbench"
)

func medianRPS(ws []httpbench.WrkResult) float64 {
	var vs []float64
	for _, w := range ws {
		vs = append(vs, w.RPS)
	}
	return httpbench.Median(vs)
}

// medianCPU is the median CPU µs per request of ws.
func medianCPU(ws []httpbench.WrkResult) float64 {
	var vs []float64
	for _, w := range ws {
		vs = append(vs, w.CPUPerRequest())
	}
	return httpbench.Median(vs)
}

func joinInts(vs []int, sep string) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, sep)
}

func minMax(vs []float64) (lo, hi float64) {
	for i, v := range vs {
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
	}
	return lo, hi
}

func storeName(s string) string {
	switch s {
	case "sqlite":
		return "SQLite"
	case "postgres":
		return "PostgreSQL"
	}
	return s
}

// thousands formats v rounded, with thin separators: 12,345.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var out bytes.Buffer
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out.WriteByte(',')
		}
		out.WriteRune(c)
	}
	return out.String()
}

func millions(v float64) string { return fmt.Sprintf("%.2f M", v/1e6) }

// micros formats a time in microseconds as µs or ms.
func micros(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.2f s", us/1e6)
	case us >= 1000:
		return fmt.Sprintf("%.1f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}

func millis(ms float64) string { return strconv.FormatFloat(ms, 'f', -1, 64) + " ms" }

func secs(s float64) string { return strconv.FormatFloat(s, 'f', -1, 64) + " s" }

func sOrNone(s float64) string {
	if s < 0 {
		return "none"
	}
	return fmt.Sprintf("%.2f s", s)
}

// percent formats a share as a percentage with about two significant
// digits.
func percent(v float64) string {
	switch {
	case v == 0:
		return "0%"
	case v < 0.1:
		return fmt.Sprintf("%.2f%%", v*100)
	}
	return fmt.Sprintf("%.0f%%", v*100)
}
