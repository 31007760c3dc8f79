package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/lock"
)

// The lock API over HTTP: thin adapters of lockService (locks.go).
// Tokens are JSON strings, as IDs are, so that clients whose numbers are
// doubles read them exactly; durations are Go durations ("10s").

var errLockBody = &apiError{http.StatusBadRequest, "invalid_body",
	`send a JSON object such as {"owner":"worker-1","ttl":"10s","wait":"2s"} (renew: {"owner","token","ttl"}; at most 16 KiB, no unknown fields)`}

// grantJSON is a grant as the lock routes answer it.
type grantJSON struct {
	Name      string `json:"name"`
	Owner     string `json:"owner,omitempty"`
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

func grantOut(g lock.Grant) grantJSON {
	return grantJSON{Name: g.Name, Owner: g.Owner, Token: strconv.FormatInt(g.Token, 10), ExpiresAt: timeOut(g.Expires)}
}

func timeOut(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// lockInfoJSON is a lock as GET /locks/{name} and /admin/locks answer it.
type lockInfoJSON struct {
	Name string `json:"name"`
	// Holder is null while the lock is free.
	Holder  *grantJSON   `json:"holder"`
	Since   string       `json:"since,omitempty"`
	Waiters []waiterJSON `json:"waiters"`
}

type waiterJSON struct {
	Owner string `json:"owner,omitempty"`
	Since string `json:"since"`
}

func lockInfoOut(in lock.Info) lockInfoJSON {
	out := lockInfoJSON{Name: in.Name, Waiters: make([]waiterJSON, len(in.Waiters))}
	if in.Holder != nil {
		g := grantOut(*in.Holder)
		out.Holder, out.Since = &g, timeOut(in.Since)
	}
	for i, w := range in.Waiters {
		out.Waiters[i] = waiterJSON{Owner: w.Owner, Since: timeOut(w.Since)}
	}
	return out
}

// lockCall admits the call on the path's lock (admitLock), or answers
// the refusal; ok is false then.
func (s *Server) lockCall(c *gin.Context) (name string, admin, ok bool) {
	name = c.Param("name")
	admin, err := s.admitLock(c.Request.Header, name)
	if err != nil {
		if errors.Is(err, errUnauthorized) {
			c.Header("WWW-Authenticate", `Bearer realm="idgen"`)
		}
		s.writeError(c, err)
		return "", false, false
	}
	return name, admin, true
}

// parseDuration reads a Go duration; "" is zero.
func parseDuration(v string, bad error) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, bad
	}
	return d, nil
}

// errLockTTL is a ttl that is no duration at all; one outside the
// bounds is the lock package's ErrInvalidTTL, with the bounds.
var errLockTTL = &apiError{http.StatusBadRequest, "invalid_lock_ttl", `ttl must be a Go duration ("10s") within the server's --lock-min-ttl and --lock-max-ttl`}

// parseToken reads a decimal token.
func parseToken(v string) (int64, error) {
	t, err := strconv.ParseInt(v, 10, 64)
	if err != nil || t < 0 {
		return 0, errLockToken
	}
	return t, nil
}

// acquireLock serves POST /locks/{name}.
func (s *Server) acquireLock(c *gin.Context) {
	name, admin, ok := s.lockCall(c)
	if !ok {
		return
	}
	var req struct{ Owner, TTL, Wait string }
	if err := decodeBodyAs(c, &req, errLockBody); err != nil {
		s.writeError(c, err)
		return
	}
	ttl, err := parseDuration(req.TTL, errLockTTL)
	if err != nil {
		s.writeError(c, err)
		return
	}
	wait, err := parseDuration(req.Wait, errLockWait)
	if err != nil {
		s.writeError(c, err)
		return
	}
	g, err := s.locks.acquire(c.Request.Context(), admin, name, req.Owner, ttl, wait)
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.PureJSON(http.StatusOK, grantOut(g))
}

// renewLock serves POST /locks/{name}/renew.
func (s *Server) renewLock(c *gin.Context) {
	name, _, ok := s.lockCall(c)
	if !ok {
		return
	}
	var req struct{ Owner, Token, TTL string }
	if err := decodeBodyAs(c, &req, errLockBody); err != nil {
		s.writeError(c, err)
		return
	}
	ttl, err := parseDuration(req.TTL, errLockTTL)
	if err != nil {
		s.writeError(c, err)
		return
	}
	tok, err := parseToken(req.Token)
	if err != nil {
		s.writeError(c, err)
		return
	}
	g, err := s.locks.renew(c.Request.Context(), "renew", name, req.Owner, tok, ttl)
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.PureJSON(http.StatusOK, grantOut(g))
}

// releaseLock serves DELETE /locks/{name}?owner=…&token=….
func (s *Server) releaseLock(c *gin.Context) {
	name, _, ok := s.lockCall(c)
	if !ok {
		return
	}
	tok, err := parseToken(c.Query("token"))
	if err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.locks.release(c.Request.Context(), name, c.Query("owner"), tok); err != nil {
		s.writeError(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// describeLock serves GET /locks/{name}.
func (s *Server) describeLock(c *gin.Context) {
	name, admin, ok := s.lockCall(c)
	if !ok {
		return
	}
	in, err := s.locks.describe(c.Request.Context(), admin, name)
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.PureJSON(http.StatusOK, lockInfoOut(in))
}

// listLocks serves GET /admin/locks: the locks of the names this
// instance tracks (lockNames) that are held or waited for.
func (s *Server) listLocks(c *gin.Context) {
	if s.locks == nil {
		s.writeError(c, errLocksDisabled)
		return
	}
	ctx, cancel := adminCtx(c)
	defer cancel()
	infos, err := s.locks.list(ctx)
	if err != nil {
		s.writeError(c, err)
		return
	}
	out := make([]lockInfoJSON, len(infos))
	for i, in := range infos {
		out[i] = lockInfoOut(in)
	}
	c.PureJSON(http.StatusOK, gin.H{"locks": out})
}
