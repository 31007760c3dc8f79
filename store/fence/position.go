package fence

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

var (
	// ErrPosition is returned for a position that is not in its Kind's
	// notation.
	ErrPosition = errors.New("fence: unreadable position")

	// ErrUnsupported is returned by a store whose server cannot tell its
	// identity (an engine that speaks a supported protocol only): it runs
	// without fencing.
	ErrUnsupported = errors.New("fence: the server cannot tell its identity")
)

// Behind reports whether position cur of a server of kind k is behind
// seen, an earlier reading: the server has lost something it had. An
// empty position on either side compares as not behind.
//
//   - Postgres: WAL LSNs ("16/B374D848"); behind if lower.
//   - MySQL: GTID sets (@@gtid_executed); behind unless seen is a subset
//     of cur, what GTID_SUBSET(seen, cur) computes on the server.
//   - MariaDB: GTID positions ("0-1-100,1-2-7", one per domain); behind
//     if a domain's sequence number is lower than seen, or missing.
//   - Galera, SQLite: decimal counters; behind if lower.
func Behind(k Kind, cur, seen string) (bool, error) {
	if cur == "" || seen == "" {
		return false, nil
	}
	switch k {
	case Postgres:
		c, err := ParseLSN(cur)
		if err != nil {
			return false, err
		}
		s, err := ParseLSN(seen)
		if err != nil {
			return false, err
		}
		return c < s, nil
	case MySQL:
		c, err := parseGTIDSet(cur)
		if err != nil {
			return false, err
		}
		s, err := parseGTIDSet(seen)
		if err != nil {
			return false, err
		}
		return !s.subsetOf(c), nil
	case MariaDB:
		c, err := parseMariaPos(cur)
		if err != nil {
			return false, err
		}
		s, err := parseMariaPos(seen)
		if err != nil {
			return false, err
		}
		for d, n := range s {
			if c[d] < n {
				return true, nil
			}
		}
		return false, nil
	case Galera, SQLite:
		c, err := strconv.ParseUint(strings.TrimSpace(cur), 10, 64)
		if err != nil {
			return false, fmt.Errorf("%w: %q", ErrPosition, cur)
		}
		s, err := strconv.ParseUint(strings.TrimSpace(seen), 10, 64)
		if err != nil {
			return false, fmt.Errorf("%w: %q", ErrPosition, seen)
		}
		return c < s, nil
	}
	return false, fmt.Errorf("%w: unknown kind %q", ErrPosition, k)
}

// ParseLSN reads a PostgreSQL pg_lsn: two hex numbers, the high and low
// 32 bits, around a slash.
func ParseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, fmt.Errorf("%w: LSN %q has no slash", ErrPosition, s)
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%w: LSN %q", ErrPosition, s)
	}
	return h<<32 | l, nil
}

// parseMariaPos reads a MariaDB GTID position: domain-server-sequence
// triples separated by commas, one per domain.
func parseMariaPos(s string) (map[uint64]uint64, error) {
	out := map[uint64]uint64{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, "-")
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: GTID %q is not domain-server-sequence", ErrPosition, part)
		}
		d, err1 := strconv.ParseUint(f[0], 10, 32)
		_, err2 := strconv.ParseUint(f[1], 10, 32)
		n, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("%w: GTID %q", ErrPosition, part)
		}
		out[d] = max(out[d], n)
	}
	return out, nil
}

// gtidSet is a MySQL GTID set: per source UUID (and tag, MySQL 8.3+),
// the transaction numbers as closed intervals.
type gtidSet map[string][][2]uint64

// parseGTIDSet reads "uuid:1-5:7,uuid2:tag:1-3" (whitespace and newlines
// allowed, as @@gtid_executed prints them).
func parseGTIDSet(s string) (gtidSet, error) {
	out := gtidSet{}
	for _, part := range strings.Split(oneLine(s), ",") {
		if part == "" {
			continue
		}
		f := strings.Split(part, ":")
		if len(f) < 2 || len(f[0]) != 36 {
			return nil, fmt.Errorf("%w: GTID set element %q", ErrPosition, part)
		}
		key := strings.ToLower(f[0])
		for _, iv := range f[1:] {
			lo, hi, isRange := strings.Cut(iv, "-")
			a, err := strconv.ParseUint(lo, 10, 64)
			if err != nil {
				if isRange || iv == "" {
					return nil, fmt.Errorf("%w: GTID interval %q", ErrPosition, iv)
				}
				key = strings.ToLower(f[0]) + ":" + iv // a tag: the intervals after it are its own
				continue
			}
			b := a
			if isRange {
				if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
					return nil, fmt.Errorf("%w: GTID interval %q", ErrPosition, iv)
				}
			}
			out[key] = append(out[key], [2]uint64{a, b})
		}
	}
	return out, nil
}

// subsetOf reports whether every transaction of s is in c.
func (s gtidSet) subsetOf(c gtidSet) bool {
	for k, ivs := range s {
		for _, iv := range ivs {
			if !covered(c[k], iv) {
				return false
			}
		}
	}
	return true
}

// covered reports whether the union of ivs covers iv.
func covered(ivs [][2]uint64, iv [2]uint64) bool {
	next := iv[0]
	for progress := true; progress && next <= iv[1]; {
		progress = false
		for _, c := range ivs {
			if c[0] <= next && next <= c[1] {
				if c[1] >= iv[1] {
					return true
				}
				next, progress = c[1]+1, true
			}
		}
	}
	return next > iv[1]
}
