package snowflaketest_test

import (
	"testing"

	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/snowflake/snowflaketest"
)

var _ snowflake.LeaseTable = (*snowflaketest.Memory)(nil)

func TestMemLeaseStore_Conformance(t *testing.T) {
	s := snowflaketest.NewMemory()
	snowflaketest.RunLeaseStore(t, func(*testing.T) snowflaketest.LeaseStore { return s })
}

func TestMemLeaseStore_LayoutConformance(t *testing.T) {
	snowflaketest.RunLayoutStore(t, func(*testing.T) func(*testing.T) snowflake.LeaseTable {
		s := snowflaketest.NewMemory()
		return func(*testing.T) snowflake.LeaseTable { return s }
	})
}
