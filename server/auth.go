package server

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen"
)

// MinTokenLength is the shortest admin, API or metrics token accepted:
// bearer tokens are the only secret between a caller and the service, so
// they must not be guessable.
const MinTokenLength = 16

var (
	errAdminOnIDs    = &apiError{http.StatusForbidden, "forbidden", "the admin token is not accepted on ID endpoints while API tokens are configured; send an API token"}
	errUnauthorized  = &apiError{http.StatusUnauthorized, "unauthorized", "send Authorization: Bearer <token>"}
	errForbidden     = &apiError{http.StatusForbidden, "forbidden", "the token is wrong or not allowed for this tag"}
	errAdminDisabled = &apiError{http.StatusForbidden, "admin_disabled", "the admin API is off; start the server with --admin-token (IDGEN_ADMIN_TOKEN)"}
	errClientCert    = &apiError{http.StatusUnauthorized, "client_certificate_required",
		"this server requires mutual TLS: send a client certificate signed by its client CA (--tls-client-ca); only /healthz, /readyz and grpc.health.v1 answer without one"}
)

// On /admin and /metrics there is no tag: the one token is wrong.
var (
	errNotAdmin = &apiError{http.StatusForbidden, "forbidden",
		"the token is not this server's admin token (--admin-token, IDGEN_ADMIN_TOKEN); client tokens (--api-tokens) do not open the admin API"}
	errNotMetrics = &apiError{http.StatusForbidden, "forbidden",
		"the token is not this server's metrics token (--metrics-token, IDGEN_METRICS_TOKEN)"}
)

// token is a secret kept as its SHA-256 digest, so that comparisons take
// the same time whatever the length or content of the guess.
type token [sha256.Size]byte

func digest(s string) token { return sha256.Sum256([]byte(s)) }

// APITokens restricts the ID endpoints to named tags: each token maps to
// the tags it may use, or to "*" for all.
type APITokens map[string][]string

// ParseAPITokens reads token specifications, one per line or separated by
// semicolons: `TOKEN=tag1,tag2` or `TOKEN=*`. Blank lines and lines
// starting with # are ignored.
func ParseAPITokens(spec string) (APITokens, error) {
	out := APITokens{}
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(spec, ";", "\n")))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tok, tags, ok := strings.Cut(line, "=")
		tok = strings.TrimSpace(tok)
		if !ok || len(tok) < MinTokenLength || strings.TrimSpace(tags) == "" {
			return nil, fmt.Errorf("server: API token entry %d: want TOKEN=tag1,tag2 or TOKEN=* with a token of at least %d characters", n, MinTokenLength)
		}
		for _, t := range strings.Split(tags, ",") {
			out[tok] = append(out[tok], strings.TrimSpace(t))
		}
	}
	return out, nil
}

// authz holds the configured secrets, digested once.
type authz struct {
	admin    *token // nil: admin API disabled
	api      map[token]map[string]bool
	apiOpen  bool
	apiAllow []token // iteration order for constant-time lookup
}

func newAuthz(admin string, api APITokens) *authz {
	a := &authz{api: map[token]map[string]bool{}, apiOpen: len(api) == 0}
	if admin != "" {
		d := digest(admin)
		a.admin = &d
	}
	for tok, tags := range api {
		d := digest(tok)
		set := map[string]bool{}
		for _, t := range tags {
			set[t] = true
		}
		a.api[d] = set
		a.apiAllow = append(a.apiAllow, d)
	}
	return a
}

func bearer(c *gin.Context) (string, bool) { return parseBearer(c.GetHeader("Authorization")) }

// parseBearer reads the token of an Authorization header (HTTP) or
// authorization metadata (gRPC): "Bearer <token>".
func parseBearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// checkTokens enforces MinTokenLength and keeps the admin token out of
// the API token table.
func checkTokens(admin, metrics string, api APITokens) error {
	for name, tok := range map[string]string{"AdminToken": admin, "MetricsToken": metrics} {
		if tok != "" && len(tok) < MinTokenLength {
			return fmt.Errorf("%w: %s must be at least %d characters", ErrInvalidConfig, name, MinTokenLength)
		}
	}
	for tok := range api {
		if len(tok) < MinTokenLength {
			return fmt.Errorf("%w: API tokens must be at least %d characters", ErrInvalidConfig, MinTokenLength)
		}
		if admin != "" && tok == admin {
			return fmt.Errorf("%w: the admin token must not also be an API token", ErrInvalidConfig)
		}
	}
	return nil
}

// requireMetrics guards /metrics when a metrics token is configured.
func (s *Server) requireMetrics(c *gin.Context) {
	if s.metricsToken == nil {
		c.Next()
		return
	}
	s.requireBearer(c, "idgen-metrics", s.metricsToken, errNotMetrics)
}

// requireAdmin guards /admin/*: closed unless a token is configured.
func (s *Server) requireAdmin(c *gin.Context) {
	if s.auth.admin == nil {
		s.writeError(c, errAdminDisabled)
		return
	}
	s.requireBearer(c, "idgen-admin", s.auth.admin, errNotAdmin)
}

// requireBearer lets the request on only with the bearer token whose
// digest is want: 401 without a token, 403 (wrong) with another one.
func (s *Server) requireBearer(c *gin.Context, realm string, want *token, wrong *apiError) {
	tok, ok := bearer(c)
	if !ok {
		c.Header("WWW-Authenticate", `Bearer realm="`+realm+`"`)
		s.writeError(c, errUnauthorized)
		return
	}
	d := digest(tok)
	if subtle.ConstantTimeCompare(d[:], want[:]) != 1 {
		s.writeError(c, wrong)
		return
	}
	c.Next()
}

// requireTag admits a request to an ID route for the path's tag
// (admitTag); a request without a token is asked for one.
func (s *Server) requireTag(c *gin.Context) {
	var tok string
	var ok bool
	if !s.auth.apiOpen {
		tok, ok = bearer(c)
	}
	if err := s.admitTag(tok, ok, c.Param("tag")); err != nil {
		if errors.Is(err, errUnauthorized) {
			c.Header("WWW-Authenticate", `Bearer realm="idgen"`)
		}
		s.writeError(c, err)
		return
	}
	c.Next()
}

// admitTag is the one check of the tag of an ID request, shared by every
// route that takes one (/id, /segment, /snowflake, the range route,
// Leaf's and tinyid's routes) and by the gRPC API, so that the same bad
// tag gets the same answer everywhere: first the client token, when
// client tokens are configured (ok is false without one), then the tag
// rule, idgen.CheckTag. The generators check the tag again; this check
// is for the answer, which must not depend on the route or the mode.
func (s *Server) admitTag(tok string, ok bool, tag string) error {
	if !s.auth.apiOpen {
		if !ok {
			return errUnauthorized
		}
		if err := s.auth.check(tok, tag); err != nil {
			return err
		}
	}
	return idgen.CheckTag(tag)
}

// isAdmin reports whether tok is the admin token.
func (a *authz) isAdmin(tok string) bool {
	if a.admin == nil {
		return false
	}
	d := digest(tok)
	return subtle.ConstantTimeCompare(d[:], a.admin[:]) == 1
}

// check returns nil if the client token tok may use tag, and otherwise
// the answer: errAdminOnIDs for the admin token, errForbidden for any
// other token that does not allow tag.
func (a *authz) check(tok, tag string) error {
	d := digest(tok)
	if a.admin != nil && subtle.ConstantTimeCompare(d[:], a.admin[:]) == 1 {
		// One secret, one job: the admin token leaking into every client
		// that needs IDs would make it no secret at all.
		return errAdminOnIDs
	}
	var tags map[string]bool
	// Compare against every token, without stopping at a match, so that
	// timing does not tell which prefix of the table matched.
	for _, known := range a.apiAllow {
		if subtle.ConstantTimeCompare(d[:], known[:]) == 1 {
			tags = a.api[known]
		}
	}
	if !tags["*"] && !tags[tag] { // a nil map allows nothing
		return errForbidden
	}
	return nil
}

// probePath reports whether path is a probe's, which answers without a
// client certificate under mutual TLS: the kubelet's HTTPS probes send
// none, and a probe learns only whether the process is up and ready.
func probePath(path string) bool {
	return path == "/healthz" || path == "/readyz" || strings.HasPrefix(path, "/grpc.health.v1.Health/")
}

// hasClientCert reports whether r came over TLS with a client
// certificate that the handshake verified against the client CA.
func hasClientCert(r *http.Request) bool {
	return r.TLS != nil && len(r.TLS.VerifiedChains) > 0
}

// requireClientCert is the HTTP half of Config.RequireClientCert (the
// gRPC half is in rpcHandler).
func (s *Server) requireClientCert(c *gin.Context) {
	if probePath(c.Request.URL.Path) || hasClientCert(c.Request) {
		c.Next()
		return
	}
	s.writeError(c, errClientCert)
}
