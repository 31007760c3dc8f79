package server

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/readable"
	"github.com/idgen/idgen/segment"
)

// decodeOpaque answers GET /admin/opaque/{tag}/{id} with the counter
// behind an opaque ID: behind the admin token, since the counter is what
// the tag hides. The ID is decimal or prefixed (tag_…, ?format=prefixed's
// form). The tag is read from the store first: one that does not exist
// is 404, a plain one 409 (its IDs are its counters), so that nothing is
// made up and no permutation is made for a name the store lacks; a
// counter at or above the tag's max_id comes back with "issued": false,
// since no instance ever handed it out.
func (s *Server) decodeOpaque(c *gin.Context) {
	if s.cfg.OpaqueKey == nil {
		s.writeError(c, errNoOpaqueKey)
		return
	}
	tag := c.Param("tag")
	if err := idgen.CheckTag(tag); err != nil {
		s.writeError(c, err)
		return
	}
	id, err := parseOpaqueID(tag, c.Param("id"))
	if err != nil {
		s.writeError(c, err)
		return
	}
	if s.cfg.Admin == nil {
		s.writeError(c, errAdminOff)
		return
	}
	t, err := findTag(c, s.cfg.Admin, tag)
	if err != nil {
		s.writeError(c, err)
		return
	}
	d, err := s.cfg.OpaqueKey.DecodeTag(t, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"tag": tag, "id": strconv.FormatInt(id, 10), "counter": strconv.FormatInt(d.Counter, 10),
		"issued": d.Issued, "max_id": strconv.FormatInt(t.MaxID, 10), "key_fingerprint": d.Fingerprint})
}

// errInvalidOpaqueID is the answer to an ID that is neither form.
var errInvalidOpaqueID = &apiError{http.StatusBadRequest, "invalid_id", "an opaque ID is a whole number from 1 to 9223372036854775807, or its prefixed form (TAG_…) for the same tag"}

// parseOpaqueID reads an ID of tag, decimal or prefixed.
func parseOpaqueID(tag, s string) (int64, error) {
	if id, err := strconv.ParseInt(s, 10, 64); err == nil {
		if id < 1 {
			return 0, errInvalidOpaqueID
		}
		return id, nil
	}
	of, id, err := readable.Decode(s)
	if err != nil || of != tag || id < 1 {
		return 0, errInvalidOpaqueID
	}
	return id, nil
}

// findTag reads one tag from the store, or segment.ErrTagNotFound.
func findTag(c *gin.Context, a TagAdmin, tag string) (segment.Tag, error) {
	ctx, cancel := adminCtx(c)
	defer cancel()
	tags, err := a.ListTags(ctx)
	if err != nil {
		return segment.Tag{}, err
	}
	for _, t := range tags {
		if t.Name == tag {
			return t, nil
		}
	}
	return segment.Tag{}, errDecodeNotFound
}

var errDecodeNotFound = &apiError{http.StatusNotFound, "tag_not_found", "no such tag in the store: an ID of a tag that does not exist was never issued"}
