package server

import (
	"context"
	"encoding/hex"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/idempotency"
)

var (
	errIdemDisabled = &apiError{http.StatusBadRequest, "idempotency_disabled",
		"this server keeps no idempotency keys; drop the Idempotency-Key header or ask the operator to enable them (idgen serve --idempotency)"}
	// errIdemNotSupported refuses a key where it cannot work: a range
	// (POST /segment/{tag}/range, ReserveRange) is a claim on the store
	// that is not recorded, and Leaf's and tinyid's routes have callers
	// that never send one. Ignoring the key would hand a retry a second
	// range, the very duplicate the caller sent the key to prevent.
	errIdemNotSupported = &apiError{http.StatusBadRequest, "idempotency_not_supported",
		"this route keeps no idempotency keys, and a retry with one would get new IDs: drop the Idempotency-Key header, or ask for IDs with GET /id/{tag}?count=N (or the Next RPC), which honour it"}
	errTwoKeys = &apiError{http.StatusBadRequest, "invalid_idempotency_key",
		"send one Idempotency-Key header, not several"}
)

// noKeys refuses a request that carries an Idempotency-Key on a route
// that cannot honour it (see errIdemNotSupported).
func (s *Server) noKeys(c *gin.Context) {
	if c.Request.Header[idempotency.KeyHeader] != nil {
		s.writeError(c, errIdemNotSupported)
	}
}

// keyedRequest is what an ID request of any transport asks for
// (service.next): what it issues and, when it carries a key, its
// fingerprint.
type keyedRequest struct {
	mode, tag, format string
	text, single      bool
	// rpc marks a gRPC request (rpcapi.go): its answer is a NextResponse
	// message, not HTTP's body, so the two never replay each other.
	rpc bool
	n   int
}

// count is the n of service.issue: 0 for one ID.
func (r keyedRequest) count() int {
	if r.single {
		return 0
	}
	return r.n
}

// fingerprint covers every part of the request that shapes the answer,
// so that a key reused for anything else is refused rather than
// answered with IDs of another request. /id/{tag} counts as the mode it
// serves, so it and /segment/{tag} are one request on a segment server.
func (r keyedRequest) fingerprint() string {
	count := "one"
	if !r.single {
		count = strconv.Itoa(r.n)
	}
	body := "json"
	switch {
	case r.rpc:
		body = "grpc"
	case r.text:
		body = "text"
	}
	return idempotency.Fingerprint(r.mode, r.tag, count, r.format, body)
}

// runKeyed runs the protocol for a keyed request of either API, whose
// header (HTTP headers, gRPC metadata) is h and whose Idempotency-Key
// values are keys: the first request with a key allocates from g and
// records the answer build makes of its IDs; a repeat gets the recorded
// answer, with replayed true. Errors are those classify maps.
func (s *service) runKeyed(ctx context.Context, h http.Header, keys []string, g idgen.Generator, r keyedRequest,
	build func(ids []int64) (idempotency.Answer, error)) (ans idempotency.Answer, replayed bool, err error) {
	if s.keeper == nil {
		return ans, false, errIdemDisabled
	}
	if len(keys) != 1 {
		return ans, false, errTwoKeys
	}
	key, err := idempotency.ParseKey(keys[0])
	if err != nil {
		return ans, false, err
	}
	ttl, err := s.keeper.ParseTTL(h.Get(idempotency.TTLHeader))
	if err != nil {
		return ans, false, err
	}
	// Do renews the hold while issue runs, and ends its context if the
	// hold is lost: past that a retry may take the key over.
	return s.keeper.Do(ctx, idempotency.Request{Scope: s.scope(h), Key: key, Fingerprint: r.fingerprint(), TTL: ttl},
		func(ctx context.Context) (idempotency.Answer, error) {
			ids, err := s.issue(ctx, g, r.mode, r.tag, r.count(), nil)
			if err != nil {
				return idempotency.Answer{}, err
			}
			return build(ids)
		})
}

// scope is the caller a key belongs to: the SHA-256 digest of its API
// token, so that no caller can read another's IDs by guessing keys, or
// the one anonymous scope on a server without API tokens. The token
// itself is never stored. h is the request's header (HTTP) or metadata
// (gRPC), whose token requireTagToken or authorizeTag already accepted.
func (s *Server) scope(h http.Header) string {
	if s.auth.apiOpen {
		return idempotency.AnonymousScope
	}
	tok, _ := parseBearer(h.Get("Authorization"))
	d := digest(tok)
	return hex.EncodeToString(d[:])
}

// writeAnswer writes a recorded answer byte for byte.
func writeAnswer(c *gin.Context, a idempotency.Answer) {
	h := c.Writer.Header()
	h["Content-Type"] = []string{a.ContentType}
	h["Content-Length"] = []string{strconv.Itoa(len(a.Body))}
	c.Writer.WriteHeader(a.Status)
	_, _ = c.Writer.Write(a.Body)
}
