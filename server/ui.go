package server

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/gin-gonic/gin"
)

// uiFiles is the monitoring page: static HTML, CSS and JavaScript with no
// build step. The page keeps the admin token in the browser and reads
// /admin/segments itself, so serving it needs no authentication.
//
//go:embed ui
var uiFiles embed.FS

// uiCSP allows the page its own files and its own API, and nothing else:
// no inline script or style, no other origin, no framing.
const uiCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'"

var uiTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// uiAsset is one embedded file, read once at route setup.
type uiAsset struct {
	body []byte
	typ  string
	etag string
}

var errUIDisabled = &apiError{http.StatusNotFound, "ui_disabled",
	"the monitoring page reads /admin/segments, which this server does not serve: start it with --admin-token (IDGEN_ADMIN_TOKEN)"}

// uiDisabled answers /ui on a server without an admin token.
func (s *Server) uiDisabled(c *gin.Context) { s.writeError(c, errUIDisabled) }

// registerUI serves the monitoring page at GET /ui and its assets at
// GET /ui/{file}. Only the embedded files are reachable; any other name
// is a 404 in the usual error shape.
func registerUI(r gin.IRoutes) {
	assets := map[string]uiAsset{}
	err := fs.WalkDir(uiFiles, "ui", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		typ, ok := uiTypes[path.Ext(p)]
		if !ok {
			return nil
		}
		b, err := uiFiles.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		assets[strings.TrimPrefix(p, "ui/")] = uiAsset{b, typ, `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		// The files are compiled in; failing to read them is a build defect.
		panic("server: reading embedded UI: " + err.Error())
	}
	serve := func(c *gin.Context, name string) {
		a, ok := assets[name]
		if !ok {
			c.AbortWithStatusPureJSON(errNotFound.status, gin.H{"error": gin.H{"code": errNotFound.code, "message": errNotFound.message,
				"request_id": c.Writer.Header().Get(requestIDHeader)}})
			return
		}
		h := c.Writer.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if a.typ == uiTypes[".html"] {
			h.Set("Content-Security-Policy", uiCSP)
		}
		if c.GetHeader("If-None-Match") == a.etag {
			c.Status(http.StatusNotModified)
			return
		}
		c.Data(http.StatusOK, a.typ, a.body)
	}
	r.GET("/ui", func(c *gin.Context) { serve(c, "index.html") })
	r.GET("/ui/*file", func(c *gin.Context) {
		name := strings.TrimPrefix(c.Param("file"), "/")
		if name == "" {
			name = "index.html"
		}
		serve(c, name)
	})
}
