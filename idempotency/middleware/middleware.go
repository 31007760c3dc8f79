package middleware

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/idgen/idgen/idempotency"
)

// DefaultMaxBody bounds the request body read for the fingerprint.
const DefaultMaxBody = 1 << 20

// Options configures a Middleware.
type Options struct {
	// Scope returns the caller a key belongs to, such as the user ID of
	// an authenticated session: one caller cannot replay another's
	// answers by guessing keys. An error refuses the request with 401.
	// Nil puts every caller in idempotency.AnonymousScope, which also
	// shares one cap of live keys among them.
	Scope func(r *http.Request) (string, error)
	// Headers are the response headers recorded and replayed besides
	// Content-Type (Location, say). Others are not replayed.
	Headers []string
	// ConnectScope is Scope for the connect-go interceptor, from the
	// call's context and request metadata. Nil: AnonymousScope.
	ConnectScope func(ctx context.Context, h http.Header) (string, error)
	// MaxBody bounds the request body; a larger one gets 413. Default
	// DefaultMaxBody.
	MaxBody int64
}

// Middleware runs keyed requests through a Keeper.
type Middleware struct {
	k    *idempotency.Keeper
	opts Options
}

// New checks opts and returns a Middleware over k.
func New(k *idempotency.Keeper, opts Options) (*Middleware, error) {
	if k == nil {
		return nil, errors.New("middleware: a Keeper is required")
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.MaxBody < 0 {
		return nil, errors.New("middleware: MaxBody must not be negative")
	}
	for i, h := range opts.Headers {
		opts.Headers[i] = http.CanonicalHeaderKey(h)
	}
	return &Middleware{k: k, opts: opts}, nil
}

// Handler wraps next: a request without an Idempotency-Key goes straight
// through.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys := r.Header[idempotency.KeyHeader]
		if keys == nil {
			next.ServeHTTP(w, r)
			return
		}
		req, err := m.request(r, keys)
		if err != nil {
			writeError(w, err)
			return
		}
		m.serve(w, r, req, func(ctx context.Context, rec *recorder) { next.ServeHTTP(rec, r.WithContext(ctx)) })
	})
}

// request reads a keyed request's key, TTL, scope and fingerprint,
// leaving r.Body readable again.
func (m *Middleware) request(r *http.Request, keys []string) (idempotency.Request, error) {
	var req idempotency.Request
	if len(keys) != 1 {
		return req, fmt.Errorf("%w: send one %s header, not several", idempotency.ErrInvalidKey, idempotency.KeyHeader)
	}
	key, err := idempotency.ParseKey(keys[0])
	if err != nil {
		return req, err
	}
	ttl, err := m.k.ParseTTL(r.Header.Get(idempotency.TTLHeader))
	if err != nil {
		return req, err
	}
	scope := idempotency.AnonymousScope
	if m.opts.Scope != nil {
		if scope, err = m.opts.Scope(r); err != nil {
			return req, fmt.Errorf("%w: %w", errNoScope, err)
		}
	}
	var body []byte
	if r.Body != nil {
		body, err = io.ReadAll(io.LimitReader(r.Body, m.opts.MaxBody+1))
		if err != nil {
			return req, fmt.Errorf("%w: %w", errBody, err)
		}
		if int64(len(body)) > m.opts.MaxBody {
			return req, errTooLarge
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	return idempotency.Request{Scope: scope, Key: key, TTL: ttl,
		Fingerprint: idempotency.Fingerprint(r.Method, r.URL.Path, r.URL.RawQuery, string(body))}, nil
}

// serve runs req through Keeper.Do: replay, refuse, or run the handler
// (through run, into a recorder, on the context that ends when the
// key's hold is lost) and record its answer.
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, req idempotency.Request, run func(ctx context.Context, rec *recorder)) {
	rec := newRecorder()
	ans, replayed, err := m.k.Do(r.Context(), req, func(ctx context.Context) (idempotency.Answer, error) {
		run(ctx, rec)
		if rec.status >= 500 {
			return idempotency.Answer{}, errNotRecorded
		}
		return m.answer(rec)
	})
	switch {
	case errors.Is(err, errNotRecorded):
		rec.flush(w)
	case err != nil:
		writeError(w, err)
	case replayed:
		// A repeat, or this request outlived its hold and another took
		// the key over: the answer on record wins.
		m.replay(w, ans)
	default:
		rec.flush(w)
	}
}

// answer encodes a recorded response: the chosen headers as one line of
// JSON, then the body.
func (m *Middleware) answer(rec *recorder) (idempotency.Answer, error) {
	h := map[string][]string{}
	for _, name := range m.opts.Headers {
		if v := rec.header[name]; v != nil {
			h[name] = v
		}
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return idempotency.Answer{}, err
	}
	// Compact JSON holds no raw newline: the first one ends the headers.
	b := append(append(hb, '\n'), rec.body.Bytes()...)
	return idempotency.Answer{Status: rec.status, ContentType: rec.header.Get("Content-Type"), Body: b}, nil
}

// replay writes a recorded answer with Idempotent-Replayed: true.
func (m *Middleware) replay(w http.ResponseWriter, a idempotency.Answer) {
	h, body, err := decodeAnswer(a)
	if err != nil {
		writeError(w, err)
		return
	}
	for name, v := range h {
		w.Header()[name] = v
	}
	if a.ContentType != "" {
		w.Header().Set("Content-Type", a.ContentType)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set(idempotency.ReplayedHeader, "true")
	w.WriteHeader(a.Status)
	_, _ = w.Write(body) //nolint:gosec // G705: the handler's own answer, byte for byte, with its own Content-Type

}

// decodeAnswer splits what answer encoded: the chosen headers and the
// body.
func decodeAnswer(a idempotency.Answer) (map[string][]string, []byte, error) {
	head, body, ok := bytes.Cut(a.Body, []byte{'\n'})
	var h map[string][]string
	if !ok || json.Unmarshal(head, &h) != nil {
		return nil, nil, fmt.Errorf("%w: a recorded answer is not the middleware's", idempotency.ErrStore)
	}
	return h, body, nil
}

// recorder buffers a handler's answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func newRecorder() *recorder { return &recorder{header: http.Header{}, status: http.StatusOK} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}

// flush writes the buffered answer to w: every header the handler set.
func (r *recorder) flush(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}

var (
	// errNotRecorded is a handler's 5xx: passed on, not recorded, and
	// the key freed for a retry.
	errNotRecorded = errors.New("middleware: a server error is not recorded")
	errNoScope     = errors.New("middleware: the caller is not known")
	errBody        = errors.New("middleware: could not read the request body")
	errTooLarge    = errors.New("middleware: the request body is too large to fingerprint")
)

// problem maps an error to its status and stable code: the codes and
// statuses of idgen's own routes.
func problem(err error) (status int, code, msg string, retry time.Duration) {
	var w interface{ RetryAfter() time.Duration }
	if errors.As(err, &w) {
		retry = w.RetryAfter()
	}
	switch {
	case errors.Is(err, idempotency.ErrInvalidKey):
		return http.StatusBadRequest, "invalid_idempotency_key", err.Error(), 0
	case errors.Is(err, idempotency.ErrInvalidTTL):
		return http.StatusBadRequest, "invalid_idempotency_ttl", err.Error(), 0
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge, "body_too_large", err.Error(), 0
	case errors.Is(err, errBody):
		return http.StatusBadRequest, "invalid_body", "the request body could not be read; send it again", 0
	case errors.Is(err, errNoScope):
		return http.StatusUnauthorized, "unauthorized", "an Idempotency-Key needs a known caller; sign in and send it again", 0
	case errors.Is(err, idempotency.ErrKeyReused):
		return http.StatusUnprocessableEntity, "idempotency_key_reused",
			"this Idempotency-Key was first used for another request (another method, path or body); send a new key for a new request", 0
	case errors.Is(err, idempotency.ErrInFlight):
		return http.StatusConflict, "idempotency_key_in_flight",
			"the first request with this Idempotency-Key is still running; retry after the Retry-After delay to get its answer", max(retry, time.Second)
	case errors.Is(err, idempotency.ErrKeyLimit):
		return http.StatusTooManyRequests, "idempotency_key_limit_reached",
			"this caller holds the most live idempotency keys allowed; retry after the Retry-After delay, or send a key only where a retry must get the same answer", max(retry, time.Second)
	}
	// ErrStore and anything else: nothing ran, and nothing of the cause
	// is told.
	return http.StatusServiceUnavailable, "unavailable", "the idempotency key store did not answer; retry after the Retry-After delay", time.Second
}

func writeError(w http.ResponseWriter, err error) {
	status, code, msg, retry := problem(err)
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((retry+time.Second-1)/time.Second), 10))
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
