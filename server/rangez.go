package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/segment"
)

// RangeReserver hands out whole ranges, for clients that cache them;
// *segment.Allocator implements it.
type RangeReserver interface {
	ReserveRange(ctx context.Context, tag string, n int64) (segment.Range, error)
}

// RangeReleaser takes back the unused end of a range RangeReserver
// handed out, with segment.Releaser's compare-and-set; *segment.Allocator
// implements it. The server finds it on Config.Ranges by type assertion.
type RangeReleaser interface {
	ReleaseRange(ctx context.Context, tag string, from, to int64) (bool, error)
}

var (
	errRangeNotReleased = &apiError{http.StatusConflict, "range_not_released",
		"the range was not taken back: this instance did not hand it out with this release_token (another instance did, or it was forgotten), it was handed back already, or the tag was reserved past it since; its unused IDs stay unused, which is no error (IDs are not dense)"}
	errInvalidRelease = &apiError{http.StatusBadRequest, "invalid_release",
		`send {"release_token": "<from the range answer>", "from": "<first unused ID>"} with from between the range's start and end`}
	errReleaseDisabled = &apiError{http.StatusNotFound, "release_disabled", "this server takes no ranges back; the unused rest of a range stays unused"}
)

// maxOutstanding bounds the ranges a server remembers for a hand-back:
// past it, the oldest is forgotten, and its holder's release is refused
// (a gap, never a duplicate).
const maxOutstanding = 100_000

// rangeBook remembers the ranges this instance handed out and not yet
// taken back, by a random release token sent with each: a range goes back
// only by its token, which only its holder has, and only once, since the
// token is forgotten at its first use. The store's compare-and-set alone
// would not do: a retried release could take back a range that another
// client reserved in between at the same end.
type rangeBook struct {
	mu    sync.Mutex
	held  map[string]heldRange
	order []string // tokens, oldest first; some already used
}

type heldRange struct {
	tag        string
	start, end int64
}

// issue records r and returns its release token.
func (b *rangeBook) issue(tag string, r segment.Range) string {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	tok := hex.EncodeToString(raw[:])
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == nil {
		b.held = map[string]heldRange{}
	}
	for len(b.held) >= maxOutstanding && len(b.order) > 0 {
		delete(b.held, b.order[0])
		b.order = b.order[1:]
	}
	if len(b.order) > 2*maxOutstanding { // mostly used tokens: compact
		live := b.order[:0]
		for _, t := range b.order {
			if _, ok := b.held[t]; ok {
				live = append(live, t)
			}
		}
		b.order = live
	}
	b.held[tok] = heldRange{tag, r.Start, r.End}
	b.order = append(b.order, tok)
	return tok
}

// take forgets the range of tok and returns it, if it is tag's.
func (b *rangeBook) take(tok, tag string) (heldRange, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[tok]
	if !ok || h.tag != tag {
		return heldRange{}, false
	}
	delete(b.held, tok)
	return h, true
}

// reserveRange answers POST /segment/{tag}/range?size=N with a contiguous
// range reserved straight from the store (service.reserve). The range
// holds at least size IDs, more when the tag's step is larger; a size
// above MaxRange is clamped (see the client package).
func (s *Server) reserveRange(c *gin.Context) {
	if s.cfg.Ranges == nil {
		s.writeError(c, errModeDisabled)
		return
	}
	vals := c.Request.URL.Query()["size"]
	size, err := strconv.ParseInt(firstOrEmpty(vals), 10, 64)
	if len(vals) != 1 || err != nil || size < 1 {
		s.writeError(c, s.errInvalidSize())
		return
	}
	tag := c.Param("tag")
	r, err := s.svc.reserve(c.Request.Context(), tag, size)
	if err != nil {
		s.writeError(c, err)
		return
	}
	out := gin.H{"tag": tag, "start": strconv.FormatInt(r.Start, 10), "end": strconv.FormatInt(r.End, 10)}
	if tok := s.svc.releaseToken(tag, r); tok != "" {
		out["release_token"] = tok
	}
	c.PureJSON(http.StatusOK, out)
}

// releaseRange answers POST /segment/{tag}/range/release: the holder of
// a range hands back its unused end, [from, end), by the range's
// release_token.
func (s *Server) releaseRange(c *gin.Context) {
	var body struct {
		Token string `json:"release_token"`
		From  string `json:"from"`
	}
	if err := c.ShouldBindJSON(&body); err != nil {
		s.writeError(c, errInvalidRelease)
		return
	}
	from, err := strconv.ParseInt(body.From, 10, 64)
	if err != nil || body.Token == "" {
		s.writeError(c, errInvalidRelease)
		return
	}
	r, err := s.svc.release(c.Request.Context(), c.Param("tag"), body.Token, from)
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"tag": r.tag, "from": strconv.FormatInt(from, 10), "end": strconv.FormatInt(r.end, 10), "released": true})
}

// release is the one hand-back of HTTP and gRPC: tok must name a range
// of tag this instance handed out and not yet took back, and from must
// lie in it. The token is spent even when from is out of the range or the
// store refuses: a second try must never succeed where the first did not
// say what happened.
func (s *service) release(ctx context.Context, tag, tok string, from int64) (heldRange, error) {
	if s.releaser == nil {
		return heldRange{}, errReleaseDisabled
	}
	r, ok := s.book.take(tok, tag)
	if !ok {
		return heldRange{}, errRangeNotReleased
	}
	if from < r.start || from > r.end {
		return heldRange{}, errInvalidRelease
	}
	if from == r.end {
		return r, nil // nothing left unused
	}
	done, err := s.releaser.ReleaseRange(ctx, tag, from, r.end)
	if err != nil {
		return heldRange{}, err
	}
	if !done {
		return heldRange{}, errRangeNotReleased
	}
	return r, nil
}

func firstOrEmpty(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// errInvalidSize answers a range size that is not a whole number of at
// least 1; a larger one than MaxRange is clamped, not refused.
func (s *Server) errInvalidSize() *apiError {
	return &apiError{http.StatusBadRequest, "invalid_size",
		"size must be a single whole number of at least 1 (ranges above " + strconv.FormatInt(s.cfg.MaxRange, 10) + " are clamped to it)"}
}
