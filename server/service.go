package server

import (
	"context"
	"net/http"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/segment"
)

// service is the one place IDs are issued and ranges reserved, for every
// transport: gin's routes (idgen's own and the compat APIs), connect-go
// and grpc-go. Its methods take and return plain Go values; the
// transports only parse requests and encode answers. Issued IDs are
// counted here and nowhere else, so that no route can hand out IDs the
// metrics miss, and its errors are those classify maps (errors.go,
// rpcerrors.go) for every transport alike.
type service struct {
	// gens are the generators by mode.
	gens map[string]idgen.Generator
	// ranges reserves ranges (Config.Ranges), nil when disabled;
	// releaser takes them back when ranges can, and book remembers the
	// ones handed out for that.
	ranges   RangeReserver
	releaser RangeReleaser
	book     rangeBook
	maxRange int64
	// keeper keeps idempotency keys (Config.Idempotency), nil when off.
	keeper *idempotency.Keeper
	// scope is the caller a key belongs to (Server.scope).
	scope   func(h http.Header) string
	metrics *Metrics
}

// next answers a request for IDs from any transport, whose metadata
// (HTTP headers, gRPC metadata) is h. Without an Idempotency-Key it
// issues them (issue, with dst) and returns them. With one it runs the
// idempotency protocol (runKeyed): the first request with the key issues
// the IDs and keeps the answer record makes of them, which it returns as
// ans; a repeat gets the kept answer, replayed. The transport writes
// either, in its own encoding.
func (s *service) next(ctx context.Context, g idgen.Generator, r keyedRequest, h http.Header, dst []int64,
	record func(ids []int64) (idempotency.Answer, error)) (ids []int64, ans *idempotency.Answer, replayed bool, err error) {
	if keys := h[idempotency.KeyHeader]; keys != nil {
		a, replayed, err := s.runKeyed(ctx, h, keys, g, r, record)
		if err != nil {
			return nil, nil, false, err
		}
		return nil, &a, replayed, nil
	}
	ids, err = s.issue(ctx, g, r.mode, r.tag, r.count(), dst)
	return ids, nil, false, err
}

// issue hands out IDs of tag from g, the generator of mode: one (Next)
// for n 0, appended to dst[:0], so that a caller passing an array of its
// own allocates nothing on the hottest path; else a batch of n (NextN). A
// nil g is errModeDisabled.
func (s *service) issue(ctx context.Context, g idgen.Generator, mode, tag string, n int, dst []int64) ([]int64, error) {
	if g == nil {
		return nil, errModeDisabled
	}
	var ids []int64
	if n == 0 {
		id, err := g.Next(ctx, tag)
		if err != nil {
			return nil, err
		}
		ids = append(dst[:0], id)
	} else {
		var err error
		if ids, err = g.NextN(ctx, tag, n); err != nil {
			return nil, err
		}
	}
	s.issued(tag, mode, len(ids))
	return ids, nil
}

// reserve reserves a range of at least size IDs of tag straight from
// the store, for clients that cache ranges (HTTP, gRPC and tinyid's
// segments alike). A size above maxRange is clamped to it rather than
// refused: a client whose step grew past the server's cap then gets a
// smaller range, and learns the cap from it, instead of a final error
// that stops it. Without Config.Ranges it is errModeDisabled.
func (s *service) reserve(ctx context.Context, tag string, size int64) (segment.Range, error) {
	if s.ranges == nil {
		return segment.Range{}, errModeDisabled
	}
	r, err := s.ranges.ReserveRange(ctx, tag, min(size, s.maxRange))
	if err != nil {
		return segment.Range{}, err
	}
	s.issued(tag, "range", int(r.Size()))
	return r, nil
}

// releaseToken is the token the holder of r hands it back with, or ""
// when this server takes no ranges back.
func (s *service) releaseToken(tag string, r segment.Range) string {
	if s.releaser == nil {
		return ""
	}
	return s.book.issue(tag, r)
}

// issued counts IDs handed out. Snowflake tags are not checked against
// any store, so they are not a label: every name would be a new series.
func (s *service) issued(tag, mode string, n int) {
	if mode == ModeSnowflake {
		tag = ""
	}
	if s.metrics != nil {
		s.metrics.countIssued(tag, mode, n)
	}
}
