package mysql

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	driver "github.com/go-sql-driver/mysql"
)

func TestIsRetryable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"deadlock or Galera certification conflict", &driver.MySQLError{Number: 1213, Message: "Deadlock found"}, true},
		{"lock wait timeout", &driver.MySQLError{Number: 1205}, true},
		{"wrapped deadlock", fmt.Errorf("store: reserve %q: %w", "t", &driver.MySQLError{Number: 1213}), true},
		{"duplicate key", &driver.MySQLError{Number: 1062}, false},
		{"Galera node not ready", &driver.MySQLError{Number: 1047}, false},
		{"no rows", sql.ErrNoRows, false},
		{"connection lost", driver.ErrInvalidConn, false},
		{"other", errors.New("boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := spelling.IsRetryable(tc.err); got != tc.want {
				t.Errorf("IsRetryable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
