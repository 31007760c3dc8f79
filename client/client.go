// Package client is the Go client of an idgen server, and the one to use
// from Go: it retries, batches and caches ranges. Package api/apiclient
// is generated from api/openapi.yaml and covers every route, admin API
// included, but one call is one request, without retries; use it for
// what this package does not offer, or as a model for a client in
// another language.
//
// Next and NextN ask the server for each ID from its default mode
// (/id/{tag}, the mode `idgen serve --mode` set), like the clients that
// packages idgentest and idgencontainer hand out; WithMode pins another
// route for them. Snowflake and SnowflakeN always ask for snowflake IDs.
// For segment IDs at high rates, Segment returns a *segment.Allocator,
// the same dual-buffer allocator the server uses, over a segment.Store
// that reserves ranges with POST /segment/{tag}/range: a remote program
// then makes one HTTP call per range instead of one per ID, and the
// next range is fetched in the background before the current one runs
// out.
//
// An opaque tag (docs/segment.md) cannot be cached that way: a range is
// a run of the raw counters the tag hides, so the server refuses it
// (409 opaque_tag_range, matching opaque.ErrRangeRefused and
// segment.ErrRefused, never retried), and Segment's allocator returns
// that error for the tag. Take an opaque tag's IDs with NextN, in
// batches, from a client in the server's segment mode or WithMode("segment").
//
// WithGRPC makes every call, the range reservations too, over the
// server's gRPC API (api/idgen/v1) instead of its HTTP API: HTTP/2 on the
// same port, cleartext for http:// and TLS for https:// base URLs. The
// allocator, retries and errors are the same. WithGRPCAddr sends them to
// the server's own gRPC port instead (idgen serve --grpc-addr), which
// costs the server about a third of the CPU per call.
//
// Calls time out, retry 503 answers and network errors with backoff
// (honouring Retry-After), and return errors that errors.Is matches
// against this package's sentinels and segment's: a server that cannot
// be reached matches ErrUnreachable, and segment.ErrUnavailable so that
// an allocator from Segment rides it out. Answers 400, 401 and 403 are
// final: they are returned at once, never retried, and match
// ErrBadRequest, ErrUnauthorized or ErrForbidden, and segment.ErrRefused.
//
// A context from WithIdempotencyKey makes Next, NextN, Snowflake and
// SnowflakeN send an Idempotency-Key (a header over HTTP, metadata with
// WithGRPC): the call and all its retries, from any process, get the
// same IDs back within the server's TTL. A 409, ABORTED over gRPC (the
// first call with the key is still running), is retried like a 503; a
// key reused for another request, or first used over the other API,
// gives an error that matches idempotency.ErrKeyReused. The ranges of Segment are never keyed, even
// under such a context: a range feeds the IDs of many operations from a
// local cache, so a key names no one operation there, and replaying a
// range would hand its IDs out twice from the cache. For an ID that a
// retried operation must get again, call Next with the key.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/api/errcode"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/segment"
)

// Errors a call can return besides segment's sentinels.
var (
	// ErrUnauthorized is returned on 401: the server wants a token.
	ErrUnauthorized = errors.New("client: unauthorized: configure a token with WithToken")
	// ErrForbidden is returned on 403: the token is wrong or not allowed
	// for the tag.
	ErrForbidden = errors.New("client: forbidden")
	// ErrBadRequest is returned on any other 4xx.
	ErrBadRequest = errors.New("client: bad request")
	// ErrServer is returned on a 5xx that retries did not cure.
	ErrServer = errors.New("client: server error")
	// ErrUnreachable is returned when no answer came: the name did not
	// resolve, the connection failed or broke. Such errors match
	// segment.ErrUnavailable too.
	ErrUnreachable = errors.New("client: server unreachable")
)

// Error is an error answer of the server.
type Error struct {
	Status  int
	Code    string
	Message string
	// Holder is the holder of a lock a lock_held answer names: only to a
	// caller with the server's admin token; zero otherwise.
	Holder LockHolder
}

// LockHolder is the holder of a lock, as a lock_held answer names it.
type LockHolder struct {
	Owner     string
	ExpiresAt string // RFC 3339
}

func (e *Error) Error() string {
	return fmt.Sprintf("client: server answered %d %s: %s", e.Status, e.Code, e.Message)
}

// Is lets errors.Is match the sentinel that the code or status means
// (the table of api/errcode, which the server answers from).
func (e *Error) Is(target error) bool {
	if c, ok := errcode.Lookup(e.Code); ok {
		if slices.Contains(c.Match, target) || c.BadRequest && target == ErrBadRequest {
			return true
		}
		if c.Final {
			return false
		}
	}
	// 400, 401 and 403 are final: asking again cannot help, so an
	// allocator from Segment passes them on instead of backing off.
	switch {
	case e.Status == http.StatusUnauthorized:
		return target == ErrUnauthorized || target == segment.ErrRefused
	case e.Status == http.StatusForbidden:
		return target == ErrForbidden || target == segment.ErrRefused
	case e.Status == http.StatusBadRequest:
		return target == ErrBadRequest || target == segment.ErrRefused
	case e.Status == http.StatusServiceUnavailable:
		return target == segment.ErrUnavailable
	case e.Status >= 500:
		return target == ErrServer
	case e.Status >= 400:
		return target == ErrBadRequest
	}
	return false
}

// Client talks to one idgen server (or a load balancer in front of
// several). It is safe for concurrent use.
type Client struct {
	base       *url.URL
	http       *http.Client
	token      string
	mode       string
	retries    int
	minBackoff time.Duration
	maxBackoff time.Duration
	grpc       bool
	grpcAddr   string                         // WithGRPCAddr's host:port, or "" for the base URL's
	rpc        idgenv1connect.IDServiceClient // set by New with WithGRPC
	lockRPC    idgenv1connect.LockServiceClient
	// locks hands out Leases over the server's lock API (lock.go).
	locks *lock.Locker
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends Authorization: Bearer token.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc instead of a client with a 5 s timeout.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithTimeout bounds each HTTP attempt. Default 5s.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.http = &http.Client{Timeout: d, Transport: c.http.Transport} }
}

// WithRetries sets how many times a 503 or network error is retried.
// Default 3.
func WithRetries(n int) Option { return func(c *Client) { c.retries = n } }

// WithBackoff bounds the wait between retries when the server sends no
// Retry-After. Defaults 50ms and 2s.
func WithBackoff(min, max time.Duration) Option {
	return func(c *Client) { c.minBackoff, c.maxBackoff = min, max }
}

// WithMode picks the route behind Next and NextN: "" (the default) for
// the server's default mode (/id/{tag}), "segment" or "snowflake".
//
// Before, the default was "snowflake"; WithMode("snowflake"), or the
// Snowflake method, keeps that behaviour.
func WithMode(mode string) Option { return func(c *Client) { c.mode = mode } }

// New returns a client of the server at baseURL (http://host:port).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL must look like http://host:port, got %q", baseURL)
	}
	c := &Client{base: u, http: &http.Client{Timeout: 5 * time.Second},
		retries: 3, minBackoff: 50 * time.Millisecond, maxBackoff: 2 * time.Second}
	for _, o := range opts {
		o(c)
	}
	if c.grpcAddr != "" {
		if _, _, err := net.SplitHostPort(c.grpcAddr); err != nil {
			return nil, fmt.Errorf("client: the gRPC address must look like host:port, got %q", c.grpcAddr)
		}
	}
	if c.grpc {
		c.rpc, c.lockRPC = newRPCClient(c)
	}
	c.locks = newLocker(c)
	switch {
	case c.mode != "" && c.mode != "snowflake" && c.mode != "segment":
		return nil, fmt.Errorf("client: mode must be snowflake, segment or empty, got %q", c.mode)
	case c.retries < 0 || c.minBackoff <= 0 || c.maxBackoff < c.minBackoff:
		return nil, errors.New("client: need retries >= 0 and 0 < min backoff <= max backoff")
	}
	return c, nil
}

// Next asks the server for one ID of its default mode, or of the mode
// WithMode set.
func (c *Client) Next(ctx context.Context, tag string) (int64, error) {
	return c.next(ctx, c.mode, tag)
}

// NextN asks the server for n IDs in one call, as Next does for one.
func (c *Client) NextN(ctx context.Context, tag string, n int) ([]int64, error) {
	return c.nextN(ctx, c.mode, tag, n)
}

// Snowflake asks the server for one snowflake ID, whatever its default
// mode and WithMode.
func (c *Client) Snowflake(ctx context.Context, tag string) (int64, error) {
	return c.next(ctx, modeSnowflake, tag)
}

// SnowflakeN asks the server for n snowflake IDs in one call.
func (c *Client) SnowflakeN(ctx context.Context, tag string, n int) ([]int64, error) {
	return c.nextN(ctx, modeSnowflake, tag, n)
}

const modeSnowflake = "snowflake"

func (c *Client) next(ctx context.Context, mode, tag string) (int64, error) {
	if c.rpc != nil {
		ids, err := c.rpcNext(ctx, mode, tag, 0)
		if err != nil {
			return 0, err
		}
		return ids[0], nil
	}
	var out struct{ ID string }
	hdr, err := idemHeader(ctx)
	if err != nil {
		return 0, err
	}
	if err := c.do(ctx, http.MethodGet, idPath(mode, tag), nil, hdr, &out); err != nil {
		return 0, err
	}
	return strconv.ParseInt(out.ID, 10, 64)
}

func (c *Client) nextN(ctx context.Context, mode, tag string, n int) ([]int64, error) {
	if n < 1 {
		return nil, idgen.ErrInvalidCount
	}
	if c.rpc != nil {
		return c.rpcNext(ctx, mode, tag, n)
	}
	hdr, err := idemHeader(ctx)
	if err != nil {
		return nil, err
	}
	var out struct{ IDs []string }
	if err := c.do(ctx, http.MethodGet, idPath(mode, tag), url.Values{"count": {strconv.Itoa(n)}}, hdr, &out); err != nil {
		return nil, err
	}
	ids := make([]int64, len(out.IDs))
	for i, s := range out.IDs {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("client: server sent a bad ID %q: %w", s, err)
		}
		ids[i] = v
	}
	return ids, nil
}

// idPath is the route of mode's IDs: /id/ for the server's default.
func idPath(mode, tag string) string {
	route := "id"
	if mode != "" {
		route = mode
	}
	return "/" + route + "/" + url.PathEscape(tag)
}

// Segment returns an allocator that caches ranges of the server's
// segment mode locally. opts configure it as for segment.New; its
// AutoCreate is ignored, since the server decides whether unknown tags
// are created. Close it to stop background loads and hand the unused
// rest of its ranges back to the server (POST
// /segment/{tag}/range/release, or ReleaseRange over gRPC), which takes
// them back while nobody reserved past them, as the library's allocator
// does over SQL: a program that runs, takes a few IDs and closes does not
// burn a range each time. The hand-back is bounded by
// opts.ReleaseTimeout; a range the server does not take back (another
// instance handed it out, or the tag moved on) stays unused.
func (c *Client) Segment(opts segment.Options) (*segment.Allocator, error) {
	opts.AutoCreate = false
	return segment.New(&rangeStore{c: c, tokens: map[rangeKey]string{}}, opts)
}

// rangeStore is a segment.Store that reserves ranges over HTTP, and a
// segment.Releaser that hands them back.
type rangeStore struct {
	c *Client
	// limit is the largest range the server hands out (its --max-range),
	// learnt from the first answer that held less than was asked; 0 until
	// then. The allocator's step doubles under load, and asking past the
	// server's cap only makes the server cut the range.
	limit atomic.Int64

	mu sync.Mutex
	// tokens are the release tokens of the ranges held, by tag and end,
	// which is how the allocator names a range it hands back.
	tokens map[rangeKey]string
}

type rangeKey struct {
	tag string
	end int64
}

var _ segment.Releaser = (*rangeStore)(nil)

func (r *rangeStore) Reserve(ctx context.Context, tag string, step int64) (segment.Range, error) {
	ask := max(step, 1)
	if l := r.limit.Load(); l > 0 {
		ask = min(ask, l)
	}
	start, end, tok, err := r.reserve(ctx, tag, ask)
	if err != nil {
		return segment.Range{}, err
	}
	if tok != "" {
		r.mu.Lock()
		r.tokens[rangeKey{tag, end}] = tok
		r.mu.Unlock()
	}
	size := end - start
	// Less than asked, short of the int64 limit: the server clamped the
	// size to its --max-range, which is then the cap of every later ask.
	if size < ask && end < math.MaxInt64 {
		r.limit.Store(size)
	}
	// The server raises a small size to the tag's step, so the size it
	// returned is the floor to ask for next time, up to the cap.
	return segment.Range{Start: start, End: end, Step: min(ask, size)}, nil
}

// reserve asks for a range of ask IDs over gRPC or HTTP.
func (r *rangeStore) reserve(ctx context.Context, tag string, ask int64) (start, end int64, token string, err error) {
	if r.c.rpc != nil {
		rg, tok, err := r.c.rpcReserve(ctx, tag, ask)
		return rg.Start, rg.End, tok, err
	}
	var out struct {
		Start, End   string
		ReleaseToken string `json:"release_token"`
	}
	q := url.Values{"size": {strconv.FormatInt(ask, 10)}}
	// No key, even if ctx has one: see the package comment.
	if err := r.c.do(ctx, http.MethodPost, "/segment/"+url.PathEscape(tag)+"/range", q, nil, &out); err != nil {
		return 0, 0, "", err
	}
	start, err1 := strconv.ParseInt(out.Start, 10, 64)
	end, err2 := strconv.ParseInt(out.End, 10, 64)
	if err := errors.Join(err1, err2); err != nil || end <= start {
		return 0, 0, "", fmt.Errorf("client: server sent a bad range [%s, %s)", out.Start, out.End)
	}
	return start, end, out.ReleaseToken, nil
}

// Release implements segment.Releaser: it hands [from, to), the unused
// end of a range this store reserved, back to the server. It reports
// false, without an error, when the server has no token for it or does
// not take it back (range_not_released, release_disabled): the IDs then
// stay unused, as they would without a hand-back.
func (r *rangeStore) Release(ctx context.Context, tag string, from, to int64) (bool, error) {
	r.mu.Lock()
	tok, ok := r.tokens[rangeKey{tag, to}]
	delete(r.tokens, rangeKey{tag, to})
	r.mu.Unlock()
	if !ok {
		return false, nil
	}
	var err error
	if r.c.rpc != nil {
		err = r.c.rpcRelease(ctx, tag, tok, from)
	} else {
		body, _ := json.Marshal(map[string]string{"release_token": tok, "from": strconv.FormatInt(from, 10)}) // strings only: cannot fail
		var out struct{}
		err = r.c.doBody(ctx, http.MethodPost, "/segment/"+url.PathEscape(tag)+"/range/release", nil, nil, body, &out)
	}
	var apiErr *Error
	if errors.As(err, &apiErr) && (apiErr.Code == "range_not_released" || apiErr.Code == "release_disabled" ||
		apiErr.Status == http.StatusNotFound || apiErr.Status == http.StatusNotImplemented) {
		// Refused, or a server from before the route: the range stays
		// unused.
		return false, nil
	}
	return err == nil, err
}

func (r *rangeStore) CreateTag(context.Context, segment.Tag) error {
	return errors.New("client: tags are created on the server (idgen tag add or POST /admin/tags)")
}

// InFlightWait bounds how long a call waits out a key in flight (see
// WithIdempotencyKey): the server's default lock, after which a retry
// gets the first answer or, if the first request died, takes the key
// over. A context deadline ends the wait sooner.
const InFlightWait = idempotency.DefaultLockTimeout + time.Second

// do runs one API call with retries and decodes a 200 answer into out.
// hdr is added to every attempt: a key's retries carry the same key.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, hdr http.Header, out any) error {
	return c.doBody(ctx, method, path, q, hdr, nil, out)
}

// doBody is do with a JSON request body, sent again on every attempt.
func (c *Client) doBody(ctx context.Context, method, path string, q url.Values, hdr http.Header, body []byte, out any) error {
	u := *c.base
	// path is escaped already (url.PathEscape of the tag): Path must be
	// its unescaped form, or String escapes it a second time ("bad tag"
	// would reach the server as "bad%20tag").
	u.RawPath = strings.TrimSuffix(c.base.EscapedPath(), "/") + path
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return err
	}
	u.Path = p
	u.RawQuery = q.Encode()
	return c.retry(ctx, func() (time.Duration, error) { return c.once(ctx, method, u.String(), hdr, body, out) })
}

// retry runs attempt until it succeeds, fails for good (wait < 0) or the
// retries run out; attempt returns the wait before the next try: 0 for
// the default backoff, or the server's Retry-After or RetryInfo.
//
// A key in flight (409 or ABORTED idempotency_key_in_flight) is not a
// failure but a wait for the first request's answer: those retries do
// not count against WithRetries, and go on until the context's deadline
// or, at the latest, InFlightWait after the first of them, when the
// first request's lock has expired on a server of the default
// --idempotency-lock-timeout and a retry takes the key over.
func (c *Client) retry(ctx context.Context, attempt func() (wait time.Duration, err error)) error {
	backoff := c.minBackoff
	var inFlightSince time.Time
	for n := 0; ; n++ {
		wait, err := attempt()
		if err != nil && wait >= 0 && errors.Is(err, idempotency.ErrInFlight) {
			now := time.Now()
			if inFlightSince.IsZero() {
				inFlightSince = now
			}
			if now.Add(wait).Sub(inFlightSince) <= InFlightWait {
				n-- // a wait, not a failed try
			}
		}
		if err == nil || wait < 0 || n >= c.retries {
			return err
		}
		if wait == 0 {
			wait = backoff + rand.N(backoff/2+1)
			backoff = min(2*backoff, c.maxBackoff)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("client: %w (last error: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// once makes one attempt. wait is -1 when the error is final, 0 for the
// default backoff, or the server's Retry-After.
func (c *Client) once(ctx context.Context, method, u string, hdr http.Header, body []byte, out any) (wait time.Duration, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return -1, fmt.Errorf("client: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return -1, fmt.Errorf("client: %w", err)
		}
		return 0, &unreachableError{err: err}
	}
	defer func() { _ = resp.Body.Close() }() // read in full below; a failed close loses nothing
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, &unreachableError{err: fmt.Errorf("reading the answer of %s %s: %w", method, req.URL.Redacted(), err)}
	}
	if resp.StatusCode == http.StatusNoContent { // DELETE /locks/{name}
		return -1, nil
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(answer, out); err != nil {
			return -1, fmt.Errorf("client: server sent bad JSON: %w", err)
		}
		return -1, nil
	}
	apiErr := &Error{Status: resp.StatusCode}
	var e struct {
		Error struct {
			Code, Message string
			Holder        struct {
				Owner     string `json:"owner"`
				ExpiresAt string `json:"expires_at"`
			}
		}
	}
	if json.Unmarshal(answer, &e) == nil && e.Error.Code != "" {
		apiErr.Code, apiErr.Message = e.Error.Code, e.Error.Message
		apiErr.Holder = LockHolder(e.Error.Holder)
	} else {
		apiErr.Code, apiErr.Message = "http_"+strconv.Itoa(resp.StatusCode), strings.TrimSpace(string(answer))
	}
	// A key whose first request is still running answers once it is
	// done: wait as for a 503.
	inFlight := resp.StatusCode == http.StatusConflict && apiErr.Code == "idempotency_key_in_flight"
	if inFlight || resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusGatewayTimeout {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			return min(time.Duration(s)*time.Second, c.maxBackoff), apiErr
		}
		return 0, apiErr
	}
	return -1, apiErr
}

// unreachableError is a call that got no answer. It matches
// ErrUnreachable, and segment.ErrUnavailable so that an allocator from
// Segment backs off and retries, but its text names the server and the
// route it called (the *url.Error inside), never the segment store:
// the snowflake routes have no store behind them on the client's side.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return ErrUnreachable.Error() + ": " + e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }
func (e *unreachableError) Is(target error) bool {
	return target == ErrUnreachable || target == segment.ErrUnavailable
}
