package server

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

var (
	errUnauthorized  = &apiError{http.StatusUnauthorized, "unauthorized", "send Authorization: Bearer <token>"}
	errForbidden     = &apiError{http.StatusForbidden, "forbidden", "the token is wrong or not allowed for this tag"}
	errAdminDisabled = &apiError{http.StatusForbidden, "admin_disabled", "the admin API is off; start the server with --admin-token (IDGEN_ADMIN_TOKEN)"}
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
		if !ok || len(tok) < 8 || strings.TrimSpace(tags) == "" {
			return nil, fmt.Errorf("server: API token entry %d: want TOKEN=tag1,tag2 or TOKEN=* with a token of at least 8 characters", n)
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

func bearer(c *gin.Context) (string, bool) {
	h := c.GetHeader("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// requireAdmin guards /admin/*: closed unless a token is configured.
func (s *Server) requireAdmin(c *gin.Context) {
	if s.auth.admin == nil {
		s.writeError(c, errAdminDisabled)
		return
	}
	tok, ok := bearer(c)
	if !ok {
		c.Header("WWW-Authenticate", `Bearer realm="idgen-admin"`)
		s.writeError(c, errUnauthorized)
		return
	}
	d := digest(tok)
	if subtle.ConstantTimeCompare(d[:], s.auth.admin[:]) != 1 {
		s.writeError(c, errForbidden)
		return
	}
	c.Next()
}

// requireTagToken guards the ID endpoints when client tokens are
// configured: the token must exist and allow the path's tag.
func (s *Server) requireTagToken(c *gin.Context) {
	if s.auth.apiOpen {
		c.Next()
		return
	}
	tok, ok := bearer(c)
	if !ok {
		c.Header("WWW-Authenticate", `Bearer realm="idgen"`)
		s.writeError(c, errUnauthorized)
		return
	}
	if !s.auth.allows(tok, c.Param("tag")) {
		s.writeError(c, errForbidden)
		return
	}
	c.Next()
}

// allows reports whether the client token tok may use tag.
func (a *authz) allows(tok, tag string) bool {
	d := digest(tok)
	var tags map[string]bool
	// Compare against every token, without stopping at a match, so that
	// timing does not tell which prefix of the table matched.
	for _, known := range a.apiAllow {
		if subtle.ConstantTimeCompare(d[:], known[:]) == 1 {
			tags = a.api[known]
		}
	}
	return tags != nil && (tags["*"] || tags[tag])
}
