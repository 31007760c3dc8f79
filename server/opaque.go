package server

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen"
)

// decodeOpaque answers GET /admin/opaque/{tag}/{id} with the counter
// behind an opaque ID: behind the admin token, since the counter is what
// the tag hides. It needs the key, not the store, so it decodes any
// value; whether the tag is opaque under this key is the admin's to check
// in GET /admin/tags.
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
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		s.writeError(c, &apiError{http.StatusBadRequest, "invalid_id", "an opaque ID is a whole number from 1 to 9223372036854775807"})
		return
	}
	counter, err := s.cfg.OpaqueKey.Decode(tag, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"tag": tag, "id": strconv.FormatInt(id, 10), "counter": strconv.FormatInt(counter, 10)})
}
