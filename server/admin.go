package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/segment"
)

// TagAdmin is what the admin API needs from the store.
type TagAdmin interface {
	CreateTag(ctx context.Context, t segment.Tag) error
	ListTags(ctx context.Context) ([]segment.Tag, error)
	SetStep(ctx context.Context, tag string, step int64) error
}

// SegmentStats is what the monitoring endpoints read from the allocator.
type SegmentStats interface {
	Stats() []segment.SequenceStats
}

// WorkerStatus describes the snowflake worker lease for monitoring.
type WorkerStatus struct {
	WorkerID       int64
	LeaseExpiresAt time.Time // zero for a static worker ID
	LastTimestamp  time.Time
	Err            error // why IDs cannot be issued now, or nil
}

// maxAdminBody bounds admin request bodies; a tag definition is tiny.
const maxAdminBody = 16 << 10

// adminTimeout bounds each admin call to the store, so that a hung
// database answers 503 instead of holding requests and connections.
const adminTimeout = 5 * time.Second

func adminCtx(c *gin.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Request.Context(), adminTimeout)
}

var (
	// Auto-create never applies to PATCH: the tag must exist.
	errPatchNotFound = &apiError{http.StatusNotFound, "tag_not_found", "no such tag; create it first with POST /admin/tags or idgen tag add"}
	errAdminOff      = &apiError{http.StatusNotFound, "admin_unavailable", "this server has no tag store to administer"}
	errNoOpaqueKey   = &apiError{http.StatusBadRequest, "opaque_key_missing",
		"this server holds no opaque key: start it with --opaque-key-file (or IDGEN_OPAQUE_KEY) to create or decode opaque tags"}
	// A raw and an opaque ID of one tag could be equal, so a tag never
	// switches; a tag that has issued no ID yet is no exception, since no
	// instance can know that no ID of it is buffered somewhere.
	errOpaqueFixed = &apiError{http.StatusConflict, "opaque_fixed",
		"a tag is opaque or plain for its whole life: its IDs could collide otherwise; create a new tag with \"opaque\": true"}
	errBadBody = &apiError{http.StatusBadRequest, "invalid_body",
		`send a JSON object such as {"tag":"order","step":1000,"start":1,"description":"…"} (at most 16 KiB, no unknown fields)`}
)

type tagJSON struct {
	Tag         string `json:"tag"`
	NextID      string `json:"next_id"`
	Step        int64  `json:"step"`
	Description string `json:"description"`
	UpdatedAt   string `json:"updated_at"`
	// Opaque tags hand out encrypted counters (docs/segment.md).
	Opaque bool `json:"opaque"`
	// KeyFingerprint names the key an opaque tag was created under.
	KeyFingerprint string `json:"key_fingerprint,omitempty"`
}

// toTagJSON renders updated_at at millisecond precision, like every other
// time in the API: the stores keep seconds (SQLite) to microseconds
// (PostgreSQL), and an answer's precision must not depend on which.
func toTagJSON(t segment.Tag) tagJSON {
	return tagJSON{Tag: t.Name, NextID: strconv.FormatInt(t.MaxID, 10), Step: t.Step,
		Description: t.Description, UpdatedAt: t.UpdatedAt.UTC().Format(timeLayout),
		Opaque: t.Opaque != "", KeyFingerprint: t.Opaque}
}

// decodeBody reads a small JSON body strictly into v. The answer names
// what is wrong: the unknown field, the field of the wrong type, or the
// size.
func decodeBody(c *gin.Context, v any) error { return decodeBodyAs(c, v, errBadBody) }

// decodeBodyAs is decodeBody for a route whose invalid_body answer is
// bad, which says what to send.
func decodeBodyAs(c *gin.Context, v any, bad *apiError) error {
	dec := json.NewDecoder(http.MaxBytesReader(c.Writer, c.Request.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badBody(err, bad)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &apiError{bad.status, bad.code, "one JSON object only, nothing after it: " + bad.message}
	}
	return nil
}

// badBody says which part of a body the decoder refused. encoding/json
// has no typed error for an unknown field, only its text, which quotes
// the field's name as the body spelt it.
func badBody(err error, bad *apiError) *apiError {
	var te *json.UnmarshalTypeError
	var me *http.MaxBytesError
	var why string
	switch {
	case errors.As(err, &te) && te.Field != "":
		why = strconv.Quote(te.Field) + " must be a JSON " + jsonKind(te.Type.Kind().String()) + ", not a " + te.Value
	case errors.As(err, &me):
		why = "the body is larger than 16 KiB"
	default:
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			why = "unknown field " + f
		}
	}
	if why == "" {
		return bad
	}
	return &apiError{bad.status, bad.code, why + ": " + bad.message}
}

// jsonKind names a Go kind as JSON does.
func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"), strings.HasPrefix(k, "float"):
		return "number"
	case k == "ptr":
		return "number" // the optional step and start
	}
	return k
}

func (s *Server) listTags(c *gin.Context) {
	if s.cfg.Admin == nil {
		s.writeError(c, errAdminOff)
		return
	}
	ctx, cancel := adminCtx(c)
	defer cancel()
	tags, err := s.cfg.Admin.ListTags(ctx)
	if err != nil {
		s.writeError(c, err)
		return
	}
	out := make([]tagJSON, 0, len(tags))
	for _, t := range tags {
		out = append(out, toTagJSON(t))
	}
	c.PureJSON(http.StatusOK, gin.H{"tags": out})
}

func (s *Server) createTag(c *gin.Context) {
	if s.cfg.Admin == nil {
		s.writeError(c, errAdminOff)
		return
	}
	var req struct {
		Tag         string `json:"tag"`
		Step        *int64 `json:"step"`
		Start       *int64 `json:"start"`
		Description string `json:"description"`
		Opaque      bool   `json:"opaque"`
	}
	if err := decodeBody(c, &req); err != nil {
		s.writeError(c, err)
		return
	}
	t := segment.Tag{Name: req.Tag, MaxID: 1, Step: 1000, Description: req.Description}
	if req.Opaque {
		if s.cfg.OpaqueKey == nil {
			s.writeError(c, errNoOpaqueKey)
			return
		}
		t.Opaque = s.cfg.OpaqueKey.Fingerprint()
	}
	if req.Step != nil {
		t.Step = *req.Step
	}
	if req.Start != nil {
		t.MaxID = *req.Start
	}
	ctx, cancel := adminCtx(c)
	defer cancel()
	if err := s.cfg.Admin.CreateTag(ctx, t); err != nil {
		s.writeError(c, err)
		return
	}
	// A fenced (or bumped) store starts the tag above the start asked for,
	// at its tag floor: answer with the row as stored, so next_id is the
	// first ID the tag will really hand out. The tag exists either way, so
	// a failed read answers with the request rather than an error.
	if tags, err := s.cfg.Admin.ListTags(ctx); err == nil {
		for _, st := range tags {
			if st.Name == t.Name {
				t = st
				break
			}
		}
	}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = time.Now()
	}
	c.PureJSON(http.StatusCreated, toTagJSON(t))
}

func (s *Server) patchTag(c *gin.Context) {
	if s.cfg.Admin == nil {
		s.writeError(c, errAdminOff)
		return
	}
	var req struct {
		Step   *int64 `json:"step"`
		Opaque *bool  `json:"opaque"`
	}
	if err := decodeBody(c, &req); err != nil {
		s.writeError(c, err)
		return
	}
	if req.Opaque != nil {
		s.writeError(c, errOpaqueFixed)
		return
	}
	if req.Step == nil {
		s.writeError(c, &apiError{http.StatusBadRequest, "invalid_body", `send {"step": N}`})
		return
	}
	tag := c.Param("tag")
	if err := idgen.CheckTag(tag); err != nil {
		s.writeError(c, err)
		return
	}
	ctx, cancel := adminCtx(c)
	defer cancel()
	if err := s.cfg.Admin.SetStep(ctx, tag, *req.Step); err != nil {
		if errors.Is(err, segment.ErrTagNotFound) {
			err = errPatchNotFound
		}
		s.writeError(c, err)
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"tag": tag, "step": *req.Step})
}

type bufferJSON struct {
	Start string `json:"start"`
	End   string `json:"end"`
	Pos   string `json:"pos"`
}

type segmentJSON struct {
	Tag     string `json:"tag"`
	Active  string `json:"active"`
	Buffers struct {
		Current *bufferJSON `json:"current"`
		Next    *bufferJSON `json:"next"`
	} `json:"buffers"`
	Step       int64   `json:"step"`
	RowStep    int64   `json:"row_step"`
	Rate       float64 `json:"rate_per_sec"`
	Loading    bool    `json:"loading"`
	LastLoad   *string `json:"last_load"`
	LastLoadMS float64 `json:"last_load_latency_ms"`
	LastError  string  `json:"last_error"`
}

type workerJSON struct {
	WorkerID       int64   `json:"worker_id"`
	LeaseExpiresAt *string `json:"lease_expires_at"`
	LastTimestamp  *string `json:"last_timestamp"`
	Ready          bool    `json:"ready"`
	Error          string  `json:"error"`
}

func bufJSON(b segment.BufferStats) *bufferJSON {
	return &bufferJSON{strconv.FormatInt(b.Start, 10), strconv.FormatInt(b.End, 10), strconv.FormatInt(b.Pos, 10)}
}

// timeLayout is RFC 3339 at millisecond precision, the one form of every
// time in the API.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func timeJSON(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(timeLayout)
	return &s
}

// segments is Leaf's /cache view: both buffers of every tag, plus the
// snowflake worker.
func (s *Server) segments(c *gin.Context) {
	out := struct {
		Mode      string        `json:"mode"`
		Segments  []segmentJSON `json:"segments"`
		Snowflake *workerJSON   `json:"snowflake"`
	}{Mode: s.cfg.Mode, Segments: []segmentJSON{}}
	if s.cfg.Stats != nil {
		for _, st := range s.cfg.Stats.Stats() {
			j := segmentJSON{Tag: st.Tag, Active: "current", Step: st.Step, RowStep: st.RowStep, Rate: st.Rate,
				Loading: st.Loading, LastLoad: timeJSON(st.LastLoad),
				LastLoadMS: float64(st.LastLatency.Microseconds()) / 1000}
			switch {
			case st.LastErr != nil:
				j.LastError = s.monitoredError(c, "the reservation of tag "+strconv.Quote(st.Tag), st.LastErr)
			case st.LastError != "":
				j.LastError = s.monitoredError(c, "the reservation of tag "+strconv.Quote(st.Tag), errors.New(st.LastError))
			}
			if st.Current != (segment.BufferStats{}) {
				j.Buffers.Current = bufJSON(st.Current)
			}
			if st.Next != nil {
				j.Buffers.Next = bufJSON(*st.Next)
			}
			out.Segments = append(out.Segments, j)
		}
	}
	if s.cfg.Worker != nil {
		w := s.cfg.Worker()
		j := &workerJSON{WorkerID: w.WorkerID, LeaseExpiresAt: timeJSON(w.LeaseExpiresAt), LastTimestamp: timeJSON(w.LastTimestamp), Ready: w.Err == nil}
		if w.Err != nil {
			j.Error = s.monitoredError(c, "the snowflake worker lease", w.Err)
		}
		out.Snowflake = j
	}
	sort.Slice(out.Segments, func(i, j int) bool { return out.Segments[i].Tag < out.Segments[j].Tag })
	c.PureJSON(http.StatusOK, out)
}
