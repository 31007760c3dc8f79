package server

import (
	"context"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/idempotency"
)

// idempotencyKeyHeader is idempotency.KeyHeader in canonical form, for
// the one map lookup an unkeyed request pays.
const idempotencyKeyHeader = "Idempotency-Key"

var (
	errIdemDisabled = &apiError{http.StatusBadRequest, "idempotency_disabled",
		"this server keeps no idempotency keys; drop the Idempotency-Key header or ask the operator to enable them (idgen serve --idempotency)"}
	errTwoKeys = &apiError{http.StatusBadRequest, "invalid_idempotency_key",
		"send one Idempotency-Key header, not several"}
)

// keyedRequest is what a keyed ID request asks for: its fingerprint
// and, when it wins the key, what it allocates.
type keyedRequest struct {
	mode, tag, format string
	text, single      bool
	n                 int
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
	if r.text {
		body = "text"
	}
	return idempotency.Fingerprint(r.mode, r.tag, count, r.format, body)
}

// keyed answers an ID request that carries an Idempotency-Key: the first
// request with a key allocates and records its answer; repeats replay it
// (see package idempotency for the protocol).
func (s *Server) keyed(c *gin.Context, g idgen.Generator, r keyedRequest, keys []string) {
	if s.cfg.Idempotency == nil {
		s.writeError(c, errIdemDisabled)
		return
	}
	if len(keys) != 1 {
		s.writeError(c, errTwoKeys)
		return
	}
	key, err := idempotency.ParseKey(keys[0])
	if err != nil {
		s.writeError(c, err)
		return
	}
	ttl, err := s.cfg.Idempotency.ParseTTL(c.Request.Header.Get(idempotency.TTLHeader))
	if err != nil {
		s.writeError(c, err)
		return
	}
	ctx := c.Request.Context()
	ticket, replay, err := s.cfg.Idempotency.Begin(ctx, idempotency.Request{Scope: s.scope(c), Key: key, Fingerprint: r.fingerprint(), TTL: ttl})
	switch {
	case err != nil:
		s.writeError(c, err)
		return
	case replay != nil:
		writeReplay(c, *replay)
		return
	}

	// Bounded by the lock: past it a retry may take the key over, and
	// this request's IDs would be thrown away anyway.
	actx, cancel := context.WithDeadline(ctx, ticket.Deadline())
	ids, err := allocate(actx, g, r)
	cancel()
	var ans idempotency.Answer
	if err == nil {
		s.issued(r.tag, r.mode, len(ids))
		ans.Status = http.StatusOK
		ans.ContentType, ans.Body, err = idsBody(r.tag, r.format, r.text, r.single, ids)
	}
	if err != nil {
		// Nothing worth replaying (a refusal, a store outage): free the
		// key so that a retry may allocate.
		ticket.Abandon(ctx)
		s.writeError(c, err)
		return
	}
	// The IDs exist now: record them even if the caller hung up, so
	// that its retry replays them rather than waiting for the lock.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	out, replayed, err := ticket.Complete(rctx, ans)
	rcancel()
	if err != nil {
		s.writeError(c, err)
		return
	}
	if replayed {
		writeReplay(c, out)
		return
	}
	writeAnswer(c, out)
}

func allocate(ctx context.Context, g idgen.Generator, r keyedRequest) ([]int64, error) {
	if r.single {
		id, err := g.Next(ctx, r.tag)
		return []int64{id}, err
	}
	return g.NextN(ctx, r.tag, r.n)
}

// scope is the caller a key belongs to: the SHA-256 digest of its API
// token, so that no caller can read another's IDs by guessing keys, or
// the one anonymous scope on a server without API tokens. The token
// itself is never stored.
func (s *Server) scope(c *gin.Context) string {
	if s.auth.apiOpen {
		return idempotency.AnonymousScope
	}
	tok, _ := bearer(c) // requireTag let the request in with one
	d := digest(tok)
	return hex.EncodeToString(d[:])
}

func writeReplay(c *gin.Context, a idempotency.Answer) {
	c.Writer.Header()[idempotency.ReplayedHeader] = []string{"true"}
	writeAnswer(c, a)
}

// writeAnswer writes a recorded answer byte for byte.
func writeAnswer(c *gin.Context, a idempotency.Answer) {
	h := c.Writer.Header()
	h["Content-Type"] = []string{a.ContentType}
	h["Content-Length"] = []string{strconv.Itoa(len(a.Body))}
	c.Writer.WriteHeader(a.Status)
	_, _ = c.Writer.Write(a.Body)
}
