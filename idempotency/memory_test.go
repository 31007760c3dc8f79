package idempotency_test

import (
	"testing"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/store/storetest"
)

func TestMemory_Conformance(t *testing.T) { storetest.RunIdempotency(t, idempotency.NewMemory()) }
