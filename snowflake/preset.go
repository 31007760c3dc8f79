package snowflake

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// twitterEpochMs is Twitter's snowflake epoch, 2010-11-04T01:42:54.657Z,
// which Meituan Leaf's snowflake mode uses too.
const twitterEpochMs = 1288834974657

// ParseLayout builds a Layout from the forms of idgen's serve flags.
//
// layout is a preset name or bit widths: "idgen" or "" (41/10/12 from
// 2026-01-01, the default), "leaf" or "twitter" (41/10/12 from Twitter's
// epoch, 1288834974657 ms, so IDs continue Leaf's and Twitter-style ID
// spaces), or "T/W/S" bits of time, worker and sequence summing to 63.
//
// epoch, if not empty, replaces the preset's epoch: RFC 3339
// ("2015-01-01T00:00:00Z") or Unix milliseconds ("1420070400000"). Bit
// widths without an epoch count from idgen's default epoch.
func ParseLayout(layout, epoch string) (Layout, error) {
	epochMs := int64(defaultEpochMs)
	var t, w, s int
	switch strings.ToLower(strings.TrimSpace(layout)) {
	case "", "idgen":
		t, w, s = defaultTimeBits, defaultWorkerBits, defaultSequenceBits
	case "leaf", "twitter":
		t, w, s = 41, 10, 12
		epochMs = twitterEpochMs
	default:
		parts := strings.Split(layout, "/")
		var err error
		if len(parts) == 3 {
			if t, err = strconv.Atoi(parts[0]); err == nil {
				if w, err = strconv.Atoi(parts[1]); err == nil {
					s, err = strconv.Atoi(parts[2])
				}
			}
		}
		if len(parts) != 3 || err != nil {
			return Layout{}, fmt.Errorf("%w: layout %q: use a preset (idgen, leaf, twitter) or time/worker/sequence bits such as 41/10/12",
				ErrInvalidConfig, layout)
		}
	}
	if epoch = strings.TrimSpace(epoch); epoch != "" {
		if ms, err := strconv.ParseInt(epoch, 10, 64); err == nil {
			epochMs = ms
		} else if tm, err := time.Parse(time.RFC3339Nano, epoch); err == nil {
			epochMs = tm.UnixMilli()
		} else {
			return Layout{}, fmt.Errorf("%w: epoch %q: use RFC 3339 (2010-11-04T01:42:54.657Z) or Unix milliseconds (1288834974657)",
				ErrInvalidConfig, epoch)
		}
		if epochMs < 0 {
			return Layout{}, fmt.Errorf("%w: epoch %q is before 1970", ErrInvalidConfig, epoch)
		}
	}
	if epochMs == 0 {
		// NewLayout reads the zero Time as "the default epoch".
		return Layout{}, fmt.Errorf("%w: epoch 0 (1970-01-01) is not supported; choose a later epoch", ErrInvalidConfig)
	}
	if t <= 0 || w <= 0 || s <= 0 {
		return Layout{}, fmt.Errorf("%w: layout %q: every width must be positive", ErrInvalidConfig, layout)
	}
	return NewLayout(time.UnixMilli(epochMs), t, w, s)
}

// Config returns a Config with l's epoch and widths, for New and
// LeasedConfig.Generator.
func (l Layout) Config() Config {
	l = l.norm()
	return Config{Epoch: l.Epoch(), TimeBits: l.TimeBits(), WorkerBits: l.WorkerBits(), SequenceBits: l.SequenceBits()}
}

// WorkerRange is the worker IDs From..To-1. The zero WorkerRange means
// every worker ID of the layout.
type WorkerRange struct {
	From, To int64
}

// ParseWorkerRange reads "A-B", the worker IDs A to B inclusive, as the
// --worker-range flag takes it. The empty string is the zero WorkerRange.
func ParseWorkerRange(s string) (WorkerRange, error) {
	if strings.TrimSpace(s) == "" {
		return WorkerRange{}, nil
	}
	a, b, ok := strings.Cut(s, "-")
	lo, err1 := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	hi, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	// LAST == MaxInt64 would make the exclusive end wrap negative and slip
	// past every bound a caller checks.
	if hi == math.MaxInt64 {
		return WorkerRange{}, fmt.Errorf("%w: worker range %q: LAST must be below %d", ErrInvalidConfig, s, hi)
	}
	if !ok || err1 != nil || err2 != nil || lo < 0 || hi < lo {
		return WorkerRange{}, fmt.Errorf("%w: worker range %q: use FIRST-LAST, such as 512-1023, with 0 <= FIRST <= LAST", ErrInvalidConfig, s)
	}
	return WorkerRange{From: lo, To: hi + 1}, nil
}

// String returns the range as ParseWorkerRange reads it.
func (r WorkerRange) String() string {
	if r == (WorkerRange{}) {
		return ""
	}
	return strconv.FormatInt(r.From, 10) + "-" + strconv.FormatInt(r.To-1, 10)
}
