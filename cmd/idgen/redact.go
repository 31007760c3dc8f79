package main

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/idgen/idgen/store"
)

// rePassword finds the password of PostgreSQL's key=value DSN form,
// quoted or not.
var rePassword = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redact hides the password of a DSN before it is logged, whether in the
// user info, in a password query parameter, or in the key=value form.
func redact(dsn string) string {
	if d, err := store.Driver(dsn); err == nil && d == "postgres" && !strings.Contains(dsn, "://") {
		return rePassword.ReplaceAllString(dsn, "${1}xxxxx")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparseable DSN)"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}
